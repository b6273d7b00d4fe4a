/**
 * What the interpreter of the decision table tells the caller, the model and the operator on the paths
 * the happy-path suites never take: verify's odd answers, a store that fails around verify, results it
 * cannot keep, waits and their polls, aborts, and the words of an unknown outcome.
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it, vi } from "vitest";
import { fakeClock } from "../testing/fake-clock.js";
import {
  type IdempotencyError,
  KeyInUseError,
  OutcomeUnknownError,
  ResultTooLargeError,
  ResultUnserializableError,
  StoreUnavailableError,
} from "./errors.js";
import type { IdempotencyEvent } from "./events.js";
import { fingerprint } from "./fingerprint.js";
import { idempotent } from "./idempotent.js";
import { memoryStore } from "./memory-store.js";
import type { IdempotentOptions } from "./options.js";
import { definitiveFailure, ReplayedFailureError } from "./outcomes.js";
import type { IdempotencyStore } from "./store.js";

interface Sms {
  to: string;
  body: string;
}
const sms: Sms = { to: "+15550100", body: "Your code is 4711" };
const LEASE_MS = 60_000;
const TTL_MS = 86_400_000;
const start = Date.parse("2026-01-01T00:00:00.000Z");

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected the call to fail");
}

/** A send_sms tool counting what it sends; `fail` makes a run throw after sending. */
function smsTool(
  options: Partial<IdempotentOptions<Sms, unknown>> & {
    store?: IdempotencyStore;
    clock?: ReturnType<typeof fakeClock>;
    fail?: (run: number) => unknown;
    result?: (run: number) => unknown;
  } = {},
) {
  const { fail, result, ...rest } = options;
  const clock = options.clock ?? fakeClock(start);
  const store = options.store ?? memoryStore();
  const events: IdempotencyEvent[] = [];
  let runs = 0;
  const tool = idempotent(
    async (_args: Sms) => {
      runs++;
      const failure = fail?.(runs);
      if (failure !== undefined) throw failure;
      return result ? result(runs) : `msg-${runs}`;
    },
    {
      name: "send_sms",
      effect: "irreversible",
      leaseMs: LEASE_MS,
      ttlMs: TTL_MS,
      onEvent: (event) => events.push(event),
      ...rest,
      store,
      clock,
    },
  );
  const types = () => events.map((e) => e.type);
  return { tool, clock, store, events, types, runs: () => runs };
}

/** A worker that claimed (default, "k") for `sms` and died: nobody renews its lease. */
async function crashedClaim(store: IdempotencyStore, now: number, leaseMs = LEASE_MS) {
  const claim = await store.claim({
    scope: "default",
    key: "k",
    tool: "send_sms",
    fingerprint: fingerprint(sms),
    token: "dead-worker",
    leaseMs,
    ttlMs: TTL_MS,
    now,
  });
  expect(claim.claimed).toBe(true);
  return claim.record;
}

/** A first attempt that threw after sending under irreversible: its record is left unknown. */
async function unknownRecord(store: IdempotencyStore, clock: ReturnType<typeof fakeClock>) {
  const { tool } = smsTool({ store, clock, fail: () => new Error("socket hang up") });
  expect(await rejection(tool(sms, { key: "k" }))).toBeInstanceOf(OutcomeUnknownError);
}

describe("an aborted caller", () => {
  it("whose signal aborted before the call touches neither the store nor the tool, and reports no wait", async () => {
    const inner = memoryStore();
    let claims = 0;
    const store: IdempotencyStore = {
      ...inner,
      claim: (request) => {
        claims++;
        return inner.claim(request);
      },
    };
    const { tool, events, runs } = smsTool({ store });
    const controller = new AbortController();
    const reason = new Error("the user closed the chat");
    controller.abort(reason);
    expect(await rejection(tool(sms, { key: "k", signal: controller.signal }))).toBe(reason);
    expect(claims).toBe(0);
    expect(runs()).toBe(0);
    expect(events).toEqual([]);
  });

  it("that waited, then aborted while its takeover lost the race, reports the wait it gave up", async () => {
    const inner = memoryStore();
    const clock = fakeClock(start);
    await crashedClaim(inner, clock.now(), 1_000);
    const controller = new AbortController();
    const reason = new Error("the user closed the chat");
    // Another caller takes the stale record first; meanwhile this caller's user gives up.
    const store: IdempotencyStore = {
      ...inner,
      takeover: async (request) => {
        await inner.takeover({ ...request, token: "faster-caller" });
        controller.abort(reason);
        return inner.takeover(request);
      },
    };
    const { tool, events, types, runs } = smsTool({ store, clock, effect: "native-key", waitMs: 60_000 });
    const call = rejection(tool(sms, { key: "k", signal: controller.signal }));
    await clock.advance(2_000);
    expect(await call).toBe(reason);
    expect(runs()).toBe(0);
    expect(types()).toEqual(["in_flight_wait", "in_flight_gave_up"]);
    expect(events[1]).toMatchObject({ error: reason });
  });
});

