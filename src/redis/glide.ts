/**
 * A Valkey GLIDE client (`GlideClient` or `GlideClusterClient` from `@valkey/valkey-glide`) driven as a
 * {@link RedisLike}: each of the store's commands goes through its `customCommand`, spelled out as on the
 * wire (`SET … PX … NX GET`, `EVALSHA`, `SCAN`), never through GLIDE's typed commands, whose options
 * objects have their own shape: an options object shaped for another client is ignored there, and a `SET`
 * that should have been conditional and expiring would be neither. GLIDE's Rust core writes the commands
 * of many callers on one connection by itself (and, on a cluster, sends a script to its key's slot), so
 * the store corks nothing of its own on it.
 */
import type { RedisLike, RedisScanner } from "./redis-store.js";

/** Where a cluster client sends a command: every primary, or the node at `host` ("address:port"). */
type GlideRoute = "allPrimaries" | { readonly type: "routeByAddress"; readonly host: string };

/**
 * The part of a Valkey GLIDE client the store uses: `GlideClient` or `GlideClusterClient` from
 * `@valkey/valkey-glide` 2.x, on Valkey or Redis. A client created with `compression` enabled is refused.
 * What the store does about GLIDE's timeouts, decoders and errors: docs/stores.md, "Valkey GLIDE".
 * @example
 * import { GlideClient } from "@valkey/valkey-glide";
 * import { redisStore } from "idempotool/redis";
 *
 * const client = await GlideClient.createClient({ addresses: [{ host: "127.0.0.1", port: 6379 }] });
 * const store = redisStore({ client, prefix: "agents:idem:" });
 */
export interface GlideClientLike {
  customCommand(args: string[], options?: { decoder?: number; route?: GlideRoute }): Promise<unknown>;
}

/**
 * GLIDE's `Decoder.String` (its documented value): every reply the store reads as text, whatever
 * `defaultDecoder` the client was given (`Decoder.Bytes` would hand it Buffers). The store never imports
 * GLIDE to read the enum; a type test holds the value to the installed package.
 */
const stringDecoder = 1;

/**
 * Whether `client` is a GLIDE client: it sends raw commands with `customCommand` and runs scripts with
 * `invokeScript`, and has neither ioredis's `evalsha` nor node-redis's `sendCommand`.
 */
export function isGlide(client: unknown): client is GlideClientLike {
  const shape = client as {
    customCommand?: unknown;
    invokeScript?: unknown;
    evalsha?: unknown;
    sendCommand?: unknown;
  } | null;
  return (
    typeof shape === "object" &&
    shape !== null &&
    typeof shape.customCommand === "function" &&
    typeof shape.invokeScript === "function" &&
    typeof shape.evalsha !== "function" &&
    typeof shape.sendCommand !== "function"
  );
}

/** Whether a GLIDE client is a cluster client: only `GlideClusterClient` routes its scripts itself. */
function isGlideCluster(client: GlideClientLike): boolean {
  return typeof (client as { invokeScriptWithRoute?: unknown }).invokeScriptWithRoute === "function";
}

/**
 * Why the store does not drive `client`, a GLIDE client, or undefined for any other client (and for a
 * GLIDE client it drives). A client with `compression` enabled compresses the value of a `SET`, even one
 * sent through `customCommand`: the claim's record would be stored as bytes that the store's scripts, and
 * every other client, cannot read.
 */
export function glideRefusal(client: unknown): string | undefined {
  if (!isGlide(client)) return undefined;
  // The options the client was created with (a private field of GLIDE's, read, never written).
  const config = (client as { config?: { compression?: { enabled?: unknown } } }).config;
  if (config?.compression?.enabled === true) {
    return "is a Valkey GLIDE client with compression enabled, which would store the store's records compressed where its scripts cannot read them: pass a client created without compression";
  }
  return undefined;
}

/** The store's commands on a GLIDE client. */
export function glideCommands(glide: GlideClientLike): RedisLike {
  const raw = async (args: string[], route?: GlideRoute): Promise<unknown> => {
    try {
      return await glide.customCommand(
        args,
        route === undefined ? { decoder: stringDecoder } : { decoder: stringDecoder, route },
      );
    } catch (error) {
      throw redisError(error);
    }
  };
  const send = async (args: string[], route?: GlideRoute) => checkedReply(args[0]!, await raw(args, route));
  const script =
    (command: "EVALSHA" | "EVAL") =>
    (body: string, numkeys: number, ...args: (string | number)[]) =>
      send([command, body, String(numkeys), ...args.map(String)]);
  const scanArgs = (cursor: string, pattern: string, count: number, type: string) => [
    "SCAN",
    cursor,
    "MATCH",
    pattern,
    "COUNT",
    String(count),
    "TYPE",
    type,
  ];
  return {
    evalsha: script("EVALSHA"),
    eval: script("EVAL"),
    set: async (key, value, px, ms, nx, get) => {
      const reply = await send(["SET", key, value, px, String(ms), nx, get]);
      if (reply !== null && typeof reply !== "string") throw unexpected("SET", reply);
      return reply;
    },
    scan: isGlideCluster(glide)
      ? clusterScan(raw, send, scanArgs)
      : async (cursor, _match, pattern, _count, count, _type, type) =>
          scanPage(await send(scanArgs(cursor, pattern, count, type))),
  };
}

