import { getEventListeners } from "node:events";
import { afterEach, describe, expect, it, vi } from "vitest";
import { fakeClock } from "../testing/fake-clock.js";
import { systemClock } from "./clock.js";
import {
  beginFlight,
  claimOnItsWay,
  endFlight,
  flightCount,
  flightsOf,
  holderOf,
  markClaim,
  unmarkClaim,
  waitForOutcome,
} from "./in-flight.js";
import { memoryStore } from "./memory-store.js";

/** Whether `promise` has settled once pending callbacks ran. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise<void>((resolve) => setImmediate(resolve));
  return done;
}

const abortListeners = (signal: AbortSignal) => getEventListeners(signal, "abort").length;

describe("flights in this process", () => {
  it("counts no flights on a store that never had one", () => {
    expect(flightCount(memoryStore())).toBe(0);
  });

  it("wakes a waiter the moment the call it waits on lands, though other calls began on the store since", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const first = beginFlight(store, "s", "a", "t1");
    const second = beginFlight(store, "s", "b", "t2");
    expect(flightCount(store)).toBe(2);
    const waiting = waitForOutcome(store, "s", "a", clock, 10_000, undefined);
    expect(await settled(waiting)).toBe(false);
    endFlight(first);
    expect(await settled(waiting)).toBe(true);
    // Its sleep on the clock is stopped, not left to wake later.
    expect(clock.pending).toBe(0);
    expect(flightCount(store)).toBe(1);
    endFlight(second);
    expect(flightCount(store)).toBe(0);
  });

  it("leaves the flight of a call that took the key over alone when the call it took over from ends", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const overtaken = beginFlight(store, "s", "a", "t1");
    const current = beginFlight(store, "s", "a", "t1");
    endFlight(overtaken);
    expect(flightCount(store)).toBe(1);
    const waiting = waitForOutcome(store, "s", "a", clock, 10_000, undefined);
    expect(await settled(waiting)).toBe(false);
    endFlight(current);
    expect(await settled(waiting)).toBe(true);
    expect(flightCount(store)).toBe(0);
  });

  it("files one key in tens of thousands of scopes at once, each found in its own scope and each removed", async () => {
    // A key made from the arguments is the same in every tenant's scope: a batch over all tenants holds it
    // in all their scopes at once. Filing must neither walk the other scopes nor nest a call per scope.
    const store = memoryStore();
    const flights = flightsOf(store);
    const n = 40_000;
    const claim = store.claim({
      scope: "s",
      key: "k",
      tool: "t",
      fingerprint: "f",
      token: "t",
      leaseMs: 1_000,
      ttlMs: 10_000,
      now: 0,
    });
    const marks = Array.from({ length: n }, (_, i) => markClaim(flights, `s${i}`, "k", claim));
    const held = Array.from({ length: n }, (_, i) => beginFlight(store, `s${i}`, "k", `t${i}`));
    expect(flightCount(store)).toBe(2 * n);
    for (const i of [0, 1, n / 2, n - 1]) {
      expect(claimOnItsWay(flights, `s${i}`, "k")).toBe(claim);
      expect(holderOf(store, `s${i}`, "k")?.token).toBe(`t${i}`);
    }
    expect(holderOf(store, "other", "k")).toBeUndefined();
    for (const mark of marks) unmarkClaim(flights, "k", mark);
    for (const flight of held) endFlight(flight);
    expect(flightCount(store)).toBe(0);
    // Nothing left under the key either.
    expect(flights.claims.size + flights.calls.size).toBe(0);
    await claim;
  });

  it("keeps the entries of other scopes on a key when one scope's entry is displaced or removed", () => {
    const store = memoryStore();
    const a = beginFlight(store, "a", "k", "ta");
    const b = beginFlight(store, "b", "k", "tb");
    const c = beginFlight(store, "c", "k", "tc");
    // A takeover in scope b displaces b's flight; b's end then leaves the new one alone.
    const b2 = beginFlight(store, "b", "k", "tb2");
    endFlight(b);
    expect(holderOf(store, "b", "k")).toBe(b2);
    endFlight(a);
    expect(holderOf(store, "a", "k")).toBeUndefined();
    expect(holderOf(store, "c", "k")).toBe(c);
    expect(holderOf(store, "b", "k")).toBe(b2);
    endFlight(c);
    endFlight(b2);
    expect(flightCount(store)).toBe(0);
    expect(flightsOf(store).calls.size).toBe(0);
  });

  it("waits the whole time when no call in this process holds the key, and leaves no listener on the caller's signal", async () => {
    const clock = fakeClock();
    const caller = new AbortController();
    const waiting = waitForOutcome(memoryStore(), "s", "a", clock, 100, caller.signal);
    await clock.advance(99);
    expect(await settled(waiting)).toBe(false);
    await clock.advance(1);
    await waiting;
    expect(abortListeners(caller.signal)).toBe(0);
  });

  it("ends the wait with the caller's abort reason, stopping its sleep", async () => {
    const clock = fakeClock();
    const caller = new AbortController();
    const waiting = waitForOutcome(memoryStore(), "s", "a", clock, 10_000, caller.signal);
    await clock.advance(0);
    const reason = new Error("the user closed the chat");
    caller.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    expect(clock.pending).toBe(0);
    expect(abortListeners(caller.signal)).toBe(0);
  });
});

// The system clock without a signal takes a lighter path (a bare timer): Vitest's fake timers drive it.
describe("waiting on the system clock", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("clears its timer when the call it waits on lands first", async () => {
    vi.useFakeTimers();
    const store = memoryStore();
    const flight = beginFlight(store, "s", "a", "t1");
    const waiting = waitForOutcome(store, "s", "a", systemClock, 10_000, undefined);
    expect(vi.getTimerCount()).toBe(1);
    endFlight(flight);
    await waiting;
    expect(vi.getTimerCount()).toBe(0);
  });

  it("ends the wait at once when the caller aborts, and leaves no timer or listener behind", async () => {
    vi.useFakeTimers();
    const caller = new AbortController();
    const waiting = waitForOutcome(memoryStore(), "s", "a", systemClock, 10_000, caller.signal);
    const reason = new Error("the user closed the chat");
    caller.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    expect(vi.getTimerCount()).toBe(0);
    expect(abortListeners(caller.signal)).toBe(0);
  });
});
