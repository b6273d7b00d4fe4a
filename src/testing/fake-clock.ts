import type { Clock } from "../core/clock.js";

/** A clock that moves only when told to: tests advance time instead of sleeping. */
export interface FakeClock extends Clock {
  /** Move time forward by `ms`, waking every sleeper whose time has come, in order. */
  advance(ms: number): Promise<void>;
  /** Move time forward to the next sleeper's wake-up time, if any. Returns whether one woke. */
  next(): Promise<boolean>;
  /** How many sleepers are waiting. */
  readonly pending: number;
  /** When the next sleeper wakes (epoch ms), if any sleeps. */
  readonly nextWakeAt: number | undefined;
}

interface Sleeper {
  readonly at: number;
  readonly seq: number;
  readonly resolve: () => void;
}

/**
 * A fake clock for tests.
 * @example
 * const clock = fakeClock(Date.parse("2026-01-01T00:00:00Z"));
 * const wrapped = idempotent(fn, { name: "send_email", store, clock });
 * await clock.advance(61_000); // the lease has passed, without sleeping
 */
export function fakeClock(start = Date.parse("2026-01-01T00:00:00.000Z")): FakeClock {
  let current = start;
  let seq = 0;
  let sleepers: Sleeper[] = [];

  const wake = async (until: number) => {
    for (;;) {
      sleepers.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const first = sleepers[0];
      if (!first || first.at > until) break;
      sleepers = sleepers.slice(1);
      current = Math.max(current, first.at);
      first.resolve();
      // Let the woken task run up to its next await before waking the next one.
      await settleMicrotasks();
    }
    current = Math.max(current, until);
  };

  return {
    now: () => current,
    sleep(ms, signal) {
      return new Promise<void>((resolve, reject) => {
        if (signal?.aborted) {
          reject(signal.reason);
          return;
        }
        const sleeper: Sleeper = {
          at: current + Math.max(0, ms),
          seq: seq++,
          resolve: () => {
            signal?.removeEventListener("abort", onAbort);
            resolve();
          },
        };
        const onAbort = () => {
          sleepers = sleepers.filter((s) => s !== sleeper);
          reject(signal?.reason);
        };
        signal?.addEventListener("abort", onAbort, { once: true });
        sleepers.push(sleeper);
      });
    },
    advance: async (ms) => {
      await settleMicrotasks();
      await wake(current + ms);
      await settleMicrotasks();
    },
    next: async () => {
      await settleMicrotasks();
      sleepers.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const first = sleepers[0];
      if (!first) return false;
      await wake(first.at);
      await settleMicrotasks();
      return true;
    },
    get pending() {
      return sleepers.length;
    },
    get nextWakeAt() {
      return sleepers.reduce<number | undefined>(
        (min, s) => (min === undefined || s.at < min ? s.at : min),
        undefined,
      );
    },
  };
}

/** Give pending promise callbacks (and one macrotask turn, for I/O-free stores) a chance to run. */
async function settleMicrotasks(): Promise<void> {
  await new Promise<void>((resolve) => setImmediate(resolve));
}
