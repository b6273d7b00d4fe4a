/**
 * How the store's scripts reach Redis: by SHA1 (EVALSHA), sent whole (EVAL) the first time and after a
 * NOSCRIPT, each under the store's command deadline; and, on a standalone client, the scripts that many
 * callers start in one tick written to the socket together: on its corked connection, or in a pipeline
 * when it shows no connection to cork.
 */
import { commandDeadlines, type Settle } from "./deadline.js";
import type { RedisScript } from "./scripts.js";

/** A client's pipeline: commands queued, then written to the socket at once; an ioredis `Pipeline` fits. */
export interface RedisPipelineLike {
  evalsha(sha: string, numkeys: number, ...args: (string | number)[]): unknown;
  exec(): Promise<[error: Error | null, reply: unknown][] | null>;
}

/** A client's connection, which holds its writes back while corked (a Node `Writable`, as ioredis's `stream`). */
export interface CorkableStream {
  cork(): void;
  uncork(): void;
}

/** The part of a client that runs scripts. */
export interface ScriptClient {
  evalsha(sha: string, numkeys: number, ...args: (string | number)[]): Promise<unknown>;
  eval(script: string, numkeys: number, ...args: (string | number)[]): Promise<unknown>;
  pipeline?(): RedisPipelineLike;
  /** The connection its commands are written to (ioredis `Redis#stream`); absent while it has none. */
  readonly stream?: CorkableStream | undefined;
}

// Measured at 32 callers: 16 beat both 8 and one batch of everything (which leaves Redis idle while the
// client queues, and the client idle while Redis runs the lot).
const maxBatch = 16;

interface Queued extends Settle<unknown> {
  readonly script: RedisScript;
  /** The record's name, and the name of the tokens released on it where the store remembers them. */
  readonly keys: readonly string[];
  readonly args: readonly string[];
}

/**
 * `run(script, keys, args)`: the script's reply, with `keys` (a name, or names) as its KEYS. Rejects with a
 * `TimeoutError` after `commandTimeoutMs` without one (the script may still run).
 */
export function scriptRunner(client: ScriptClient, commandTimeoutMs: number, pipelining: boolean) {
  const { settled, within } = commandDeadlines(commandTimeoutMs);
  const loaded = new Set<RedisScript>();

  /** The script sent whole; from then on it goes by its SHA1. */
  const sendWhole = (script: RedisScript, keys: readonly string[], args: readonly string[]) =>
    client.eval(script.lua, keys.length, ...keys, ...args).then((reply) => {
      loaded.add(script);
      return reply;
    });
  // A restart, SCRIPT FLUSH, failover or another Cluster node: the script did not run; send it whole.
  const isNoScript = (error: unknown) => error instanceof Error && error.message.startsWith("NOSCRIPT");
  const resend = (command: Queued): void => {
    try {
      sendWhole(command.script, command.keys, command.args).then(command.resolve, command.reject);
    } catch (error) {
      command.reject(error);
    }
  };
  // The caller is settled from the client's own promise: no promise of the runner's in between.
  const sendAlone = (command: Queued): void => {
    const { script, keys, args } = command;
    if (!loaded.has(script)) {
      resend(command);
      return;
    }
    client.evalsha(script.sha, keys.length, ...keys, ...args).then(command.resolve, (error: unknown) => {
      if (isNoScript(error)) resend(command);
      else command.reject(error);
    });
  };

  // Scripts started in this tick after the first, which went out at once: written together, by the
  // batch of maxBatch and the rest at the end of the tick. A lone caller never waits for a batch, and 32
  // callers whose replies came in one read cost 3 writes (and reads on the server) rather than 32.
  // Without a connection to cork, they go in pipelines.
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
        else if (isNoScript(error)) resend(command);
        else command.reject(error);
      }
    };
    try {
      if (queued.length === 1) {
        sendAlone(queued[0]!);
        return;
      }
      const pipeline = client.pipeline!();
      for (const { script, keys, args } of queued)
        pipeline.evalsha(script.sha, keys.length, ...keys, ...args);
      pipeline.exec().then(answer, failAll);
    } catch (error) {
      // Runs in a nextTick: a throw here would be the process's, not these callers'.
      failAll(error);
    }
  };
  // On a client whose connection can be corked, the commands of a tick after the first are held back and
  // written at once: each is still the client's own command with its own answer, without a pipeline's
  // bookkeeping (which cost the client more CPU than the writes it saved).
  let corked: CorkableStream | undefined;
  let corkedCount = 0;
  const uncork = () => {
    const stream = corked!;
    corked = undefined;
    stream.uncork();
  };
  /** Sends with `write`, holding it back with the tick's others; false (nothing sent) without a stream to cork. */
  const writeCorked = (write: () => void): boolean => {
    const stream = client.stream;
    if (typeof stream?.cork !== "function") return false;
    if (corked === undefined) {
      // The first goes out at once; the stream is corked after it until the end of this tick.
      write();
      corked = stream;
      corkedCount = 0;
      stream.cork();
      process.nextTick(uncork);
      return true;
    }
    write();
    // A full batch goes at once: Redis starts on it while the callers still in this tick queue more.
    if (++corkedCount >= maxBatch) {
      corked.uncork();
      corked.cork();
      corkedCount = 0;
    }
    return true;
  };
  const send = (command: Queued): void => {
    if (!pipelining || !loaded.has(command.script)) {
      sendAlone(command);
      return;
    }
    if (writeCorked(() => sendAlone(command))) return;
    if (batch === undefined) {
      batch = [];
      process.nextTick(flushing);
      sendAlone(command);
      return;
    }
    batch.push(command);
    // A full batch goes at once: Redis starts on it while the callers still in this tick queue more.
    if (batch.length >= maxBatch) flush(batch.splice(0));
  };

  return {
    run: (script: RedisScript, key: string | readonly string[], args: readonly string[] = []) =>
      settled<unknown>(script.name, ({ resolve, reject }) =>
        send({ script, keys: typeof key === "string" ? [key] : key, args, resolve, reject }),
      ),
    /**
     * A plain command, `command()` on the client, under the same deadline, and held back with the
     * tick's scripts on a corked connection (a plain command never goes in a pipeline: alone otherwise).
     */
    runPlain: (operation: string, command: () => Promise<unknown>) =>
      settled<unknown>(operation, ({ resolve, reject }) => {
        const write = () => {
          command().then(resolve, reject);
        };
        if (!pipelining || !writeCorked(write)) write();
      }),
    within,
  };
}