/**
 * SCAN over every primary of a cluster, as one scanner whose cursor carries the walk: the first call asks
 * every primary at once (GLIDE's "allPrimaries" route answers each node's first page under its address),
 * and each later call goes on with one node whose walk is not over, by its address. The cursor is `"0"`
 * again once every node's is: what SCAN's caller expects of one node.
 */
function clusterScan(
  raw: (args: string[], route?: GlideRoute) => Promise<unknown>,
  send: (args: string[], route?: GlideRoute) => Promise<unknown>,
  scanArgs: (cursor: string, pattern: string, count: number, type: string) => string[],
): RedisScanner["scan"] {
  return async (cursor, _match, pattern, _count, count, _type, type) => {
    let pending: [address: string, cursor: string][];
    let names: string[];
    if (cursor === "0") {
      const perNode = await raw(scanArgs("0", pattern, count, type), "allPrimaries");
      if (!Array.isArray(perNode)) throw unexpected("SCAN", perNode);
      pending = [];
      names = [];
      for (const entry of perNode as unknown[]) {
        const { key: address, value } = (entry ?? {}) as { key?: unknown; value?: unknown };
        if (typeof address !== "string") throw unexpected("SCAN", entry);
        const [next, page] = scanPage(checkedReply("SCAN", value));
        names.push(...page);
        if (next !== "0") pending.push([address, next]);
      }
    } else {
      pending = JSON.parse(cursor) as [string, string][];
      const [address, nodeCursor] = pending.shift()!;
      const [next, page] = scanPage(
        await send(scanArgs(nodeCursor, pattern, count, type), { type: "routeByAddress", host: address }),
      );
      names = page;
      if (next !== "0") pending.unshift([address, next]);
    }
    return [pending.length === 0 ? "0" : JSON.stringify(pending), names];
  };
}

/** One node's SCAN reply: its next cursor and the names in this page. */
function scanPage(reply: unknown): [cursor: string, names: string[]] {
  if (!Array.isArray(reply) || typeof reply[0] !== "string" || !Array.isArray(reply[1])) {
    throw unexpected("SCAN", reply);
  }
  return [reply[0], reply[1].filter((name): name is string => typeof name === "string")];
}

/**
 * A reply in the shapes Redis gives the store's commands: null, a string, a safe integer, or an array of
 * them. Anything else (a Buffer from a decoder that was not applied, a Map, a bigint, a boolean) is not an
 * answer the store can read, and must never be read as one: the operation fails, closed.
 */
function checkedReply(command: string, reply: unknown): unknown {
  const fits = (value: unknown): boolean =>
    value === null ||
    typeof value === "string" ||
    (typeof value === "number" && Number.isSafeInteger(value)) ||
    (Array.isArray(value) && value.every(fits));
  if (!fits(reply)) throw unexpected(command, reply);
  return reply;
}

function unexpected(command: string, reply: unknown): Error {
  const kind =
    reply === null ? "null" : Array.isArray(reply) ? "array" : (reply?.constructor?.name ?? typeof reply);
  return new Error(
    `redisStore: a reply of an unexpected shape (${kind}) to ${command} from the GLIDE client`,
  );
}

/**
 * GLIDE's errors, with the server's error read back into Redis's own words where the store acts on them.
 * GLIDE words a server's error as "An error was signalled by the server: - NoScriptError: No matching
 * script…" (and `ERR syntax error` as "ResponseError: syntax error"): the store sends a script whole again
 * on `NOSCRIPT`, and stops claiming with a plain `SET … NX GET` on `ERR syntax error` (Redis before 7.0).
 * Every other error, the client's own (`ConnectionError`, `TimeoutError`, `ClosingError`) among them, is
 * thrown as it came.
 */
function redisError(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  const server = /^An error was signalled by the server: - (\w+): ([\s\S]*)$/.exec(error.message);
  if (server === null) return error;
  const [, kind, message] = server as unknown as [string, string, string];
  if (kind === "NoScriptError") return new Error(`NOSCRIPT ${message}`, { cause: error });
  if (kind === "ResponseError" && /^syntax error/i.test(message))
    return new Error(`ERR ${message}`, { cause: error });
  return error;
}
