/**
 * An `@upstash/redis` client (and Vercel KV's, which is one) driven as a {@link RedisLike}: the same
 * scripts and commands as on ioredis, each sent over Upstash's REST API, one HTTPS request per command,
 * or per batch where the client pipelines the commands of one tick (`enableAutoPipelining`, on by
 * default).
 *
 * The client JSON-parses string replies by default (`automaticDeserialization`). The store's replies
 * survive it unaltered: a record's value starts with its expiry's digits and a space, a claim's stub
 * with `~`, so neither is JSON; counts and times are integers already. Only SCAN's key names could be
 * JSON, and only under a prefix that starts with `"` or white space, which the store refuses on this
 * client. The client decodes its base64 replies (`Upstash-Encoding: base64`, its default) itself.
 */
import type { RedisLike } from "./redis-store.js";

/**
 * The part of an `@upstash/redis` `Redis` the store uses: `Redis` from `@upstash/redis`,
 * `@upstash/redis/cloudflare` or `@upstash/redis/fastly`, and Vercel KV's `kv` and `createClient()`. What
 * the store does about its retries, deserialization and encoding: docs/stores.md, "Upstash Redis and
 * Vercel KV".
 * @example
 * import { Redis } from "@upstash/redis";
 * import { redisStore } from "idempotool/redis";
 *
 * const store = redisStore({ client: Redis.fromEnv(), prefix: "agents:idem:" });
 */
export interface UpstashRedisLike {
  evalsha(sha: string, keys: string[], args: string[]): Promise<unknown>;
  eval(script: string, keys: string[], args: string[]): Promise<unknown>;
  scan(
    cursor: string | number,
    options: { match: string; count: number; type: string },
  ): Promise<[cursor: string | number, names: unknown[]]>;
  createScript(script: string): unknown;
}

/**
 * Whether `client` is an `@upstash/redis` client: it makes scripts with `createScript`, which neither
 * ioredis (`defineCommand`) nor node-redis has.
 */
export function isUpstash(client: unknown): client is UpstashRedisLike {
  const shape = client as { createScript?: unknown; evalsha?: unknown; defineCommand?: unknown } | null;
  return (
    typeof shape === "object" &&
    shape !== null &&
    typeof shape.createScript === "function" &&
    typeof shape.evalsha === "function" &&
    typeof shape.defineCommand !== "function"
  );
}

/**
 * Why the store refuses `prefix` on an Upstash client, or undefined. With `automaticDeserialization`
 * on (its default), the client JSON-parses every key name SCAN returns: a name under a prefix that
 * starts with `"` (after any white space) can be a JSON string, and would come back without its quotes.
 */
export function upstashPrefixRefusal(prefix: string): string | undefined {
  return /^[ \t\n\r"]/.test(prefix)
    ? `must not start with '"' or white space on an @upstash/redis client, which JSON-parses the key names SCAN returns (got ${JSON.stringify(prefix)})`
    : undefined;
}

/**
 * The store's commands on an Upstash client. No plain `SET … NX GET` claims: on this client the store
 * remembers released tokens, which only the claim script reads.
 */
export function upstashCommands(upstash: UpstashRedisLike): RedisLike {
  const script =
    (send: (body: string, keys: string[], args: string[]) => Promise<unknown>) =>
    (body: string, numkeys: number, ...args: (string | number)[]) => {
      const strings = args.map(String);
      return redisError(send(body, strings.slice(0, numkeys), strings.slice(numkeys)));
    };
  return {
    evalsha: script((sha, keys, args) => upstash.evalsha(sha, keys, args)),
    eval: script((lua, keys, args) => upstash.eval(lua, keys, args)),
    scan: async (cursor, _match, pattern, _count, count, _type, type) => {
      const [next, names] = await redisError(upstash.scan(cursor, { match: pattern, count, type }));
      // Anything the client turned from JSON into another type is no name of ours (see above).
      return [String(next), names.filter((name): name is string => typeof name === "string")];
    },
  };
}

/**
 * The client's errors, with the message Redis gave: without the client's "Command failed: " (a command
 * in an automatic pipeline) before it, so that `NOSCRIPT` and the like are still read as Redis's; and
 * without its ", command was: […]" after it, which would carry the command's arguments (a record's
 * result among them) into the caller's error and its logs.
 */
async function redisError<T>(reply: Promise<T>): Promise<T> {
  try {
    return await reply;
  } catch (error) {
    if (!(error instanceof Error) || error.name !== "UpstashError") throw error;
    const message = error.message.replace(/^Command failed: /, "").replace(/, command was: [\s\S]*$/, "");
    const redis = new Error(message);
    redis.name = error.name;
    throw redis;
  }
}
