import { AsyncLocalStorage } from "node:async_hooks";
import { getEventListeners } from "node:events";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { gate } from "../../test/fixtures/tools.js";
import { fakeClock } from "../testing/fake-clock.js";
import { type Clock, type SleepOptions, systemClock } from "./clock.js";
import { LeaseLostError, StoreUnavailableError } from "./errors.js";
import { type Lease, startLease } from "./lease.js";
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

// A worker cut off from the store must not run on while another caller may take the key over.
describe("startLease when the store cannot be reached", () => {
  const reset = new Error("connection reset");
  const options = (store: IdempotencyStore, clock: Clock) => ({ store, clock, leaseMs: 300, ttlMs: 60_000 });

  /** A store whose renewals answer in turn, each after `latencyMs` on `clock`: true, false, or a throw. */
  function answering(clock: Clock, answers: readonly (boolean | Error)[], latencyMs = 0) {
    const sent: number[] = [];
    const store: IdempotencyStore = {
      ...memoryStore(),
      renew: async () => {
        sent.push(clock.now());
        const answer = answers[sent.length - 1] ?? reset;
        if (latencyMs > 0) await clock.sleep(latencyMs);
        if (answer instanceof Error) throw answer;
        return answer;
      },
    };
    return { store, sent };
  }

  describe("on the system clock (performance.now)", () => {
    beforeEach(() => {
      // Date stands still: the lease must be measured on the monotonic clock, which moves.
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
      vi.advanceTimersByTime(5_000);
    });
    afterEach(() => {
      vi.useRealTimers();
    });

    it("aborts the tool's signal once renewals failed until the lease passed, and renews no more", async () => {
      const { store, sent } = answering(systemClock, []);
      const errors: StoreUnavailableError[] = [];
      const lease = startLease(options(store, systemClock), record, undefined, (e) => errors.push(e));
      await vi.advanceTimersByTimeAsync(299);
      expect(sent).toHaveLength(2);
      expect(lease.signal.aborted).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      expect(lease.signal.aborted).toBe(true);
      const reason = lease.signal.reason as LeaseLostError;
      expect(reason).toBeInstanceOf(LeaseLostError);
      expect(reason.code).toBe("lease_lost");
      expect(reason.message).toBe(
        'The lease on key "k" passed while the store could not be reached to renew it, so another caller may ' +
          "take the key over and run the tool: stop before making the effect if you can.",
      );
      expect(reason.cause).toBe(errors[2]);
      expect(errors.map((e) => e.message)).toEqual([
        ...Array(2).fill(
          "The idempotency store failed during renew: connection reset. The lease stays as it was; the next renewal tries again.",
        ),
        "The idempotency store failed during renew: connection reset. No renewal reached the store before the lease " +
          "passed: the tool's signal is aborted, as another caller may take the key over.",
      ]);
      expect(errors[2]?.cause).toBe(reset);
      await vi.advanceTimersByTimeAsync(10_000);
      expect(sent).toHaveLength(3);
      expect(vi.getTimerCount()).toBe(0);
      await lease.stop();
    });
  });

  describe("on an injected clock", () => {
    it("aborts once renewals failed until the lease passed on that clock", async () => {
      const clock = fakeClock();
      const start = clock.now();
      const { store, sent } = answering(clock, []);
      const lease = startLease(options(store, clock), record, undefined, () => {});
      await clock.advance(299);
      expect(lease.signal.aborted).toBe(false);
      await clock.advance(1);
      expect(sent.map((at) => at - start)).toEqual([100, 200, 300]);
      expect(lease.signal.reason).toBeInstanceOf(LeaseLostError);
      await clock.advance(1_000);
      expect(sent).toHaveLength(3);
      await lease.stop();
    });

    it("counts the lease from the sending of the last renewal that landed", async () => {
      const clock = fakeClock();
      const { store, sent } = answering(clock, [true, reset, reset, reset]);
      const lease = startLease(options(store, clock), record, undefined, () => {});
      // Renewed when sent at 100: the lease runs to 400, through the failures at 200 and 300.
      await clock.advance(399);
      expect(sent).toHaveLength(3);
      expect(lease.signal.aborted).toBe(false);
      await clock.advance(1);
      expect(sent).toHaveLength(4);
      expect(lease.signal.reason).toBeInstanceOf(LeaseLostError);
      await lease.stop();
    });

    it("tries again no later than the lease's end after a slow failure, and aborts then if that fails too", async () => {
      const clock = fakeClock();
      const start = clock.now();
      // Each failure takes 150 ms to come back: the first, sent at 100, is known at 250.
      const { store, sent } = answering(clock, [], 150);
      const lease = startLease(options(store, clock), record, undefined, () => {});
      await clock.advance(300);
      expect(sent.map((at) => at - start)).toEqual([100, 300]);
      expect(lease.signal.aborted).toBe(false);
      await clock.advance(150);
      expect(lease.signal.reason).toBeInstanceOf(LeaseLostError);
      await lease.stop();
    });

    it("keeps a lease whose renewal landed, however late its answer came, a third of the lease on", async () => {
      const clock = fakeClock();
      const start = clock.now();
      // Sent at 100 and landed, answered at 450: past the lease by this clock, but nobody took it over.
      const { store, sent } = answering(clock, [true, true], 350);
      const lease = startLease(options(store, clock), record, undefined, () => {});
      await clock.advance(450);
      expect(lease.signal.aborted).toBe(false);
      await clock.advance(100);
      expect(sent.map((at) => at - start)).toEqual([100, 550]);
      await clock.advance(350);
      expect(lease.signal.aborted).toBe(false);
      await lease.stop();
    });

    it("a refused renewal aborts with the lease lost to another owner, without a store error", async () => {
      const clock = fakeClock();
      const { store } = answering(clock, [false]);
      const lease = startLease(options(store, clock), record, undefined, noStoreErrors);
      await clock.advance(100);
      const reason = lease.signal.reason as LeaseLostError;
      expect(reason.message).toBe(
        'The claim on key "k" was lost while the call ran (its lease passed and another caller took over), so ' +
          "this call's outcome was not recorded. Check whether the effect happened.",
      );
      expect(reason.cause).toBeUndefined();
      await lease.stop();
    });
  });
});

