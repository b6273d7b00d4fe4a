import { afterEach, describe, expect, it, vi } from "vitest";
import { type Email, emailTool, gate, rejection } from "../../test/fixtures/tools.js";
import { fakeClock } from "../testing/fake-clock.js";
import {
  type IdempotencyError,
  isIdempotencyError,
  KeyConflictError,
  OutcomeUnknownError,
} from "./errors.js";
import type { IdempotencyEvent } from "./events.js";
import { idempotent, type ToolContext } from "./idempotent.js";
import { memoryStore } from "./memory-store.js";
import type { Effect, IdempotentOptions, VerifyOutcome } from "./options.js";
import { definitiveFailure, notExecuted, ReplayedFailureError } from "./outcomes.js";
import type { IdempotencyStore } from "./store.js";

const alice: Email = { to: "alice@example.com", subject: "Meeting summary" };

describe("idempotent: the first call and its repeats", () => {
  it("runs the tool once and replays the stored result to a repeat with the same key", async () => {
    const { send, sent, clock } = emailTool();
    const first = await send(alice, { key: "k1" });
    await clock.advance(5_000);
    const again = await send(alice, { key: "k1" });

    expect(sent).toHaveLength(1);
    expect(first).toEqual({
      result: { messageId: "m-1" },
      was_replay: false,
      original_called_at: "2026-01-01T00:00:00.000Z",
      idempotency_key: "k1",
      expires_at: "2026-01-02T00:00:00.000Z",
    });
    expect(again).toEqual({ ...first, was_replay: true });
  });

  it("treats a different key as a different operation", async () => {
    const { send, sent } = emailTool();
    await send(alice, { key: "k1" });
    const second = await send(alice, { key: "k2" });
    expect(sent).toHaveLength(2);
    expect(second.was_replay).toBe(false);
  });

  it("fingerprints arguments regardless of key order", async () => {
    const { send, sent } = emailTool();
    await send({ to: "a@x", subject: "s" }, { key: "k" });
    const again = await send({ subject: "s", to: "a@x" } as Email, { key: "k" });
    expect(again.was_replay).toBe(true);
    expect(sent).toHaveLength(1);
  });

  it("runs again once the record has expired (a new window)", async () => {
    const { send, sent, clock } = emailTool({ ttlMs: 2 * 60 * 60 * 1000 });
    await send(alice, { key: "k" });
    await clock.advance(2 * 60 * 60 * 1000);
    const later = await send(alice, { key: "k" });
    expect(later.was_replay).toBe(false);
    expect(sent).toHaveLength(2);
  });

  it("replays results as their JSON form, including undefined and null", async () => {
    const clock = fakeClock();
    const store = memoryStore();
    const nothing = idempotent(async () => undefined, { name: "noop", store, clock });
    await nothing({}, { key: "a" });
    expect((await nothing({}, { key: "a" })).result).toBeUndefined();
    const empty = idempotent(async () => null, { name: "null", store, clock });
    await empty({}, { key: "b" });
    expect((await empty({}, { key: "b" })).result).toBeNull();
  });
});

