/**
 * A node-redis client (`createClient()` from the `redis` package) driven as a {@link RedisLike}: each of
 * the store's commands goes through its `sendCommand`, with the same arguments and replies as on ioredis.
 * node-redis writes the commands of one turn of the event loop together by itself, so the store corks
 * nothing of its own on it.
 */
import type { RedisLike } from "./redis-store.js";

/** The part of a node-redis client the store uses (`RedisClientType` from the `redis` package, v4). */
export interface NodeRedisLike {
  sendCommand(args: string[]): Promise<unknown>;
}

/** Whether `client` is a node-redis client rather than an ioredis one (which has `evalsha`). */
function isNodeRedis(client: unknown): client is NodeRedisLike {
  const shape = client as { evalsha?: unknown; sendCommand?: unknown } | null;
  return (
    typeof shape === "object" &&
    shape !== null &&
    typeof shape.evalsha !== "function" &&
    typeof shape.sendCommand === "function"
  );
}

/**
 * The node-redis client to drive for `client`, or undefined when it is not one. A v4 client in
 * `legacyMode` has callback-style commands (a lowercase `evalsha` among them, which sends the command and
 * returns undefined): it is driven through its promise-based `v4` commands, never as an ioredis client.
 */
export function nodeRedisOf(client: unknown): NodeRedisLike | undefined {
  if (isLegacyMode(client)) {
    // Its `v4` getter throws unless the client is in legacy mode; here it is.
    const v4 = (client as { v4?: unknown }).v4;
    return isNodeRedis(v4) ? v4 : undefined;
  }
  return isNodeRedis(client) ? client : undefined;
}

/** Whether `client` is a node-redis v4 client created with `legacyMode: true`. */
export function isLegacyMode(client: unknown): boolean {
  const shape = client as { options?: { legacyMode?: unknown } } | null;
  return typeof shape === "object" && shape !== null && shape.options?.legacyMode === true;
}

/** Whether `client` is a node-redis cluster (`createCluster()`), whose commands need their key first. */
export function isNodeRedisCluster(client: unknown): boolean {
  return isNodeRedis(client) && typeof (client as { getMasters?: unknown }).getMasters === "function";
}

/** The store's commands on a node-redis client. */
export function nodeRedisCommands(client: NodeRedisLike): RedisLike {
  const script =
    (command: "EVALSHA" | "EVAL") =>
    (body: string, numkeys: number, ...args: (string | number)[]) =>
      client.sendCommand([command, body, String(numkeys), ...args.map(String)]);
  return {
    evalsha: script("EVALSHA"),
    eval: script("EVAL"),
    set: (key, value, px, ms, nx, get) =>
      client.sendCommand(["SET", key, value, px, String(ms), nx, get]) as Promise<string | null>,
    scan: (cursor, matchToken, pattern, countToken, count, typeToken, type) =>
      client.sendCommand([
        "SCAN",
        cursor,
        matchToken,
        pattern,
        countToken,
        String(count),
        typeToken,
        type,
      ]) as Promise<[cursor: string, elements: string[]]>,
  };
}
