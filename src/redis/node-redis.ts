/**
 * A node-redis client (`createClient()` from the `redis` package, v4, v5 or v6) driven as a {@link RedisLike}:
 * each of the store's commands goes through its `sendCommand`, with the same arguments and replies as on
 * ioredis. node-redis writes the commands of one turn of the event loop together by itself, so the store
 * corks nothing of its own on it.
 */
import type { RedisLike } from "./redis-store.js";

/**
 * The part of a node-redis client the store uses: `RedisClientType` from the `redis` package, v4, v5 or v6
 * (RESP2 or RESP3), or a v5 or v6 `RedisClientPool`.
 */
export interface NodeRedisLike {
  sendCommand(args: string[]): Promise<unknown>;
}

/**
 * How the store calls `sendCommand`: with v5's command options, which replace the client's own for its
 * commands. An empty `typeMapping` reads every reply in node-redis's default types (strings, not the
 * Buffers a client-wide `commandOptions.typeMapping` may ask for). v4 ignores the field.
 */
interface NodeRedisSender {
  sendCommand(args: string[], options: { typeMapping: Record<never, never> }): Promise<unknown>;
}

const defaultTypes = { typeMapping: {} } as const;

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

/**
 * Whether `client` is a node-redis v4 client created with `legacyMode: true`. v5 has no legacy mode (nor
 * the `v4` getter): it ignores the option, and such a client is driven as the promise-based client it is.
 */
export function isLegacyMode(client: unknown): boolean {
  const shape = client as { options?: { legacyMode?: unknown } } | null;
  return typeof shape === "object" && shape !== null && shape.options?.legacyMode === true && "v4" in shape;
}

/**
 * Why the store does not drive `client`, a node-redis client whose `sendCommand` does not take the
 * command alone and answer with a promise; undefined for any other client. Driven as a client, a cluster
 * or a sentinel would read the command as its first parameter (a key, or whether it is read-only), and
 * v5's and v6's `legacy()` interface would send each command and answer undefined.
 */
export function nodeRedisRefusal(client: unknown): string | undefined {
  if (!isNodeRedis(client)) return undefined;
  const shape = client as {
    getMasters?: unknown;
    getSentinelNode?: unknown;
    constructor?: { name?: unknown };
  };
  // v4 has getMasters(); v5 a `masters` getter (on the prototype: `in`, without reading it).
  if (typeof shape.getMasters === "function" || "masters" in shape) {
    return "is a node-redis cluster (createCluster()), which the store does not drive: use an ioredis Cluster";
  }
  if (typeof shape.getSentinelNode === "function") {
    return "is a node-redis sentinel (createSentinel()), which the store does not drive: pass a client of its master";
  }
  if (shape.constructor?.name === "RedisLegacyClient") {
    return "is node-redis v5's callback interface (client.legacy()), whose commands answer no promise: pass the client itself";
  }
  // Any other shape whose sendCommand takes more than (args, options): something comes before the command.
  if (client.sendCommand.length > 2) {
    return "has a sendCommand that takes more than (args, options), as a node-redis cluster or sentinel does; pass a node-redis client (createClient())";
  }
  return undefined;
}

/** The store's commands on a node-redis client. */
export function nodeRedisCommands(nodeRedis: NodeRedisLike): RedisLike {
  const client = nodeRedis as unknown as NodeRedisSender;
  const send = (args: string[]) => client.sendCommand(args, defaultTypes);
  const script =
    (command: "EVALSHA" | "EVAL") =>
    (body: string, numkeys: number, ...args: (string | number)[]) =>
      send([command, body, String(numkeys), ...args.map(String)]);
  return {
    evalsha: script("EVALSHA"),
    eval: script("EVAL"),
    set: (key, value, px, ms, nx, get) =>
      send(["SET", key, value, px, String(ms), nx, get]) as Promise<string | null>,
    scan: (cursor, matchToken, pattern, countToken, count, typeToken, type) =>
      send(["SCAN", cursor, matchToken, pattern, countToken, String(count), typeToken, type]) as Promise<
        [cursor: string, elements: string[]]
      >,
  };
}
