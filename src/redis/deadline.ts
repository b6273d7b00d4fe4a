/**
 * Deadlines for a store's commands in flight, on one timer rather than one per command (see
 * core/deadlines.ts): a timer per command cost more than many of the scripts it guarded.
 */
import { sameLengthDeadlines } from "../core/deadlines.js";

/**
 * Runs commands with a deadline of `ms` each: `within(operation, send)` settles as `send()` does, or
 * rejects with a `TimeoutError` once `ms` have passed without a reply (the command may still land).
 */
export function commandDeadlines(ms: number) {
  const deadline = sameLengthDeadlines(ms);
  return function within<T>(operation: string, send: () => PromiseLike<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const pending = deadline(() => {
        const error = new Error(
          `redisStore: no reply from Redis to ${operation} within ${ms} ms (commandTimeoutMs); ` +
            "it may or may not have been applied.",
        );
        error.name = "TimeoutError";
        reject(error);
      });
      const failed = (error: unknown) => {
        pending.clear();
        reject(error);
      };
      try {
        send().then((value) => {
          pending.clear();
          resolve(value);
        }, failed);
      } catch (error) {
        failed(error);
      }
    });
  };
}