// A first call's lease arms its timer only if the caller has not stopped it two microtask turns in.
describe("startLease with renewals unless stopped at once", () => {
  const options = (store: IdempotencyStore, leaseMs = 3_000) => ({
    store,
    clock: systemClock,
    leaseMs,
    ttlMs: 60_000,
  });
  /** A lease that waits, under the timers in place now (proven first by a lease that arms at once). */
  function waitingLease(store: IdempotencyStore, leaseMs?: number) {
    void startLease(options(store, leaseMs), record, undefined, noStoreErrors).stop();
    return startLease(options(store, leaseMs), record, undefined, noStoreErrors, {
      renewals: "unless-stopped-at-once",
    });
  }
  /** Every microtask queued so far, and those they queue, have run. */
  const drained = () => new Promise<void>((resolve) => setImmediate(resolve));

  describe("on fake timers", () => {
    beforeEach(() => {
      // performance too: the renewals are due from when the lease began (performance.now()), and time that
      // really passes before they arm (a loaded machine) would bring the first one forward.
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date", "performance"] });
      // Away from 0, so that a lease's start time counts in what is due from it.
      vi.advanceTimersByTime(5_000);
    });
    afterEach(() => {
      // In this order: a stub made under fake timers puts back the fake setTimeout when it is undone.
      vi.unstubAllGlobals();
      vi.useRealTimers();
    });

    it("sets no timer when the caller, resuming from a tool that answered at once, stops it", async () => {
      const { store, seen } = renewals();
      const fake = globalThis.setTimeout;
      let timers = 0;
      vi.stubGlobal("setTimeout", (...args: Parameters<typeof setTimeout>) => {
        timers++;
        return fake(...args);
      });
      const answers = [
        () => "sent",
        () => Promise.resolve("sent"),
        () => Promise.reject(new Error("failed")),
      ];
      for (const answer of answers) {
        // As the core does: start the lease, call the tool and await it, stop the lease as this resumes.
        const lease = waitingLease(store);
        try {
          await answer();
        } catch {}
        expect(lease.stop()).toBeUndefined();
        await drained();
      }
      // One timer each, set by the leases that prove the timers (they arm at once); none by those that wait.
      expect(timers).toBe(answers.length);
      await vi.advanceTimersByTimeAsync(10_000);
      expect(seen).toHaveLength(0);
    });

    it("renews a lease still held two microtask turns in every third of the lease, due from its start", async () => {
      const { store, seen } = renewals();
      const lease = waitingLease(store);
      expect(vi.getTimerCount()).toBe(0);
      await vi.advanceTimersByTimeAsync(999);
      expect(seen).toHaveLength(0);
      await vi.advanceTimersByTimeAsync(1);
      expect(seen).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(1_000);
      expect(seen).toHaveLength(2);
      await lease.stop();
      await vi.advanceTimersByTimeAsync(10_000);
      expect(seen).toHaveLength(2);
    });

    it("a long synchronous stretch before the tool's first wait does not put off its first renewal", async () => {
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date", "performance"] });
      // Away from 0, so that a lease's start time counts in what is due from it.
      vi.advanceTimersByTime(5_000);
      const { store, seen } = renewals();
      const lease = waitingLease(store);
      // The tool computes for 2.5 s, past two renewal periods, before its first await.
      vi.advanceTimersByTime(2_500);
      await vi.advanceTimersByTimeAsync(1);
      expect(seen).toHaveLength(1);
      await lease.stop();
    });

    it("arms with the setTimeout in place when it began, not one the tool swapped in before its first await", async () => {
      const { store, seen } = renewals();
      const lease = waitingLease(store);
      let swappedIn = 0;
      vi.stubGlobal("setTimeout", () => {
        swappedIn++;
        return 0;
      });
      await drained();
      expect(swappedIn).toBe(0);
      expect(vi.getTimerCount()).toBe(1);
      vi.unstubAllGlobals();
      await vi.advanceTimersByTimeAsync(1_000);
      expect(seen).toHaveLength(1);
      await lease.stop();
    });

    it("arms at once under a setTimeout that never gave a lease a timer object, so a refusal stops the call before its tool", () => {
      const { store } = renewals();
      void startLease(options(store), record, undefined, noStoreErrors).stop();
      const fake = globalThis.setTimeout;
      vi.stubGlobal("setTimeout", () => {
        throw new Error("no timers here");
      });
      expect(() =>
        startLease(options(store), record, undefined, noStoreErrors, { renewals: "unless-stopped-at-once" }),
      ).toThrow("no timers here");
      // Returning numbers, as a Worker's does on older compatibility dates: never proven, so every lease
      // arms at once.
      vi.stubGlobal("setTimeout", (...args: Parameters<typeof setTimeout>) => Number(fake(...args)));
      void startLease(options(store), record, undefined, noStoreErrors).stop();
      const lease = startLease(options(store), record, undefined, noStoreErrors, {
        renewals: "unless-stopped-at-once",
      });
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
      await drained();
      expect(lease.signal.aborted).toBe(true);
      expect(lease.signal.reason).toBe(refusing);
      await lease.stop();
    });
  });

  it("measures the tool's first synchronous stretch on a monotonic clock: a frozen Date does not put off the renewal", async () => {
    // Real timers, a Date that stands still (as a test's mocked Date does), a lease of 600 ms renewed every
    // 200: a tool that computes for 400 ms before its first await must be renewed right after, not 200 later.
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      let renewedAt = 0;
      const { opened: firstRenewal, open: renewed } = gate();
      const store: IdempotencyStore = {
        ...memoryStore(),
        renew: async () => {
          renewedAt = performance.now();
          renewed();
          return true;
        },
      };
      const lease = waitingLease(store, 600);
      const start = performance.now();
      while (performance.now() - start < 400) {
        // The tool's synchronous stretch.
      }
      await firstRenewal;
      await lease.stop();
      expect(renewedAt - start).toBeLessThan(560);
    } finally {
      vi.useRealTimers();
    }
  });

  it("renews in the async context the lease began in, whatever the tool enters before its first await", async () => {
    const context = new AsyncLocalStorage<string>();
    const seenIn: (string | undefined)[] = [];
    const { opened: firstRenewal, open: renewed } = gate();
    const store: IdempotencyStore = {
      ...memoryStore(),
      renew: async () => {
        seenIn.push(context.getStore());
        renewed();
        return true;
      },
    };
    let lease!: Lease;
    context.run("call", () => {
      lease = waitingLease(store, 30);
      context.enterWith("tool");
    });
    await firstRenewal;
    await lease.stop();
    expect(seenIn).toEqual(["call"]);
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