describe("idempotent: same key, different arguments", () => {
  it("rejects with idempotency_key_conflict carrying both fingerprints, and never runs the tool", async () => {
    const { send, sent } = emailTool();
    await send(alice, { key: "k" });
    const error = await rejection(send({ ...alice, subject: "Other" }, { key: "k" }));

    expect(error).toBeInstanceOf(KeyConflictError);
    const conflict = error as KeyConflictError;
    expect(conflict.code).toBe("idempotency_key_conflict");
    expect(conflict.httpStatus).toBe(422);
    expect(conflict.originalFingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(conflict.fingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(conflict.fingerprint).not.toBe(conflict.originalFingerprint);
    expect(conflict.originalCalledAt).toBe("2026-01-01T00:00:00.000Z");
    expect(sent).toHaveLength(1);
  });

  it("rejects at once while the original is still in flight (never waits)", async () => {
    const hold = gate();
    const store = memoryStore();
    const clock = fakeClock();
    let runs = 0;
    const slow = idempotent(
      async (_args: { n: number }) => {
        runs++;
        await hold.opened;
        return "done";
      },
      { name: "slow", store, clock },
    );
    const first = slow({ n: 1 }, { key: "k" });
    await clock.advance(0);
    const error = await rejection(slow({ n: 2 }, { key: "k" }));
    expect(isIdempotencyError(error, "idempotency_key_conflict")).toBe(true);
    hold.open();
    await first;
    expect(runs).toBe(1);
  });

  it("compares only the significant fields when the tool names them", async () => {
    const { send, sent } = emailTool({ significant: ["to"] });
    await send(alice, { key: "k" });
    const again = await send({ ...alice, subject: "Re: Meeting summary" }, { key: "k" });
    expect(again.was_replay).toBe(true);
    expect(sent).toHaveLength(1);
    const error = await rejection(send({ ...alice, to: "bob@example.com" }, { key: "k" }));
    expect(isIdempotencyError(error, "idempotency_key_conflict")).toBe(true);
  });
});

describe("idempotent: calls in flight", () => {
  it("makes concurrent repeats wait for the first call's outcome and hand it back", async () => {
    const hold = gate();
    const clock = fakeClock();
    let runs = 0;
    const tool = idempotent(
      async () => {
        runs++;
        await hold.opened;
        return { id: runs };
      },
      { name: "create_record", store: memoryStore(), clock },
    );
    const calls = Array.from({ length: 10 }, () => tool({ name: "Alice" }, { key: "k" }));
    await clock.advance(0);
    hold.open();
    await clock.advance(50);
    const envelopes = await Promise.all(calls);
    expect(runs).toBe(1);
    expect(envelopes.filter((e) => !e.was_replay)).toHaveLength(1);
    expect(envelopes.every((e) => e.result.id === 1)).toBe(true);
  });

  it("fails with idempotency_key_in_use when the outcome does not come within waitMs", async () => {
    const hold = gate();
    const clock = fakeClock();
    const tool = idempotent(
      async () => {
        await hold.opened;
        return 1;
      },
      { name: "slow", store: memoryStore(), clock, waitMs: 1_000 },
    );
    const first = tool({}, { key: "k" });
    await clock.advance(0);
    const waiting = rejection(tool({}, { key: "k" }));
    for (let i = 0; i < 20; i++) await clock.advance(100);
    const error = await waiting;
    expect(isIdempotencyError(error, "idempotency_key_in_use")).toBe(true);
    expect((error as IdempotencyError).httpStatus).toBe(409);
    expect(clock.now() - Date.parse("2026-01-01T00:00:00.000Z")).toBeGreaterThanOrEqual(1_000);
    hold.open();
    await first;
  });

  it("fails at once with waitMs 0", async () => {
    const hold = gate();
    const clock = fakeClock();
    const tool = idempotent(
      async () => {
        await hold.opened;
        return 1;
      },
      { name: "slow", store: memoryStore(), clock, waitMs: 0 },
    );
    const first = tool({}, { key: "k" });
    await clock.advance(0);
    const error = await rejection(tool({}, { key: "k" }));
    expect(isIdempotencyError(error, "idempotency_key_in_use")).toBe(true);
    hold.open();
    await first;
  });

  it("renews the lease of a long call so nobody judges it stale", async () => {
    const hold = gate();
    const clock = fakeClock();
    const store = memoryStore();
    let runs = 0;
    const tool = idempotent(
      async () => {
        runs++;
        await hold.opened;
        return "ok";
      },
      { name: "long", store, clock, leaseMs: 3_000, effect: "native-key", waitMs: 0 },
    );
    const first = tool({}, { key: "k" });
    for (let i = 0; i < 10; i++) await clock.advance(1_000);
    // Ten seconds in, well past one lease: the claim is still live, so a repeat neither runs nor takes over.
    const error = await rejection(tool({}, { key: "k" }));
    expect(isIdempotencyError(error, "idempotency_key_in_use")).toBe(true);
    hold.open();
    await first;
    expect(runs).toBe(1);
  });
});

describe("idempotent: the lease on the system clock", () => {
  afterEach(() => {
    // In this order: undoing a stub made under fake timers puts back their setTimeout.
    vi.unstubAllGlobals();
    vi.useRealTimers();
  });

  it("renews a long call's lease from its start, after quick calls that set no renewal timer", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    const fake = globalThis.setTimeout;
    let timers = 0;
    vi.stubGlobal("setTimeout", (...args: Parameters<typeof setTimeout>) => {
      timers++;
      return fake(...args);
    });
    const store = memoryStore();
    const hold = gate();
    let runs = 0;
    const tool = idempotent(
      async (input: { slow: boolean }) => {
        runs++;
        if (input.slow) await hold.opened;
        return "ok";
      },
      { name: "long", store, leaseMs: 3_000, effect: "native-key", waitMs: 0 },
    );
    await tool({ slow: false }, { key: "quick-1" });
    await tool({ slow: false }, { key: "quick-2" });
    await tool({ slow: false }, { key: "quick-3" });
    // Only the first call's lease set a timer: it proved these timers; the next two waited and needed none.
    expect(timers).toBe(1);
    const first = tool({ slow: true }, { key: "k" });
    await vi.advanceTimersByTimeAsync(10_000);
    // Ten seconds in, past three leases: renewed every second, the claim is live for most of one more.
    const record = await store.get({ scope: "default", key: "k" }, Date.now());
    expect(record?.status).toBe("in_progress");
    expect(record!.leaseExpiresAt).toBeGreaterThanOrEqual(Date.now() + 2_000);
    hold.open();
    await expect(first).resolves.toMatchObject({ result: "ok", was_replay: false });
    expect(runs).toBe(4);
  });

  it("renews through a slow near-duplicate lookup, so the claim cannot lapse before the tool runs", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    const shared = memoryStore();
    // Worker A's store answers the near-duplicate lookup (a read of another key) only after 2.5 s.
    const slowLookups: IdempotencyStore = {
      ...shared,
      get: async (id, now) => {
        if (id.key !== "k") await new Promise((resolve) => setTimeout(resolve, 2_500));
        return shared.get(id, now);
      },
    };
    let runs = 0;
    const worker = (store: IdempotencyStore) =>
      idempotent(
        async (_input: { to: string }) => {
          runs++;
          await new Promise((resolve) => setTimeout(resolve, 6_000));
          return "sent";
        },
        { name: "send", store, leaseMs: 3_000, effect: "native-key", waitMs: 0, similar: { fields: ["to"] } },
      );
    const first = worker(slowLookups)({ to: "ada" }, { key: "k" });
    // Past the claim's first lease: had renewals begun only after the lookup, the claim would have lapsed
    // and worker B would take it over and send again.
    await vi.advanceTimersByTimeAsync(3_100);
    const repeat = worker(shared)({ to: "ada" }, { key: "k" }).catch((error: unknown) => error);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(isIdempotencyError(await repeat, "idempotency_key_in_use")).toBe(true);
    await expect(first).resolves.toMatchObject({ result: "sent", was_replay: false });
    expect(runs).toBe(1);
  });

  /**
   * A promise of the realm's own Promise, already fulfilled, with a `then` and a `constructor` of its own:
   * `await` cannot take it as it is and calls its `then`, which answers 10 s later.
   */
  function fulfilledWithSlowThen(onThen: () => void): Promise<string> {
    const promise = Promise.resolve("early");
    void Object.defineProperty(promise, "constructor", { value: undefined });
    // biome-ignore lint/suspicious/noThenProperty: the point is a promise whose then is its own.
    void Object.defineProperty(promise, "then", {
      value(resolve: (value: string) => void) {
        onThen();
        setTimeout(() => resolve("late"), 10_000);
      },
    });
    return promise;
  }

  it("renews the lease until the caller has what the tool returned, and calls its then() once", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    const store = memoryStore();
    let runs = 0;
    let thens = 0;
    const tool = idempotent(
      (input: { slow: boolean }) => {
        runs++;
        return input.slow ? fulfilledWithSlowThen(() => thens++) : Promise.resolve("quick");
      },
      { name: "own_then", store, leaseMs: 3_000, effect: "native-key", waitMs: 0 },
    );
    // Quick calls first: the first proves the timers, and the next leases wait to see their tool pending.
    await tool({ slow: false }, { key: "quick-1" });
    await tool({ slow: false }, { key: "quick-2" });
    const first = tool({ slow: true }, { key: "k" });
    await vi.advanceTimersByTimeAsync(5_000);
    // Past a lease: a repeat must not take the key over and run the tool again.
    const repeat = tool({ slow: true }, { key: "k" }).catch((error: unknown) => error);
    await vi.advanceTimersByTimeAsync(10_000);
    await expect(first).resolves.toMatchObject({ result: "late", was_replay: false });
    expect(isIdempotencyError(await repeat, "idempotency_key_in_use")).toBe(true);
    expect(runs).toBe(3);
    expect(thens).toBe(1);
  });

  it("calls a thenable's then() once, and renews its lease while it runs", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    const store = memoryStore();
    let thens = 0;
    const thenable = {
      // biome-ignore lint/suspicious/noThenProperty: the point is a thenable that is no promise.
      then(resolve: (value: string) => void) {
        thens++;
        setTimeout(() => resolve("done"), 10_000);
      },
    };
    const tool = idempotent((input: { n: number }) => (input.n === 0 ? "quick" : (thenable as never)), {
      name: "thenable",
      store,
      leaseMs: 3_000,
      effect: "native-key",
      waitMs: 0,
    });
    await tool({ n: 0 }, { key: "quick-1" });
    const call = tool({ n: 1 }, { key: "k" });
    await vi.advanceTimersByTimeAsync(9_000);
    const record = await store.get({ scope: "default", key: "k" }, Date.now());
    expect(record!.leaseExpiresAt).toBeGreaterThanOrEqual(Date.now() + 2_000);
    await vi.advanceTimersByTimeAsync(1_000);
    await expect(call).resolves.toMatchObject({ result: "done" });
    expect(thens).toBe(1);
  });
});

