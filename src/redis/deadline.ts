/**
 * Deadlines for a store's commands in flight, on one timer rather than one per command (see
 * core/deadlines.ts): a timer per command cost more than many of the scripts it guarded.
 */
import { sameLengthDeadlines } from "../core/deadlines.js";

/** A command's settlement: its reply, or its failure. */
export interface Settle<T> {
  readonly resolve: (value: T) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Runs commands with a deadline of `ms` each. `within(operation, send)` settles as `send()` does;
 * `settled(operation, start)` hands `start` the two functions that settle it, so a command sent through
 * callbacks costs no promise of its own. Either rejects with a `TimeoutError` once `ms` have passed
 * without a reply (the command may still land).
 */
export function commandDeadlines(ms: number) {
  const deadline = sameLengthDeadlines(ms);
  function settled<T>(operation: string, start: (settle: Settle<T>) => void): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const pending = deadline(() => {
        const error = new Error(
          `redisStore: no reply from Redis to ${operation} within ${ms} ms (commandTimeoutMs); ` +
            "it may or may not have been applied.",
        );
        error.name = "TimeoutError";
        reject(error);
      });
      const reply = {
        resolve: (value: T) => {
          pending.clear();
          resolve(value);
        },
        reject: (error: unknown) => {
          pending.clear();
          reject(error);
        },
      };
      try {
        start(reply);
      } catch (error) {
        reply.reject(error);
      }
    });
  }
  function within<T>(operation: string, send: () => PromiseLike<T>): Promise<T> {
    return settled<T>(operation, (reply) => {
      send().then(reply.resolve, reply.reject);
    });
  }
  return { settled, within };
}
