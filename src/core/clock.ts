/** The core's sense of time: everything in process reads it, so tests can pass a fake one and never sleep. */
export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
  /**
   * Resolve after `ms`, or reject with the signal's reason once it aborts. A clock with real timers lets a
   * sleep with `ref: false` not keep the process alive; a fake clock may ignore it.
   */
  sleep(ms: number, signal?: AbortSignal, options?: SleepOptions): Promise<void>;
}

/** How a {@link Clock} sleeps. */
export interface SleepOptions {
  /**
   * `false` for background work (a lease renewal, a retried release) that must not keep a finished
   * process alive, as Node's `timer.unref()`; `true` by default.
   */
  readonly ref?: boolean | undefined;
}

/** The wall clock and real timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal, options) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }, ms);
      if (options?.ref === false) keepsProcessAlive(timer, false);
      signal?.addEventListener("abort", onAbort, { once: true });
    }),
};

/**
 * Time that only moves forward, for how long something took: `performance.now()` on the system clock (a
 * `Date` set back, frozen or mocked would stretch or hide it), the clock's own otherwise (a test's fake clock).
 */
export function monotonicNow(clock: Clock): number {
  return clock === systemClock ? performance.now() : clock.now();
}

/**
 * Whether a pending timer keeps the process alive, where the runtime's timers can say: Node's, Bun's and
 * Deno's Node-compatible ones have `ref()` and `unref()`. In a Cloudflare Worker `setTimeout` returns a
 * number (on many compatibility dates) and there is nothing to set: a Worker lives as long as its requests.
 */
export function keepsProcessAlive(timer: unknown, keep: boolean): void {
  const handle = timer as { ref?: unknown; unref?: unknown } | null | undefined;
  if (typeof handle?.unref !== "function" || typeof handle.ref !== "function") return;
  if (keep) handle.ref();
  else handle.unref();
}