describe("waiting on a call in flight", () => {
  /** A record another process holds for the whole test, and a repeat whose claims are timed. */
  async function heldElsewhere(waitMs: number) {
    const inner = memoryStore();
    const clock = fakeClock(start);
    await crashedClaim(inner, clock.now());
    const claimedAt: number[] = [];
    const store: IdempotencyStore = {
      ...inner,
      claim: (request) => {
        claimedAt.push(request.now - start);
        return inner.claim(request);
      },
    };
    const repeat = smsTool({ store, clock, waitMs });
    return { ...repeat, claimedAt };
  }

  afterEach(() => {
    vi.restoreAllMocks();
  });

  it.each([
    [0.5, [0, 10, 30, 70, 150, 310, 560, 810]],
    [0, [0, 8, 23, 53, 113, 233, 421, 609, 797, 985]],
    [0.999, [0, 12, 37, 87, 187, 387, 699]],
  ])("polls at a jittered, doubling step capped at 250 ms (random %s)", async (random, expected) => {
    vi.spyOn(Math, "random").mockReturnValue(random);
    const { tool, clock, claimedAt } = await heldElsewhere(60_000);
    const controller = new AbortController();
    const polling = rejection(tool(sms, { key: "k", signal: controller.signal }));
    await clock.advance(0);
    while ((clock.nextWakeAt ?? Number.POSITIVE_INFINITY) <= start + 1_000) await clock.next();
    expect(claimedAt).toEqual(expected);
    controller.abort(new Error("the user closed the chat"));
    await polling;
  });

  it("gives up exactly when waitMs has passed, however the polls fall", async () => {
    for (const random of [0, 0.5, 0.999]) {
      vi.spyOn(Math, "random").mockReturnValue(random);
      const { tool, clock } = await heldElsewhere(20);
      const waiting = rejection(tool(sms, { key: "k" }));
      for (let i = 0; i < 60; i++) await clock.advance(1);
      const error = await waiting;
      expect(error).toBeInstanceOf(KeyInUseError);
      expect((error as KeyInUseError).waitedMs).toBe(20);
      vi.restoreAllMocks();
    }
  });

  it("reports the wait it did not make when it may not wait at all (waitMs 0)", async () => {
    const { tool, events, types } = await heldElsewhere(0);
    const error = await rejection(tool(sms, { key: "k" }));
    expect(error).toBeInstanceOf(KeyInUseError);
    expect(types()).toEqual(["in_flight_wait", "in_flight_gave_up"]);
    expect(events[0]).toMatchObject({ attempt: 1 });
    expect(events[1]).toMatchObject({ attempt: 1, error });
  });
});

describe("a stale claim taken over", () => {
  it("reports the takeover of another worker's claim, on the next attempt", async () => {
    const store = memoryStore();
    const clock = fakeClock(start);
    await crashedClaim(store, clock.now());
    await clock.advance(LEASE_MS);
    const { tool, events, types } = smsTool({ store, clock, effect: "native-key" });
    expect(await tool(sms, { key: "k" })).toMatchObject({ result: "msg-1", was_replay: false });
    expect(types()).toEqual(["takeover", "run", "completed"]);
    expect(events[0]).toMatchObject({ attempt: 2 });
  });

  it("takes back its own claim, seen only after its lease passed, and runs it: no takeover, even if irreversible", async () => {
    const inner = memoryStore();
    const clock = fakeClock(start);
    let lost = 1;
    // The claim's reply is lost; the client resends it once the store's clock has passed the lease.
    const store: IdempotencyStore = {
      ...inner,
      claim: async (request) => {
        const answer = await inner.claim(request);
        if (lost-- <= 0) return answer;
        await clock.advance(LEASE_MS);
        return inner.claim({ ...request, now: clock.now() });
      },
    };
    const { tool, types, runs } = smsTool({ store, clock, effect: "irreversible" });
    expect(await tool(sms, { key: "k" })).toMatchObject({ result: "msg-1", was_replay: false });
    expect(runs()).toBe(1);
    expect(types()).toEqual(["run", "completed"]);
    expect(await inner.get({ scope: "default", key: "k" }, clock.now())).toMatchObject({
      status: "completed",
      attempts: 2,
    });
  });
});

