/**
 * Deadlines for a store's commands in flight, on one timer rather than one per command: a timer per
 * command (set, then cleared, a race and a finally) cost more than many of the scripts it guarded.
 */
import { performance } from "node:perf_hooks";

interface InFlight {
  readonly at: number;
  readonly operation: string;
  readonly reject: (error: Error) => void;
  prev: InFlight | undefined;
  next: InFlight | undefined;
  done: boolean;
}

/**
 * Runs commands with a deadline of `ms` each: `within(operation, send)` settles as `send()` does, or
 * rejects with a `TimeoutError` once `ms` have passed without a reply (the command may still land).
 */
export function commandDeadlines(ms: number) {
  // Oldest first. Every command gets the same `ms`, so deadlines come in the order commands were sent
  // and only the oldest one needs a timer.
  let head: InFlight | undefined;
  let tail: InFlight | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;

  const remove = (entry: InFlight) => {
    entry.done = true;
    if (entry.prev) entry.prev.next = entry.next;
    else head = entry.next;
    if (entry.next) entry.next.prev = entry.prev;
    else tail = entry.prev;
    // Nothing in flight: the timer, which fires later anyway, must not keep the process alive.
    if (head === undefined) timer?.unref();
  };

  const expire = () => {
    timer = undefined;
    const now = performance.now();
    while (head !== undefined && head.at <= now) {
      const entry = head;
      remove(entry);
      const error = new Error(
        `redisStore: no reply from Redis to ${entry.operation} within ${ms} ms (commandTimeoutMs); ` +
          "it may or may not have been applied.",
      );
      error.name = "TimeoutError";
      entry.reject(error);
    }
    if (head !== undefined) timer = setTimeout(expire, Math.max(1, Math.ceil(head.at - now)));
  };

  return function within<T>(operation: string, send: () => PromiseLike<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const entry: InFlight = {
        at: performance.now() + ms,
        operation,
        reject,
        prev: tail,
        next: undefined,
        done: false,
      };
      if (tail) tail.next = entry;
      else head = entry;
      tail = entry;
      // A timer armed for an earlier command fires no later than this one's deadline, then re-arms.
      if (timer === undefined) timer = setTimeout(expire, ms);
      else if (head === entry) timer.ref();
      const failed = (error: unknown) => {
        if (!entry.done) remove(entry);
        reject(error);
      };
      try {
        send().then((value) => {
          if (!entry.done) remove(entry);
          resolve(value);
        }, failed);
      } catch (error) {
        failed(error);
      }
    });
  };
}
