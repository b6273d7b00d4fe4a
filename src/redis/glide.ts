/**
 * A Valkey GLIDE client (`GlideClient` from `@valkey/valkey-glide`) driven as a {@link RedisLike}: each of
 * the store's commands goes through its `customCommand`, spelled out as on the wire (`SET … PX … NX GET`,
 * `EVALSHA`, `SCAN`), never through GLIDE's typed commands, whose options objects have their own shape: an
 * options object shaped for another client is ignored there, and a `SET` that should have been conditional
 * and expiring would be neither. GLIDE's Rust core writes the commands of many callers on one connection
 * by itself, so the store corks nothing of its own on it.
 */
import type { RedisLike } from "./redis-store.js";

/**
 * The part of a Valkey GLIDE client the store uses: `GlideClient` from `@valkey/valkey-glide` 2.x, on
 * Valkey or Redis, standalone. A `GlideClusterClient` is refused (its type, by `invokeScriptWithRoute`),
 * and so is a client created with `compression` enabled. What the store does about GLIDE's timeouts,
 * decoders and errors: docs/stores.md, "Valkey GLIDE".
 * @example
 * import { GlideClient } from "@valkey/valkey-glide";
 * import { redisStore } from "idempotool/redis";
 *
 * const client = await GlideClient.createClient({ addresses: [{ host: "127.0.0.1", port: 6379 }] });
 * const store = redisStore({ client, prefix: "agents:idem:" });
 */
export interface GlideClientLike {
  customCommand(args: string[], options?: { decoder?: number }): Promise<unknown>;
  /** Only a cluster client has it: refused, see {@link glideRefusal}. */
  readonly invokeScriptWithRoute?: never;
}

/**
 * GLIDE's `Decoder.String` (its documented value): every reply the store reads as text, whatever
 * `defaultDecoder` the client was given (`Decoder.Bytes` would hand it Buffers). The store never imports
 * GLIDE to read the enum; a type test holds the value to the installed package.
 */
const stringDecoder = { decoder: 1 } as const;

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

/**
 * Why the store does not drive `client`, a GLIDE client, or undefined for any other client (and for a
 * GlideClient it drives). A cluster client's SCAN walks the cluster through a cursor object of its own
 * rather than node by node, which the store's `list` and `purge` need. A client with `compression`
 * enabled compresses the value of a `SET`, even one sent through `customCommand`: the claim's record would
 * be stored as bytes that the store's scripts, and every other client, cannot read.
 */
export function glideRefusal(client: unknown): string | undefined {
  if (!isGlide(client)) return undefined;
  if (typeof (client as { invokeScriptWithRoute?: unknown }).invokeScriptWithRoute === "function") {
    return "is a Valkey GLIDE cluster client (GlideClusterClient), which the store does not drive: use an ioredis Cluster, or a GlideClient per standalone server";
  }
  // The options the client was created with (a private field of GLIDE's, read, never written).
  const config = (client as { config?: { compression?: { enabled?: unknown } } }).config;
  if (config?.compression?.enabled === true) {
    return "is a Valkey GLIDE client with compression enabled, which would store the store's records compressed where its scripts cannot read them: pass a GlideClient created without compression";
  }
  return undefined;
}

/** The store's commands on a GLIDE client. */
export function glideCommands(glide: GlideClientLike): RedisLike {
  const send = async (args: string[]): Promise<unknown> => {
    let reply: unknown;
    try {
      reply = await glide.customCommand(args, stringDecoder);
    } catch (error) {
      throw redisError(error);
    }
    return checkedReply(args[0]!, reply);
  };
  const script =
    (command: "EVALSHA" | "EVAL") =>
    (body: string, numkeys: number, ...args: (string | number)[]) =>
      send([command, body, String(numkeys), ...args.map(String)]);
  return {
    evalsha: script("EVALSHA"),
    eval: script("EVAL"),
    set: async (key, value, px, ms, nx, get) => {
      const reply = await send(["SET", key, value, px, String(ms), nx, get]);
      if (reply !== null && typeof reply !== "string") throw unexpected("SET", reply);
      return reply;
    },
    scan: async (cursor, matchToken, pattern, countToken, count, typeToken, type) => {
      const reply = await send([
        "SCAN",
        cursor,
        matchToken,
        pattern,
        countToken,
        String(count),
        typeToken,
        type,
      ]);
      if (!Array.isArray(reply) || typeof reply[0] !== "string" || !Array.isArray(reply[1])) {
        throw unexpected("SCAN", reply);
      }
      return [reply[0], reply[1].filter((name): name is string => typeof name === "string")];
    },
  };
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