describe("the words of an unknown outcome", () => {
  it("names when a crashed worker's lease passed, and reports the outcome_unknown", async () => {
    const store = memoryStore();
    const clock = fakeClock(start);
    const record = await crashedClaim(store, clock.now());
    await clock.advance(LEASE_MS + 5_000);
    const { tool, events, types } = smsTool({ store, clock });
    const error = await rejection(tool(sms, { key: "k" }));
    expect(error).toBeInstanceOf(OutcomeUnknownError);
    expect((error as Error).message).toContain(
      `is unknown: the worker that claimed it stopped renewing its lease at ${new Date(record.leaseExpiresAt).toISOString()} (it may have crashed after the effect).`,
    );
    expect(types()).toEqual(["outcome_unknown"]);
    expect(events[0]).toMatchObject({ attempt: 1, error });
  });

  it("says why the tool's throw left it unknown, and a repeat quotes the stored failure", async () => {
    const store = memoryStore();
    const clock = fakeClock(start);
    const first = smsTool({ store, clock, fail: () => new Error("socket hang up") });
    const error = await rejection(first.tool(sms, { key: "k" }));
    expect((error as Error).message).toContain(
      "is unknown: the tool threw before reporting an outcome (socket hang up), and its irreversible effect may have happened.",
    );
    await clock.advance(1_000);
    const repeat = smsTool({ store, clock });
    const again = await rejection(repeat.tool(sms, { key: "k" }));
    expect((again as Error).message).toContain(
      `is unknown: the attempt at ${new Date(start).toISOString()} ended without a known outcome (socket hang up).`,
    );
  });

  it("adds no note for an attempt that stored no failure", async () => {
    const store = memoryStore();
    const clock = fakeClock(start);
    await crashedClaim(store, clock.now());
    await clock.advance(LEASE_MS);
    // verify takes the crashed claim over and cannot tell: the record is unknown, with no failure stored.
    const verifier = smsTool({ store, clock, verify: () => ({ status: "unknown" }) });
    await rejection(verifier.tool(sms, { key: "k" }));
    const repeat = smsTool({ store, clock });
    const error = await rejection(repeat.tool(sms, { key: "k" }));
    expect((error as Error).message).toContain(
      `is unknown: the attempt at ${new Date(clock.now()).toISOString()} ended without a known outcome. It will not run again`,
    );
  });

  it("adds no note when this worker cannot open the stored failure, and still fails closed", async () => {
    const store = memoryStore();
    const clock = fakeClock(start);
    const sealed = { keys: { k1: randomBytes(32) }, current: "k1" };
    const other = { keys: { k2: randomBytes(32) }, current: "k2" };
    const first = smsTool({
      store,
      clock,
      encryption: sealed,
      fingerprintKeys: false,
      fail: () => new Error("socket hang up"),
    });
    await rejection(first.tool(sms, { key: "k" }));
    const repeat = smsTool({ store, clock, encryption: other, fingerprintKeys: false });
    const error = await rejection(repeat.tool(sms, { key: "k" }));
    expect(error).toBeInstanceOf(OutcomeUnknownError);
    expect((error as Error).message).toContain("ended without a known outcome. It will not run again");
    expect(repeat.runs()).toBe(0);
  });
});

