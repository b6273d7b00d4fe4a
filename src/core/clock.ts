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
      if (options?.ref === false) timer.unref();
      signal?.addEventListener("abort", onAbort, { once: true });
    }),
};
