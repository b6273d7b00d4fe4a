import { getEventListeners } from "node:events";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { fakeClock } from "../testing/fake-clock.js";
import { type Clock, type SleepOptions, systemClock } from "./clock.js";
import { LeaseLostError, StoreUnavailableError } from "./errors.js";
import { startLease } from "./lease.js";
import { memoryStore } from "./memory-store.js";
import type { IdempotencyRecord, IdempotencyStore, RenewRequest } from "./store.js";

/** A store whose renewals are counted and answered by the test. */
function renewals(answer: (request: RenewRequest) => Promise<boolean> = async () => true) {
  const seen: RenewRequest[] = [];
  const store: IdempotencyStore = {
    ...memoryStore(),
    renew: (request) => {
      seen.push(request);
      return answer(request);
    },
  };
  return { store, seen };
}

const record = { scope: "s", key: "k", token: "t" } as IdempotencyRecord;
const noStoreErrors = () => {
  throw new Error("unexpected store error");
};

// The system clock takes a lighter path (a bare timer, no AbortController): Vitest's fake timers drive it.
describe("startLease on the system clock", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("stops at once, with nothing to wait for, when no renewal ever ran", () => {
    const { store, seen } = renewals();
    const lease = startLease(
      { store, clock: systemClock, leaseMs: 3_000, ttlMs: 60_000 },
      record,
      undefined,
      noStoreErrors,
    );
    expect(lease.stop()).toBeUndefined();
    expect(vi.getTimerCount()).toBe(0);
    expect(seen).toHaveLength(0);
  });

  it("renews every third of the lease until stopped, and never after", async () => {
    const { store, seen } = renewals();
    const lease = startLease(
      { store, clock: systemClock, leaseMs: 3_000, ttlMs: 60_000 },
      record,
      undefined,
      noStoreErrors,
    );
    await vi.advanceTimersByTimeAsync(999);
    expect(seen).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ scope: "s", key: "k", token: "t", leaseMs: 3_000 });
    await vi.advanceTimersByTimeAsync(3_000);
    expect(seen).toHaveLength(4);
    await lease.stop();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(seen).toHaveLength(4);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("stop() waits for a renewal in flight, so a settle never races it", async () => {
    let answer!: (renewed: boolean) => void;
    const { store } = renewals(() => new Promise((resolve) => (answer = resolve)));
    const lease = startLease(
      { store, clock: systemClock, leaseMs: 300, ttlMs: 60_000 },
      record,
      undefined,
      noStoreErrors,
    );
    await vi.advanceTimersByTimeAsync(100);
    let stopped = false;
    const renewing = lease.stop();
    expect(renewing).toBeInstanceOf(Promise);
    const stopping = renewing?.then(() => (stopped = true));
    await vi.advanceTimersByTimeAsync(0);
    expect(stopped).toBe(false);
    answer(true);
    await stopping;
    expect(vi.getTimerCount()).toBe(0);
  });

  it("aborts a signal read before the loss, and hands an aborted one to a tool that reads it after", async () => {
    let renewed = true;
    const { store } = renewals(async () => renewed);
    const lease = startLease(
      { store, clock: systemClock, leaseMs: 300, ttlMs: 60_000 },
      record,
      undefined,
      noStoreErrors,
    );
    const early = lease.signal;
    await vi.advanceTimersByTimeAsync(100);
    expect(early.aborted).toBe(false);
    renewed = false;
    await vi.advanceTimersByTimeAsync(100);
    expect(early.aborted).toBe(true);
    expect(early.reason).toBeInstanceOf(LeaseLostError);
    // The same signal every read.
    expect(lease.signal).toBe(early);
    await lease.stop();
  });

  it("a signal first read after the loss is already aborted with LeaseLostError", async () => {
    const { store } = renewals(async () => false);
    const lease = startLease(
      { store, clock: systemClock, leaseMs: 300, ttlMs: 60_000 },
      record,
      undefined,
      noStoreErrors,
    );
    await vi.advanceTimersByTimeAsync(100);
    expect(lease.signal.aborted).toBe(true);
    expect(lease.signal.reason).toBeInstanceOf(LeaseLostError);
    await lease.stop();
  });

  it("passes the caller's abort on, whether the tool read the signal before or after it", async () => {
    const { store } = renewals();
    const caller = new AbortController();
    const lease = startLease(
      { store, clock: systemClock, leaseMs: 300, ttlMs: 60_000 },
      record,
      caller.signal,
      noStoreErrors,
    );
    caller.abort(new Error("user cancelled"));
    expect(lease.signal.aborted).toBe(true);
    expect((lease.signal.reason as Error).message).toBe("user cancelled");
    await lease.stop();

    const already = new AbortController();
    already.abort("gone");
    const second = startLease(
      { store, clock: systemClock, leaseMs: 300, ttlMs: 60_000 },
      record,
      already.signal,
      noStoreErrors,
    );
    expect(second.signal.reason).toBe("gone");
    await second.stop();
  });

  it("stops listening to the caller's signal once it aborts, or once stopped", async () => {
    const { store } = renewals();
    const options = { store, clock: systemClock, leaseMs: 300, ttlMs: 60_000 };
    const aborted = new AbortController();
    const first = startLease(options, record, aborted.signal, noStoreErrors);
    expect(getEventListeners(aborted.signal, "abort")).toHaveLength(1);
    aborted.abort();
    // Before any stop(): an undisposed lease is not kept alive by a long-lived signal.
    expect(getEventListeners(aborted.signal, "abort")).toHaveLength(0);
    await first.stop();

    const live = new AbortController();
    const second = startLease(options, record, live.signal, noStoreErrors);
    await second.stop();
    expect(getEventListeners(live.signal, "abort")).toHaveLength(0);
  });

  it("keeps renewing after a store error, and reports it", async () => {
    let calls = 0;
    const reset = new Error("connection reset");
    const { store } = renewals(async () => {
      calls++;
      if (calls === 1) throw reset;
      return true;
    });
    const errors: unknown[] = [];
    const lease = startLease(
      { store, clock: systemClock, leaseMs: 300, ttlMs: 60_000 },
      record,
      undefined,
      (e) => errors.push(e),
    );
    await vi.advanceTimersByTimeAsync(200);
    expect(calls).toBe(2);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(StoreUnavailableError);
    // The tool is running: the words must not tell the caller or the model that it did not run.
    expect((errors[0] as Error).message).toBe(
      "The idempotency store failed during renew: connection reset. The lease stays as it was; the next renewal tries again.",
    );
    expect((errors[0] as Error).cause).toBe(reset);
    expect(lease.signal.aborted).toBe(false);
    await lease.stop();
  });
});