describe("verify's answers", () => {
  async function verifying(verify: IdempotentOptions<Sms, unknown>["verify"], store = memoryStore()) {
    const clock = fakeClock(start);
    await unknownRecord(store, clock);
    await clock.advance(1_000);
    return smsTool({ store, clock, ...(verify ? { verify } : {}) });
  }

  it("an unknown with no reason says only that verify could not tell, and carries no cause", async () => {
    const { tool, types } = await verifying(() => ({ status: "unknown" }));
    const error = await rejection(tool(sms, { key: "k" }));
    expect(error).toBeInstanceOf(OutcomeUnknownError);
    expect((error as Error).message).toContain("; verify could not tell. It will not run again");
    expect("cause" in (error as Error)).toBe(false);
    expect(types()).toEqual(["takeover", "verify", "outcome_unknown"]);
  });

  it("an answer verify is not allowed to give is reported as such and stays unknown", async () => {
    const { tool, runs } = await verifying(() => ({ status: "sent" }) as never);
    const error = await rejection(tool(sms, { key: "k" }));
    expect(error).toBeInstanceOf(OutcomeUnknownError);
    expect((error as Error).message).toContain(
      "; verify returned an unrecognised outcome. It will not run again",
    );
    expect(runs()).toBe(0);
  });

  it("a result it found is replayed and reported as a replay", async () => {
    const { tool, types, clock } = await verifying(() => ({ status: "completed", result: "msg-1" }));
    expect(await tool(sms, { key: "k" })).toMatchObject({ result: "msg-1", was_replay: true });
    expect(types()).toEqual(["takeover", "verify", "replay"]);
    // The claim it held while verify ran is let go: no renewal stays scheduled.
    expect(clock.pending).toBe(0);
  });

  it("a failure it found is recorded, replayed and reported as a replay", async () => {
    const { tool, types, store, clock } = await verifying(() => ({
      status: "failed",
      error: new Error("number unreachable"),
    }));
    const error = await rejection(tool(sms, { key: "k" }));
    expect(error).toBeInstanceOf(ReplayedFailureError);
    expect((error as Error).message).toContain("number unreachable");
    expect(types()).toEqual(["takeover", "verify", "replay"]);
    expect(await store.get({ scope: "default", key: "k" }, clock.now())).toMatchObject({ status: "failed" });
  });

  it("reports a renewal that fails while verify runs, and still records what verify found", async () => {
    const inner = memoryStore();
    let renewFails = false;
    const store: IdempotencyStore = {
      ...inner,
      renew: (request) => (renewFails ? Promise.reject(new Error("replica lag")) : inner.renew(request)),
    };
    const clock = fakeClock(start);
    await unknownRecord(store, clock);
    let answer!: () => void;
    const { tool, events } = smsTool({
      store,
      clock,
      verify: async () => {
        renewFails = true;
        await new Promise<void>((resolve) => {
          answer = resolve;
        });
        renewFails = false;
        return { status: "completed", result: "msg-1" };
      },
    });
    const call = tool(sms, { key: "k" });
    await clock.advance(LEASE_MS / 3);
    answer();
    expect(await call).toMatchObject({ result: "msg-1", was_replay: true });
    const storeErrors = events.filter((e) => e.type === "store_error");
    expect(storeErrors).toHaveLength(1);
    expect(storeErrors[0]?.error).toBeInstanceOf(StoreUnavailableError);
    expect(storeErrors[0]?.error).toMatchObject({
      message: expect.stringContaining("during renew: replica lag"),
    });
    expect(await store.get({ scope: "default", key: "k" }, clock.now())).toMatchObject({
      status: "completed",
    });
  });

  it("a store that cannot confirm the claim after verify answers is store_unavailable; nothing runs or is recorded", async () => {
    const inner = memoryStore();
    let renewFails = false;
    const store: IdempotencyStore = {
      ...inner,
      renew: (request) => (renewFails ? Promise.reject(new Error("replica lag")) : inner.renew(request)),
    };
    const clock = fakeClock(start);
    await unknownRecord(store, clock);
    const { tool, runs } = smsTool({
      store,
      clock,
      verify: () => {
        renewFails = true;
        return { status: "not_executed" };
      },
    });
    const error = await rejection(tool(sms, { key: "k" }));
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as Error).message).toContain("during renew: replica lag");
    expect(runs()).toBe(0);
    expect(await inner.get({ scope: "default", key: "k" }, clock.now())).toMatchObject({
      status: "in_progress",
      attempts: 2,
    });
  });
});

describe("events of a run and a replay", () => {
  it("a definitive failure is reported as failed, and its replay as a replay", async () => {
    const store = memoryStore();
    const clock = fakeClock(start);
    const declined = new Error("number unreachable");
    const { tool, events, types } = smsTool({ store, clock, fail: () => definitiveFailure(declined) });
    expect(await rejection(tool(sms, { key: "k" }))).toBe(declined);
    expect(await rejection(tool(sms, { key: "k" }))).toBeInstanceOf(ReplayedFailureError);
    expect(types()).toEqual(["run", "failed", "replay"]);
    expect(events[1]).toMatchObject({ attempt: 1, error: declined });
    expect(events[2]).toMatchObject({ attempt: 1 });
  });

  it("a plain call costs one claim and one settle, and reads nothing else", async () => {
    const inner = memoryStore();
    const calls: string[] = [];
    const store = new Proxy(inner, {
      get(target, name, receiver) {
        const value = Reflect.get(target, name, receiver);
        if (typeof value !== "function") return value;
        return (...args: unknown[]) => {
          calls.push(String(name));
          return value.apply(target, args);
        };
      },
    });
    const { tool } = smsTool({ store });
    await tool(sms, { key: "k" });
    expect(calls).toEqual(["claim", "settle"]);
  });
});