describe("idempotent: failures the tool declares", () => {
  it("records a definitive failure and replays it to every repeat", async () => {
    const clock = fakeClock();
    let runs = 0;
    const charge = idempotent(
      async () => {
        runs++;
        const declined = Object.assign(new Error("card declined"), { code: "card_declined" });
        throw definitiveFailure(declined, { status: 402 });
      },
      { name: "charge_card", store: memoryStore(), clock },
    );
    const first = await rejection(charge({ cents: 500 }, { key: "c1" }));
    expect((first as Error).message).toBe("card declined");
    expect(first).not.toBeInstanceOf(ReplayedFailureError);

    const replayed = await rejection(charge({ cents: 500 }, { key: "c1" }));
    expect(replayed).toBeInstanceOf(ReplayedFailureError);
    const failure = replayed as ReplayedFailureError;
    expect(failure.message).toBe("card declined");
    expect(failure.code).toBe("card_declined");
    expect(failure.data).toEqual({ status: 402 });
    expect(failure.was_replay).toBe(true);
    expect(failure.original_called_at).toBe("2026-01-01T00:00:00.000Z");
    expect(runs).toBe(1);
  });

  it("releases the key when the tool says nothing happened, so a retry runs", async () => {
    const clock = fakeClock();
    let runs = 0;
    const tool = idempotent(
      async (args: { to: string }) => {
        runs++;
        if (runs === 1) throw notExecuted(new TypeError("address book unavailable"));
        return `sent to ${args.to}`;
      },
      { name: "send_email", store: memoryStore(), clock },
    );
    const error = await rejection(tool({ to: "a@x" }, { key: "k" }));
    expect(error).toBeInstanceOf(TypeError);
    const retry = await tool({ to: "a@x" }, { key: "k" });
    expect(retry).toMatchObject({ result: "sent to a@x", was_replay: false });
    expect(runs).toBe(2);
  });
});

