/**
 * How the store's scripts reach Redis: by SHA1 (EVALSHA), sent whole (EVAL) the first time and after a
 * NOSCRIPT, each under the store's command deadline; and, on a standalone client that can pipeline,
 * the scripts that many callers start in one tick written to the socket together.
 */
import { commandDeadlines } from "./deadline.js";
import type { RedisScript } from "./scripts.js";

/** A client's pipeline: commands queued, then written to the socket at once; an ioredis `Pipeline` fits. */
export interface RedisPipelineLike {
  evalsha(sha: string, numkeys: number, ...args: (string | number)[]): unknown;
  exec(): Promise<[error: Error | null, reply: unknown][] | null>;
}

/** The part of a client that runs scripts. */
export interface ScriptClient {
  evalsha(sha: string, numkeys: number, ...args: (string | number)[]): Promise<unknown>;
  eval(script: string, numkeys: number, ...args: (string | number)[]): Promise<unknown>;
  pipeline?(): RedisPipelineLike;
}

// Measured at 32 callers: 16 beat both 8 and one batch of everything (which leaves Redis idle while the
// client queues, and the client idle while Redis runs the lot).
const maxBatch = 16;

interface Queued {
  readonly script: RedisScript;
  readonly name: string;
  readonly args: readonly string[];
  readonly resolve: (reply: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * `run(script, name, args)`: the script's reply, with `name` as its one key. Rejects with a
 * `TimeoutError` after `commandTimeoutMs` without one (the script may still run).
 */
export function scriptRunner(client: ScriptClient, commandTimeoutMs: number, pipelining: boolean) {
  const within = commandDeadlines(commandTimeoutMs);
  const loaded = new Set<RedisScript>();

  /** The script sent whole; from then on it goes by its SHA1. */
  const sendWhole = (script: RedisScript, name: string, args: readonly string[]) =>
    client.eval(script.lua, 1, name, ...args).then((reply) => {
      loaded.add(script);
      return reply;
    });
  // A restart, SCRIPT FLUSH, failover or another Cluster node: the script did not run; send it whole.
  const isNoScript = (error: unknown) => error instanceof Error && error.message.startsWith("NOSCRIPT");
  const sendAlone = (script: RedisScript, name: string, args: readonly string[]): PromiseLike<unknown> => {
    if (!loaded.has(script)) return sendWhole(script, name, args);
    return client.evalsha(script.sha, 1, name, ...args).then(undefined, (error: unknown) => {
      if (!isNoScript(error)) throw error;
      return sendWhole(script, name, args);
    });
  };

  // Scripts started in this tick after the first, which went out at once: written together, by the
  // batch of maxBatch and the rest in the next tick. A lone caller never waits for a batch, and 32
  // callers whose replies came in one read cost 3 writes (and reads on the server) rather than 32.
  let batch: Queued[] | undefined;
  const flushing = () => {
    const queued = batch!;
    batch = undefined;
    flush(queued);
  };
  const flush = (queued: readonly Queued[]) => {
    if (queued.length === 0) return;
    const failAll = (error: unknown) => {
      for (const command of queued) command.reject(error);
    };
    const answer = (replies: [error: Error | null, reply: unknown][] | null) => {
      for (const [i, command] of queued.entries()) {
        const [error, reply] = replies?.[i] ?? [
          new Error("redisStore: the pipeline returned no reply"),
          null,
        ];
        if (error === null) command.resolve(reply);
        else if (isNoScript(error)) {
          sendWhole(command.script, command.name, command.args).then(command.resolve, command.reject);
        } else command.reject(error);
      }
    };
    try {
      if (queued.length === 1) {
        const [only] = queued as [Queued];
        sendAlone(only.script, only.name, only.args).then(only.resolve, only.reject);
        return;
      }
      const pipeline = client.pipeline!();
      for (const { script, name, args } of queued) pipeline.evalsha(script.sha, 1, name, ...args);
      pipeline.exec().then(answer, failAll);
    } catch (error) {
      // Runs in a nextTick: a throw here would be the process's, not these callers'.
      failAll(error);
    }
  };
  const send = (script: RedisScript, name: string, args: readonly string[]): PromiseLike<unknown> => {
    if (!pipelining || !loaded.has(script)) return sendAlone(script, name, args);
    if (batch === undefined) {
      batch = [];
      process.nextTick(flushing);
      return sendAlone(script, name, args);
    }
    const queued = batch;
    return new Promise((resolve, reject) => {
      queued.push({ script, name, args, resolve, reject });
      // A full batch goes at once: Redis starts on it while the callers still in this tick queue more.
      if (queued.length >= maxBatch) flush(queued.splice(0));
    });
  };

  return {
    run: (script: RedisScript, name: string, args: readonly string[] = []) =>
      within(script.name, () => send(script, name, args)),
    within,
  };
}