describe("a run under a store with a mind of its own", () => {
  it("reports a renewal that fails while the tool runs, and still records the result", async () => {
    const inner = memoryStore();
    let renewFails = true;
    const store: IdempotencyStore = {
      ...inner,
      renew: (request) => (renewFails ? Promise.reject(new Error("replica lag")) : inner.renew(request)),
    };
    const clock = fakeClock(start);
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const { tool, events } = smsTool({
      store,
      clock,
      result: async () => {
        await finished;
        return "msg-1";
      },
    });
    const call = tool(sms, { key: "k" });
    await clock.advance(LEASE_MS / 3);
    renewFails = false;
    finish();
    expect(await call).toMatchObject({ result: "msg-1", was_replay: false });
    const storeErrors = events.filter((e) => e.type === "store_error");
    expect(storeErrors).toHaveLength(1);
    expect(storeErrors[0]?.error).toBeInstanceOf(StoreUnavailableError);
    expect(storeErrors[0]?.error).toMatchObject({
      message: expect.stringContaining("during renew: replica lag"),
    });
    expect(await inner.get({ scope: "default", key: "k" }, clock.now())).toMatchObject({
      status: "completed",
    });
  });

  it("gives the expiry the store recorded, by the store's clock, not this process's", async () => {
    const inner = memoryStore();
    const aheadMs = 5_000;
    // A server-clock store (PostgreSQL, Redis) whose clock runs ahead of this process's.
    const store: IdempotencyStore = {
      ...inner,
      settle: (request) => inner.settle({ ...request, now: request.now + aheadMs }),
    };
    const clock = fakeClock(start);
    const { tool } = smsTool({ store, clock });
    const envelope = await tool(sms, { key: "k" });
    expect(envelope.original_called_at).toBe(new Date(start).toISOString());
    expect(envelope.expires_at).toBe(new Date(start + aheadMs + TTL_MS).toISOString());
    const replay = await tool(sms, { key: "k" });
    expect(replay.expires_at).toBe(envelope.expires_at);
  });
});

describe("a result the store cannot keep", () => {
  it("too large: the caller gets it, the completed event says why it was not kept, and a repeat is told", async () => {
    const store = memoryStore();
    const clock = fakeClock(start);
    const { tool, events } = smsTool({ store, clock, maxResultBytes: 16, result: () => "x".repeat(100) });
    expect((await tool(sms, { key: "k" })).result).toBe("x".repeat(100));
    const completed = events.find((e) => e.type === "completed");
    expect(completed?.error).toBeInstanceOf(ResultTooLargeError);
    expect(completed?.error).toMatchObject({ code: "result_too_large", maxBytes: 16 });
    const error = await rejection(tool(sms, { key: "k" }));
    expect(error).toBeInstanceOf(ResultTooLargeError);
  });

  it("unserializable: the completed event carries a ResultUnserializableError with the settled record", async () => {
    const { tool, events } = smsTool({ result: () => ({ amount: 10n }) });
    expect((await tool(sms, { key: "k" })).result).toEqual({ amount: 10n });
    const completed = events.find((e) => e.type === "completed");
    expect(completed?.error).toBeInstanceOf(ResultUnserializableError);
    expect(completed?.error).toMatchObject({
      code: "result_unserializable",
      message: expect.stringContaining("BigInt"),
      record: expect.objectContaining({ key: "k", status: "completed" }),
    });
    const error = await rejection(tool(sms, { key: "k" }));
    expect(error).toBeInstanceOf(ResultUnserializableError);
  });
});

describe("the near-duplicate hint, when the store fails on its markers", () => {
  it("reports each failure as a store error, and the call still runs", async () => {
    const inner = memoryStore();
    const store: IdempotencyStore = {
      ...inner,
      get: () => Promise.reject(new Error("replica lag")),
      claim: (request) =>
        request.key.startsWith("~similar~") ? Promise.reject(new Error("replica lag")) : inner.claim(request),
    };
    const { tool, events, runs } = smsTool({ store, similar: { fields: ["to"] } });
    expect(await tool(sms, { key: "k" })).toMatchObject({ result: "msg-1", was_replay: false });
    expect(runs()).toBe(1);
    const errors = events.filter((e) => e.type === "store_error").map((e) => e.error as IdempotencyError);
    expect(errors.map((e) => e.message)).toEqual([
      "The idempotency store failed during similar-call lookup: replica lag. The call goes on without its near-duplicate hint.",
      "The idempotency store failed during similar-call record: replica lag. The tool ran; later calls may miss the near-duplicate hint.",
    ]);
    expect(errors.map((e) => (e.cause as Error).message)).toEqual(["replica lag", "replica lag"]);
  });
});