describe("idempotent: a throw nobody explained, by effect class", () => {
  function flaky(effect: Effect, verify?: IdempotentOptions<object, string>["verify"]) {
    const clock = fakeClock();
    let runs = 0;
    const tool = idempotent(
      async () => {
        runs++;
        if (runs === 1) throw new Error("socket hang up");
        return "ok";
      },
      { name: "send_sms", store: memoryStore(), clock, effect, ...(verify ? { verify } : {}) },
    );
    return { tool, runs: () => runs };
  }

  for (const effect of ["irreversible", "compensatable"] as const) {
    it(`${effect}: leaves the outcome unknown and fails closed for every later caller`, async () => {
      const { tool, runs } = flaky(effect);
      const first = await rejection(tool({}, { key: "k" }));
      expect(first).toBeInstanceOf(OutcomeUnknownError);
      expect((first as OutcomeUnknownError).cause).toBeInstanceOf(Error);
      expect((first as OutcomeUnknownError).record.status).toBe("unknown");
      const second = await rejection(tool({}, { key: "k" }));
      expect(isIdempotencyError(second, "outcome_unknown")).toBe(true);
      expect((second as IdempotencyError).httpStatus).toBe(409);
      expect((second as Error).message).toContain("socket hang up");
      expect(runs()).toBe(1);
    });
  }

  for (const effect of ["native-key", "owned-store"] as const) {
    it(`${effect}: releases the key so a retry runs`, async () => {
      const { tool, runs } = flaky(effect);
      const first = await rejection(tool({}, { key: "k" }));
      expect((first as Error).message).toBe("socket hang up");
      expect(await tool({}, { key: "k" })).toMatchObject({ result: "ok", was_replay: false });
      expect(runs()).toBe(2);
    });
  }

  it("lets verify resolve an unknown outcome as completed, handing back the found result", async () => {
    const { tool, runs } = flaky("irreversible", async () => ({ status: "completed", result: "found it" }));
    await rejection(tool({}, { key: "k" }));
    const resolved = await tool({}, { key: "k" });
    expect(resolved).toMatchObject({ result: "found it", was_replay: true });
    expect(await tool({}, { key: "k" })).toMatchObject({ result: "found it", was_replay: true });
    expect(runs()).toBe(1);
  });
});