// A first call's lease waits to arm its timer until its tool is found still running after a microtask turn.
describe("startLease with renewals once the tool is pending", () => {
  const options = (store: IdempotencyStore) => ({ store, clock: systemClock, leaseMs: 3_000, ttlMs: 60_000 });
  /** A lease that waits, under the timers in place now (proven first by a lease that arms at once). */
  function waitingLease(store: IdempotencyStore) {
    void startLease(options(store), record, undefined, noStoreErrors).stop();
    return startLease(options(store), record, undefined, noStoreErrors, "once-pending");
  }
  /** Every microtask queued so far, and those they queue, have run. */
  const drained = () => new Promise<void>((resolve) => setImmediate(resolve));

  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
  });
  afterEach(() => {
    vi.useRealTimers();
    vi.unstubAllGlobals();
  });

  it("sets no timer for a tool that has already answered: a value, or a promise settled at once", async () => {
    const { store, seen } = renewals();
    const answers = [() => "sent", () => Promise.resolve("sent"), () => Promise.reject(new Error("failed"))];
    for (const answer of answers) {
      const lease = waitingLease(store);
      lease.follow(answer());
      await drained();
      expect(vi.getTimerCount()).toBe(0);
      expect(lease.stop()).toBeUndefined();
    }
    await vi.advanceTimersByTimeAsync(10_000);
    expect(seen).toHaveLength(0);
  });

  it("renews a tool still running after a microtask turn every third of the lease, due from its start", async () => {
    const { store, seen } = renewals();
    const lease = waitingLease(store);
    expect(vi.getTimerCount()).toBe(0);
    let finish!: () => void;
    lease.follow(
      new Promise<void>((resolve) => {
        finish = resolve;
      }),
    );
    await vi.advanceTimersByTimeAsync(999);
    expect(seen).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(seen).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(seen).toHaveLength(2);
    finish();
    await lease.stop();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(seen).toHaveLength(2);
  });

  it("a long synchronous stretch before the tool's first wait does not put off its first renewal", async () => {
    const { store, seen } = renewals();
    const lease = waitingLease(store);
    // The tool blocks for 2.5 s, past two renewal periods, and only then returns its pending promise.
    vi.advanceTimersByTime(2_500);
    lease.follow(new Promise(() => {}));
    await vi.advanceTimersByTimeAsync(1);
    expect(seen).toHaveLength(1);
    await lease.stop();
  });

  it("a clock set back while the tool ran makes the first renewal due one period later, no more", async () => {
    const { store, seen } = renewals();
    const lease = waitingLease(store);
    vi.setSystemTime(Date.now() - 60_000);
    lease.follow(new Promise(() => {}));
    await vi.advanceTimersByTimeAsync(999);
    expect(seen).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(seen).toHaveLength(1);
    await lease.stop();
  });

  it("never calls a thenable's then() nor a Promise subclass's constructor: their leases renew from now", async () => {
    const { store } = renewals();
    let thens = 0;
    const thenable = {
      // biome-ignore lint/suspicious/noThenProperty: the point of the test is a thenable that is no promise.
      then() {
        thens++;
      },
    };
    let constructed = 0;
    class CountingPromise<T> extends Promise<T> {
      constructor(executor: (resolve: (value: T) => void, reject: (reason: unknown) => void) => void) {
        constructed++;
        super(executor);
      }
    }
    const subclassed = new CountingPromise<void>(() => {});
    for (const returned of [thenable, subclassed, Object.create(Promise.prototype) as object]) {
      const lease = waitingLease(store);
      lease.follow(returned);
      expect(vi.getTimerCount()).toBe(1);
      await drained();
      expect(vi.getTimerCount()).toBe(1);
      await lease.stop();
    }
    expect(thens).toBe(0);
    expect(constructed).toBe(1);
  });

  it("arms at once under a setTimeout that never gave a lease a timer object, so a refusal stops the call before its tool", () => {
    const { store } = renewals();
    void startLease(options(store), record, undefined, noStoreErrors).stop();
    const fake = globalThis.setTimeout;
    vi.stubGlobal("setTimeout", () => {
      throw new Error("no timers here");
    });
    expect(() => startLease(options(store), record, undefined, noStoreErrors, "once-pending")).toThrow(
      "no timers here",
    );
    // Returning numbers, as a Worker's does: never proven, so every lease arms at once.
    vi.stubGlobal("setTimeout", (...args: Parameters<typeof setTimeout>) => Number(fake(...args)));
    void startLease(options(store), record, undefined, noStoreErrors).stop();
    const lease = startLease(options(store), record, undefined, noStoreErrors, "once-pending");
    expect(vi.getTimerCount()).toBe(1);
    void lease.stop();
  });

  it("aborts the tool's signal when a proven setTimeout refuses the timer of a tool already running", async () => {
    const { store } = renewals();
    const fake = globalThis.setTimeout;
    let refuse = false;
    const refusing = new Error("timer refused");
    vi.stubGlobal("setTimeout", (...args: Parameters<typeof setTimeout>) => {
      if (refuse) throw refusing;
      return fake(...args);
    });
    const lease = waitingLease(store);
    refuse = true;
    lease.follow(new Promise(() => {}));
    await drained();
    expect(lease.signal.aborted).toBe(true);
    expect(lease.signal.reason).toBe(refusing);
    await lease.stop();
  });
});

