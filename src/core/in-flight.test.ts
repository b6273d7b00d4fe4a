import { getEventListeners } from "node:events";
import { afterEach, describe, expect, it, vi } from "vitest";
import { hasSettled } from "../../test/fixtures/tools.js";
import { fakeClock } from "../testing/fake-clock.js";
import { systemClock } from "./clock.js";
import {
  beginFlight,
  claimOnItsWay,
  endFlight,
  flightCount,
  flightsOf,
  holderOf,
  joinClaim,
  markClaim,
  outcomeFor,
  unmarkClaim,
  waitForOutcome,
} from "./in-flight.js";
import { memoryStore } from "./memory-store.js";
import { type ClaimResult, type IdempotencyRecord, RecordStatus } from "./store.js";

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
    expect(await hasSettled(waiting)).toBe(false);
    endFlight(first);
    expect(await hasSettled(waiting)).toBe(true);
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
    expect(await hasSettled(waiting)).toBe(false);
    endFlight(current);
    expect(await hasSettled(waiting)).toBe(true);
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
    expect(await hasSettled(waiting)).toBe(false);
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

/** A record of (s, a) held under `token`, with `status`. */
function recordOf(token: string, status: RecordStatus): IdempotencyRecord {
  return {
    scope: "s",
    key: "a",
    tool: "send_email",
    fingerprint: "f".repeat(64),
    status,
    token,
    createdAt: 1_000,
    updatedAt: 2_000,
    leaseExpiresAt: 31_000,
    expiresAt: 86_401_000,
    attempts: 1,
    result: status === RecordStatus.completed ? '{"sent":true}' : null,
    error: status === RecordStatus.failed || status === RecordStatus.unknown ? '{"message":"no"}' : null,
  };
}

describe("a repeat that joins a claim on its way", () => {
  it("learns the record that claim wrote as found, not as its own claim, held by the call that sent it", async () => {
    const store = memoryStore();
    const flights = flightsOf(store);
    const record = recordOf("t1", RecordStatus.inProgress);
    const answer: ClaimResult = { claimed: true, record, now: 5_000 };
    const flight = beginFlight(store, "s", "a", "t1");
    const joined = await joinClaim(flights, "s", "a", Promise.resolve(answer));
    // Claimed by the call that sent it, not by the repeat: the repeat must never run the tool on it.
    expect(joined).toEqual({ claim: { claimed: false, record, now: 5_000 }, holder: flight });
    expect(joined?.holder).toBe(flight);
    endFlight(flight);
  });

  it("finds no holder when the call that holds the key is another's (its token differs) or none is registered", async () => {
    const store = memoryStore();
    const flights = flightsOf(store);
    const answer: ClaimResult = {
      claimed: true,
      record: recordOf("t1", RecordStatus.inProgress),
      now: 5_000,
    };
    const none = await joinClaim(flights, "s", "a", Promise.resolve(answer));
    expect(none?.holder).toBeUndefined();
    expect(none?.claim.claimed).toBe(false);
    const other = beginFlight(store, "s", "a", "t2");
    const mismatched = await joinClaim(flights, "s", "a", Promise.resolve(answer));
    expect(mismatched?.holder).toBeUndefined();
    expect(mismatched?.claim.claimed).toBe(false);
    endFlight(other);
  });

  it("learns nothing from a claim that found a record or failed: the repeat claims for itself", async () => {
    const flights = flightsOf(memoryStore());
    const found: ClaimResult = {
      claimed: false,
      record: recordOf("t1", RecordStatus.inProgress),
      now: 5_000,
    };
    expect(await joinClaim(flights, "s", "a", Promise.resolve(found))).toBeUndefined();
    expect(await joinClaim(flights, "s", "a", Promise.reject(new Error("store down")))).toBeUndefined();
  });
});

describe("what a waiter learns from the call it waited on", () => {
  it("registers a call as not yet settling, with nothing settled", () => {
    const store = memoryStore();
    const flight = beginFlight(store, "s", "a", "t1");
    expect(flight.settling).toBe(false);
    expect(flight.settled).toBeUndefined();
    expect(flight.ended).toBe(false);
    endFlight(flight);
    expect(flight.ended).toBe(true);
  });

  it("hands over a completed or failed record as found at the settle's instant", () => {
    const store = memoryStore();
    for (const status of [RecordStatus.completed, RecordStatus.failed]) {
      const flight = beginFlight(store, "s", "a", "t1");
      const record = recordOf("t1", status);
      flight.settled = record;
      endFlight(flight);
      expect(outcomeFor(flight, true)).toEqual({ claimed: false, record, now: 2_000 });
    }
  });

  it("hands over nothing for an unknown or in-progress record, one settled before the wait, or no settle", () => {
    const store = memoryStore();
    for (const status of [RecordStatus.unknown, RecordStatus.inProgress]) {
      const flight = beginFlight(store, "s", "a", "t1");
      flight.settled = recordOf("t1", status);
      endFlight(flight);
      expect(outcomeFor(flight, true)).toBeUndefined();
    }
    const late = beginFlight(store, "s", "a", "t1");
    late.settled = recordOf("t1", RecordStatus.completed);
    endFlight(late);
    expect(outcomeFor(late, false)).toBeUndefined();
    const unsettled = beginFlight(store, "s", "a", "t1");
    endFlight(unsettled);
    expect(outcomeFor(unsettled, true)).toBeUndefined();
  });

  it("returns at once for a call that already ended, without sleeping, though the caller aborted since", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const flight = beginFlight(store, "s", "a", "t1");
    endFlight(flight);
    const caller = new AbortController();
    caller.abort(new Error("the user closed the chat"));
    // Its outcome is in the store now: the caller reads it (and its own abort) on its next look.
    await expect(
      waitForOutcome(store, "s", "a", clock, 10_000, caller.signal, flight),
    ).resolves.toBeUndefined();
    expect(clock.pending).toBe(0);
    expect(abortListeners(caller.signal)).toBe(0);
  });
});