describe("idempotent: a crashed worker (stale lease)", () => {
  /** A worker that claimed the key and died: its record stays in progress and nobody renews it. */
  async function crashedClaim(store: IdempotencyStore, tool: string, fingerprintOf: string, now: number) {
    return store.claim({
      scope: "default",
      key: "k",
      tool,
      fingerprint: fingerprintOf,
      token: "dead-worker",
      leaseMs: 60_000,
      ttlMs: 86_400_000,
      now,
    });
  }

  async function setup(effect: Effect, verify?: (record: unknown) => VerifyOutcome<string>) {
    const clock = fakeClock();
    const store = memoryStore();
    const contexts: ToolContext[] = [];
    const verifies: unknown[] = [];
    const tool = idempotent(
      async (_args: { to: string }, context) => {
        contexts.push(context);
        return "sent";
      },
      {
        name: "send_sms",
        store,
        clock,
        effect,
        ...(verify
          ? {
              verify: (record) => {
                verifies.push(record);
                return verify(record);
              },
            }
          : {}),
      },
    );
    // Learn the fingerprint the wrapper computes by letting a throwaway scope record it.
    await tool({ to: "+100" }, { key: "probe", scope: "probe" });
    const probe = await store.get({ scope: "probe", key: "probe" }, clock.now());
    contexts.length = 0;
    await crashedClaim(store, "send_sms", probe!.fingerprint, clock.now());
    return { tool, store, clock, contexts, verifies };
  }

  it("waits while the lease is live, then fails closed under irreversible", async () => {
    const { tool, clock, contexts } = await setup("irreversible");
    const early = rejection(tool({ to: "+100" }, { key: "k" }));
    for (let i = 0; i < 11; i++) await clock.advance(1_000);
    expect(isIdempotencyError(await early, "idempotency_key_in_use")).toBe(true);
    await clock.advance(50_000);
    const error = await rejection(tool({ to: "+100" }, { key: "k" }));
    expect(isIdempotencyError(error, "outcome_unknown")).toBe(true);
    expect((error as Error).message).toContain("may have crashed");
    expect(contexts).toHaveLength(0);
  });

  it("takes over with the same key under native-key, on the next attempt number", async () => {
    const { tool, clock, contexts } = await setup("native-key");
    await clock.advance(60_000);
    const envelope = await tool({ to: "+100" }, { key: "k" });
    expect(envelope).toMatchObject({ result: "sent", was_replay: false, idempotency_key: "k" });
    expect(contexts.map((c) => [c.key, c.attempt])).toEqual([["k", 2]]);
  });

  it("asks verify, and runs the tool when verify says it never happened", async () => {
    const { tool, clock, contexts, verifies } = await setup("irreversible", () => ({
      status: "not_executed",
    }));
    await clock.advance(60_000);
    expect(await tool({ to: "+100" }, { key: "k" })).toMatchObject({ result: "sent", was_replay: false });
    expect(verifies).toHaveLength(1);
    expect(contexts).toHaveLength(1);
  });

  it("keeps failing closed when verify cannot tell", async () => {
    const { tool, clock, contexts } = await setup("compensatable", () => ({
      status: "unknown",
      reason: "needs review",
    }));
    await clock.advance(60_000);
    const error = await rejection(tool({ to: "+100" }, { key: "k" }));
    expect(isIdempotencyError(error, "outcome_unknown")).toBe(true);
    expect((error as Error).message).toContain("needs review");
    expect(contexts).toHaveLength(0);
  });

  it("records a failure verify found and replays it", async () => {
    const { tool, clock } = await setup("irreversible", () => ({
      status: "failed",
      error: new Error("bounced"),
    }));
    await clock.advance(60_000);
    const first = await rejection(tool({ to: "+100" }, { key: "k" }));
    expect(first).toBeInstanceOf(ReplayedFailureError);
    expect((first as Error).message).toBe("bounced");
  });

  it("fails closed when verify itself throws", async () => {
    const { tool, clock, contexts } = await setup("irreversible", () => {
      throw new Error("provider API down");
    });
    await clock.advance(60_000);
    const error = await rejection(tool({ to: "+100" }, { key: "k" }));
    expect(isIdempotencyError(error, "outcome_unknown")).toBe(true);
    expect((error as Error).message).toContain("provider API down");
    expect(contexts).toHaveLength(0);
  });
});