describe("startLease and the event loop", () => {
  const timeouts = () => process.getActiveResourcesInfo().filter((kind) => kind === "Timeout").length;

  it("waits for its renewal on the system clock without keeping a finished process alive", async () => {
    const { store } = renewals();
    const idle = timeouts();
    const lease = startLease(
      { store, clock: systemClock, leaseMs: 60_000, ttlMs: 60_000 },
      record,
      undefined,
      noStoreErrors,
    );
    expect(timeouts()).toBe(idle);
    await lease.stop();
  });
});

describe("startLease on another clock", () => {
  it("renews on that clock's sleep and stops with it", async () => {
    const clock = fakeClock();
    const { store, seen } = renewals();
    const lease = startLease(
      { store, clock, leaseMs: 3_000, ttlMs: 60_000 },
      record,
      undefined,
      noStoreErrors,
    );
    await clock.advance(1_000);
    await clock.advance(1_000);
    expect(seen).toHaveLength(2);
    await lease.stop();
    await clock.advance(5_000);
    expect(seen).toHaveLength(2);
  });

  it("asks that clock for sleeps that do not keep the process alive", async () => {
    const clock = fakeClock();
    const asked: (SleepOptions | undefined)[] = [];
    const recording: Clock = {
      now: () => clock.now(),
      sleep: (ms, signal, options) => {
        asked.push(options);
        return clock.sleep(ms, signal);
      },
    };
    const { store, seen } = renewals();
    const lease = startLease(
      { store, clock: recording, leaseMs: 3_000, ttlMs: 60_000 },
      record,
      undefined,
      noStoreErrors,
    );
    await clock.advance(1_000);
    await lease.stop();
    expect(seen).toHaveLength(1);
    expect(asked).toEqual([{ ref: false }, { ref: false }]);
  });
});