describe("idempotent: events", () => {
  const typesByCall = (events: readonly IdempotencyEvent[]) => {
    const calls = new Map<string, string[]>();
    for (const e of events) calls.set(e.callId, [...(calls.get(e.callId) ?? []), e.type]);
    return [...calls.values()];
  };

  it("gives every event of one call the same callId, and each call its own", async () => {
    const hold = gate();
    const clock = fakeClock();
    const events: IdempotencyEvent[] = [];
    const slow = idempotent(
      async (args: Email) => {
        await hold.opened;
        return { messageId: `m-${args.to}` };
      },
      { name: "send_email", store: memoryStore(), clock, onEvent: (e) => events.push(e) },
    );
    const runner = slow(alice, { key: "dup" });
    await clock.advance(0);
    const waiter = slow(alice, { key: "dup" });
    await clock.advance(0);
    hold.open();
    await clock.advance(50);
    await Promise.all([runner, waiter]);
    await slow(alice, { key: "other" });

    expect(typesByCall(events)).toEqual([
      ["run", "completed"],
      ["in_flight_wait", "replay"],
      ["run", "completed"],
    ]);
    expect(new Set(events.map((e) => typeof e.callId))).toEqual(new Set(["string"]));
  });

  it("emits in_flight_gave_up with the idempotency_key_in_use error when a waiter's wait runs out", async () => {
    const hold = gate();
    const clock = fakeClock();
    const events: IdempotencyEvent[] = [];
    const tool = idempotent(
      async () => {
        await hold.opened;
        return 1;
      },
      { name: "slow", store: memoryStore(), clock, waitMs: 1_000, onEvent: (e) => events.push(e) },
    );
    const first = tool({}, { key: "k" });
    await clock.advance(0);
    const waiting = rejection(tool({}, { key: "k" }));
    for (let i = 0; i < 20; i++) await clock.advance(100);
    const error = await waiting;
    hold.open();
    await first;

    const gaveUp = events.find((e) => e.type === "in_flight_gave_up");
    expect(gaveUp).toMatchObject({ tool: "slow", key: "k", attempt: 1, error });
    expect(isIdempotencyError(gaveUp?.error, "idempotency_key_in_use")).toBe(true);
    expect(gaveUp?.durationMs).toBeGreaterThanOrEqual(1_000);
    expect(typesByCall(events)).toEqual([
      ["run", "completed"],
      ["in_flight_wait", "in_flight_gave_up"],
    ]);
  });

  it("emits in_flight_gave_up with the abort reason when a waiter's signal aborts", async () => {
    const hold = gate();
    const clock = fakeClock();
    const events: IdempotencyEvent[] = [];
    const tool = idempotent(
      async () => {
        await hold.opened;
        return 1;
      },
      { name: "slow", store: memoryStore(), clock, waitMs: 60_000, onEvent: (e) => events.push(e) },
    );
    const first = tool({}, { key: "k" });
    await clock.advance(0);
    const controller = new AbortController();
    const waiting = rejection(tool({}, { key: "k", signal: controller.signal }));
    await clock.advance(100);
    const reason = new Error("the user closed the chat");
    controller.abort(reason);
    expect(await waiting).toBe(reason);
    hold.open();
    await first;

    expect(events.filter((e) => e.type === "in_flight_gave_up")).toEqual([
      expect.objectContaining({ key: "k", attempt: 1, error: reason }),
    ]);
    expect(typesByCall(events)).toEqual([
      ["run", "completed"],
      ["in_flight_wait", "in_flight_gave_up"],
    ]);
  });

  it("makes no call id for a call nobody listens to", async () => {
    const listened = emailTool();
    const unheard = idempotent(async () => 1, { name: "quiet", store: memoryStore(), clock: fakeClock() });
    await listened.send(alice, { key: "a" });
    for (const key of ["b", "c", "d"]) await unheard({}, { key });
    await listened.send(alice, { key: "e" });
    const [before, after] = [listened.events[0]!, listened.events.at(-1)!].map((e) =>
      Number.parseInt(e.callId.split("-").at(-1)!, 36),
    );
    expect(after! - before!).toBe(1);
  });
});
