// Paths of a call where a change would hand a caller the wrong thing (a double effect, a replay flag on a
// fresh run, a string where a record belongs) and nothing else in the suite would notice.
import { describe, expect, it } from "vitest";
import { gate, hasSettled, rejection } from "../../test/fixtures/tools.js";
import { fakeClock } from "../testing/fake-clock.js";
import {
  type IdempotencyError,
  isIdempotencyError,
  KeyInUseError,
  LeaseLostError,
  OutcomeUnknownError,
  StoreUnavailableError,
} from "./errors.js";
import { fingerprint } from "./fingerprint.js";
import { idempotent, type ToolContext } from "./idempotent.js";
import { flightCount } from "./in-flight.js";
import { memoryStore } from "./memory-store.js";
import type { Effect, VerifyContext, VerifyOutcome } from "./options.js";
import { definitiveFailure, notExecuted } from "./outcomes.js";
import type { IdempotencyRecord, IdempotencyStore } from "./store.js";

interface Sms {
  to: string;
  body: string;
}

const sms: Sms = { to: "+15550100", body: "Your code is 4711" };
const LEASE_MS = 60_000;
const TTL_MS = 86_400_000;

/** A memory store whose takeovers are recorded: who won, who found the record already moved on. */
function watchedStore() {
  const inner = memoryStore();
  const takeovers: (IdempotencyRecord | null)[] = [];
  const store: IdempotencyStore = {
    ...inner,
    takeover: async (request) => {
      const taken = await inner.takeover(request);
      takeovers.push(taken);
      return taken;
    },
  };
  return { store, takeovers };
}

/** A worker that claimed (scope, key) for `sms` and died: the record stays in progress, nobody renews it. */
async function crashedClaim(store: IdempotencyStore, now: number, scope = "default", key = "k") {
  const outcome = await store.claim({
    scope,
    key,
    tool: "send_sms",
    fingerprint: fingerprint(sms),
    token: "dead-worker",
    leaseMs: LEASE_MS,
    ttlMs: TTL_MS,
    now,
  });
  expect(outcome.claimed).toBe(true);
  return outcome.record;
}

/** An SMS gateway that counts the messages it really sends, by the key the tool passes downstream. */
function smsTool(options: {
  store: IdempotencyStore;
  effect: Effect;
  clock?: ReturnType<typeof fakeClock>;
  verify?: (
    record: IdempotencyRecord,
    context: VerifyContext<Sms>,
  ) => VerifyOutcome<string> | Promise<VerifyOutcome<string>>;
  /** Throw after sending, on these runs (1-based): the effect happened, the reply was lost. */
  throwAfterSendOn?: number[];
  hold?: Promise<void>;
}) {
  const clock = options.clock ?? fakeClock();
  const sent = new Map<string, string>();
  const contexts: ToolContext[] = [];
  let runs = 0;
  const on = (store: IdempotencyStore) =>
    idempotent(
      async (_args: Sms, context) => {
        runs++;
        contexts.push(context);
        if (options.hold) await options.hold;
        const id = `msg-${runs}`;
        sent.set(context.key, id);
        if (options.throwAfterSendOn?.includes(runs)) throw new Error("socket hang up");
        return id;
      },
      {
        name: "send_sms",
        store,
        clock,
        effect: options.effect,
        leaseMs: LEASE_MS,
        ttlMs: TTL_MS,
        ...(options.verify ? { verify: options.verify } : {}),
      },
    );
  const tool = on(options.store);
  // The same tool in another worker: repeats in one process join each other's claims (they never race
  // each other to the store), so a race on the store itself needs a second worker. Its own view of the
  // store is what tells the core it is not in this process.
  const elsewhere = on({ ...options.store });
  return { tool, elsewhere, clock, sent, contexts, runs: () => runs };
}

describe("verify is asked about the call it resolves", () => {
  it("receives the call's arguments, key, scope and a live signal, so a lookup by key finds the message", async () => {
    const store = memoryStore();
    const seen: VerifyContext<Sms>[] = [];
    const { tool, sent, runs } = smsTool({
      store,
      effect: "irreversible",
      throwAfterSendOn: [1],
      verify: (_record, context) => {
        seen.push(context);
        const id = sent.get(context.key);
        return id === undefined ? { status: "not_executed" } : { status: "completed", result: id };
      },
    });
    expect(await rejection(tool(sms, { key: "otp-1", scope: "tenant-a" }))).toBeInstanceOf(
      OutcomeUnknownError,
    );

    const resolved = await tool(sms, { key: "otp-1", scope: "tenant-a" });
    expect(resolved).toMatchObject({ result: "msg-1", was_replay: true, idempotency_key: "otp-1" });
    expect(runs()).toBe(1);
    expect(seen).toHaveLength(1);
    const context = seen[0]!;
    expect(context.args).toEqual(sms);
    expect(context.key).toBe("otp-1");
    expect(context.scope).toBe("tenant-a");
    expect(context.signal).toBeInstanceOf(AbortSignal);
    expect(context.signal.aborted).toBe(false);
  });

  it("passes the caller's abort on to verify's signal", async () => {
    const store = memoryStore();
    const caller = new AbortController();
    let verifySignal: AbortSignal | undefined;
    const clock = fakeClock();
    const tool = idempotent(async (_args: Sms) => "sent", {
      name: "send_sms",
      store,
      clock,
      effect: "irreversible",
      verify: async (_record, context) => {
        verifySignal = context.signal;
        caller.abort(new Error("user cancelled"));
        return { status: "unknown", reason: "gateway timed out" };
      },
    });
    await crashedClaim(store, clock.now(), "default", "k");
    await clock.advance(LEASE_MS);
    const error = await rejection(tool(sms, { key: "k", signal: caller.signal }));
    expect(isIdempotencyError(error, "outcome_unknown")).toBe(true);
    expect(verifySignal?.aborted).toBe(true);
    expect(verifySignal?.reason).toEqual(new Error("user cancelled"));
  });
});

describe("two repeats race to take over one record", () => {
  it("native-key: a crashed claim is taken over by exactly one; the other waits and gets its outcome", async () => {
    const { store, takeovers } = watchedStore();
    const hold = gate();
    const { tool, elsewhere, clock, contexts, runs } = smsTool({
      store,
      effect: "native-key",
      hold: hold.opened,
    });
    await crashedClaim(store, clock.now());
    await clock.advance(LEASE_MS);

    const racers = [tool(sms, { key: "k" }), elsewhere(sms, { key: "k" })];
    await clock.advance(0);
    expect(takeovers.map((taken) => taken?.attempts ?? null)).toEqual([2, null]);
    hold.open();
    await clock.advance(1_000);
    const envelopes = await Promise.all(racers);

    expect(runs()).toBe(1);
    expect(contexts.map((c) => c.attempt)).toEqual([2]);
    expect(envelopes.map((e) => [e.result, e.was_replay, e.original_called_at]).sort()).toEqual([
      ["msg-1", false, "2026-01-01T00:00:00.000Z"],
      ["msg-1", true, "2026-01-01T00:00:00.000Z"],
    ]);
    const record = await store.get({ scope: "default", key: "k" }, clock.now());
    expect(record).toMatchObject({ status: "completed", attempts: 2 });
  });

  it("irreversible with verify: an unknown record is verified and run by exactly one; the other replays it", async () => {
    const { store, takeovers } = watchedStore();
    let verifies = 0;
    const { tool, elsewhere, clock, runs } = smsTool({
      store,
      effect: "irreversible",
      throwAfterSendOn: [1],
      verify: () => {
        verifies++;
        return { status: "not_executed" };
      },
    });
    expect(await rejection(tool(sms, { key: "k" }))).toBeInstanceOf(OutcomeUnknownError);
    expect((await store.get({ scope: "default", key: "k" }, clock.now()))?.status).toBe("unknown");

    const racers = [tool(sms, { key: "k" }), elsewhere(sms, { key: "k" })];
    await clock.advance(0);
    expect(takeovers.map((taken) => taken?.attempts ?? null)).toEqual([2, null]);
    await clock.advance(1_000);
    const envelopes = await Promise.all(racers);

    expect(verifies).toBe(1);
    // The first call's run, and one more after verify: never one per racer.
    expect(runs()).toBe(2);
    expect(envelopes.map((e) => [e.result, e.was_replay]).sort()).toEqual([
      ["msg-2", false],
      ["msg-2", true],
    ]);
  });

  it("irreversible with verify: when verify finds the message, both racers get it and the tool never runs", async () => {
    const { store, takeovers } = watchedStore();
    let verifies = 0;
    const { tool, elsewhere, clock, runs } = smsTool({
      store,
      effect: "irreversible",
      verify: () => {
        verifies++;
        return { status: "completed", result: "msg-found" };
      },
    });
    await crashedClaim(store, clock.now());
    await clock.advance(LEASE_MS);

    const racers = [tool(sms, { key: "k" }), elsewhere(sms, { key: "k" })];
    await clock.advance(1_000);
    const envelopes = await Promise.all(racers);

    expect(takeovers.map((taken) => taken?.attempts ?? null)).toEqual([2, null]);
    expect(verifies).toBe(1);
    expect(runs()).toBe(0);
    expect(envelopes).toEqual([
      expect.objectContaining({ result: "msg-found", was_replay: true }),
      expect.objectContaining({ result: "msg-found", was_replay: true }),
    ]);
  });
});

describe("a crashed claim, by effect class", () => {
  it("owned-store: takes it over, on attempt 2 in the tool's context and in the record", async () => {
    const store = memoryStore();
    const { tool, clock, contexts } = smsTool({ store, effect: "owned-store" });
    await crashedClaim(store, clock.now());
    await clock.advance(LEASE_MS);

    expect(await tool(sms, { key: "k" })).toMatchObject({ result: "msg-1", was_replay: false });
    expect(contexts.map((c) => [c.key, c.attempt])).toEqual([["k", 2]]);
    const record = await store.get({ scope: "default", key: "k" }, clock.now());
    expect(record).toMatchObject({ status: "completed", attempts: 2 });
    expect(record?.token).not.toBe("dead-worker");
  });

  it("irreversible without verify: fails closed and leaves the record exactly as the dead worker left it", async () => {
    const store = memoryStore();
    const { tool, clock, runs } = smsTool({ store, effect: "irreversible" });
    const crashed = await crashedClaim(store, clock.now());
    await clock.advance(LEASE_MS);

    const error = await rejection(tool(sms, { key: "k" }));
    expect(error).toBeInstanceOf(OutcomeUnknownError);
    expect((error as OutcomeUnknownError).record).toEqual(crashed);
    expect(await store.get({ scope: "default", key: "k" }, clock.now())).toEqual(crashed);
    expect(runs()).toBe(0);
  });
});

describe("an unknown record that verify calls not executed", () => {
  it("runs the tool once more, on attempt 2, and reports a fresh run", async () => {
    const store = memoryStore();
    let verifies = 0;
    const { tool, clock, contexts, runs } = smsTool({
      store,
      effect: "irreversible",
      throwAfterSendOn: [1],
      verify: () => {
        verifies++;
        return { status: "not_executed" };
      },
    });
    await rejection(tool(sms, { key: "k" }));
    await clock.advance(5_000);

    const envelope = await tool(sms, { key: "k" });
    expect(envelope).toEqual({
      result: "msg-2",
      was_replay: false,
      original_called_at: "2026-01-01T00:00:00.000Z",
      idempotency_key: "k",
      expires_at: new Date(clock.now() + TTL_MS).toISOString(),
    });
    expect(verifies).toBe(1);
    expect(runs()).toBe(2);
    expect(contexts.map((c) => c.attempt)).toEqual([1, 2]);
    expect(await tool(sms, { key: "k" })).toMatchObject({ result: "msg-2", was_replay: true });
    expect(runs()).toBe(2);
  });
});

describe("a lost claim or a failing store at settle: the documented error, carrying a real record", () => {
  /** A tool that throws `toolError()` after another worker took its key, so its settle is fenced off. */
  function stolenDuringRun(effect: Effect, toolError: () => unknown) {
    const store = memoryStore();
    const clock = fakeClock();
    const tool = idempotent(
      async (_args: Sms, context) => {
        // An operator deleted the record while the tool ran, and another worker claimed the key again.
        await store.delete({ scope: context.scope, key: context.key });
        await store.claim({
          scope: context.scope,
          key: context.key,
          tool: "send_sms",
          fingerprint: fingerprint(sms),
          token: "later-owner",
          leaseMs: LEASE_MS,
          ttlMs: TTL_MS,
          now: clock.now(),
        });
        throw toolError();
      },
      { name: "send_sms", store, clock, effect },
    );
    return { tool, store, clock };
  }

  it("a tool that throws after losing its claim gets lease_lost, with the throw as its cause", async () => {
    const boom = new Error("socket hang up");
    const { tool, store, clock } = stolenDuringRun("irreversible", () => boom);
    const error = await rejection(tool(sms, { key: "k" }));
    expect(error).toBeInstanceOf(LeaseLostError);
    expect((error as IdempotencyError).code).toBe("lease_lost");
    expect((error as Error).cause).toBe(boom);
    const later = await store.get({ scope: "default", key: "k" }, clock.now());
    expect(later).toMatchObject({ token: "later-owner", status: "in_progress", attempts: 1 });
  });

  it("a definitive failure after losing the claim gets lease_lost, and the later owner's record stays", async () => {
    const declined = new Error("card declined");
    const { tool, store, clock } = stolenDuringRun("irreversible", () => definitiveFailure(declined));
    const error = await rejection(tool(sms, { key: "k" }));
    expect(error).toBeInstanceOf(LeaseLostError);
    expect((error as Error).cause).toBe(declined);
    const later = await store.get({ scope: "default", key: "k" }, clock.now());
    expect(later).toMatchObject({ token: "later-owner", status: "in_progress" });
  });

  function settleFails() {
    const inner = memoryStore();
    const store: IdempotencyStore = {
      ...inner,
      settle: () => Promise.reject(new Error("connection reset")),
    };
    return { inner, store };
  }

  it("a throw under irreversible when settle fails: outcome_unknown carrying the claimed record", async () => {
    const { inner, store } = settleFails();
    const { tool, clock } = smsTool({ store, effect: "irreversible", throwAfterSendOn: [1] });
    const error = await rejection(tool(sms, { key: "k" }));
    expect(error).toBeInstanceOf(OutcomeUnknownError);
    const record = (error as OutcomeUnknownError).record;
    expect(typeof record).toBe("object");
    const held = await inner.get({ scope: "default", key: "k" }, clock.now());
    expect(record).toEqual(held);
    expect(record).toMatchObject({ status: "in_progress", attempts: 1, key: "k", tool: "send_sms" });
    expect((error as Error).message).toContain('send_sms with key "k"');
  });

  it("a definitive failure when settle fails: the tool's own error, not a replay", async () => {
    const { store } = settleFails();
    const declined = new Error("card declined");
    const clock = fakeClock();
    const tool = idempotent(
      async () => {
        throw definitiveFailure(declined);
      },
      { name: "charge", store, clock },
    );
    expect(await rejection(tool({}, { key: "k" }))).toBe(declined);
  });

  it("a completed run when settle fails: a fresh run, expiring a full window from now", async () => {
    const { store } = settleFails();
    const clock = fakeClock();
    await clock.advance(30_000);
    const { tool } = smsTool({ store, effect: "irreversible", clock });
    const envelope = await tool(sms, { key: "k" });
    expect(envelope.was_replay).toBe(false);
    expect(envelope.result).toBe("msg-1");
    expect(envelope.original_called_at).toBe(new Date(clock.now()).toISOString());
    expect(envelope.expires_at).toBe(new Date(clock.now() + TTL_MS).toISOString());
  });

  it("verify finds the message when settle fails: a replay expiring a full window from now", async () => {
    const inner = memoryStore();
    let settleFailing = false;
    const store: IdempotencyStore = {
      ...inner,
      settle: (request) =>
        settleFailing ? Promise.reject(new Error("connection reset")) : inner.settle(request),
    };
    const { tool, clock, runs } = smsTool({
      store,
      effect: "irreversible",
      throwAfterSendOn: [1],
      verify: () => ({ status: "completed", result: "msg-1" }),
    });
    await rejection(tool(sms, { key: "k" }));
    settleFailing = true;
    await clock.advance(5_000);
    const envelope = await tool(sms, { key: "k" });
    expect(envelope).toMatchObject({ result: "msg-1", was_replay: true });
    expect(envelope.expires_at).toBe(new Date(clock.now() + TTL_MS).toISOString());
    expect(runs()).toBe(1);
  });

  it("verify cannot tell and settle fails: outcome_unknown carrying the taken-over record", async () => {
    const inner = memoryStore();
    let settleFailing = false;
    const store: IdempotencyStore = {
      ...inner,
      settle: (request) =>
        settleFailing ? Promise.reject(new Error("connection reset")) : inner.settle(request),
    };
    const { tool, clock } = smsTool({
      store,
      effect: "irreversible",
      throwAfterSendOn: [1],
      verify: () => ({ status: "unknown", reason: "gateway has no record yet" }),
    });
    await rejection(tool(sms, { key: "k" }));
    settleFailing = true;
    const error = await rejection(tool(sms, { key: "k" }));
    expect(error).toBeInstanceOf(OutcomeUnknownError);
    const record = (error as OutcomeUnknownError).record;
    expect(record).toEqual(await inner.get({ scope: "default", key: "k" }, clock.now()));
    expect(record).toMatchObject({ status: "in_progress", attempts: 2 });
    expect((error as Error).message).toContain("gateway has no record yet");
  });
});

describe("waiters in this process and the in-flight registry", () => {
  it("wakes a waiter the moment the owner settles, on the real clock, and never polls the store meanwhile", async () => {
    const inner = memoryStore();
    const hold = gate();
    let claims = 0;
    let openedAt = 0;
    const store: IdempotencyStore = {
      ...inner,
      claim: async (request) => {
        claims++;
        return inner.claim(request);
      },
    };
    let runs = 0;
    const tool = idempotent(
      async () => {
        runs++;
        await hold.opened;
        return "sent";
      },
      { name: "send_sms", store },
    );
    const owner = tool({}, { key: "k" });
    const waiter = tool({}, { key: "k" });
    // Long enough for a polling waiter to have looked five times (10, 20, 40, 80, 160 ms, each ±25%).
    setTimeout(() => {
      openedAt = performance.now();
      hold.open();
    }, 400);
    const replay = await waiter;
    const wokeAfterMs = performance.now() - openedAt;

    expect(await owner).toMatchObject({ result: "sent", was_replay: false });
    expect(replay).toMatchObject({ result: "sent", was_replay: true });
    expect(runs).toBe(1);
    // The owner's claim, which the waiter joined; the waiter takes the outcome from the owner's settle.
    expect(claims).toBe(1);
    expect(wokeAfterMs).toBeLessThan(150);
  });

  it("wakes a waiter with a signal on the owner's settle without the clock moving", async () => {
    const store = memoryStore();
    const hold = gate();
    const clock = fakeClock();
    const tool = idempotent(
      async () => {
        await hold.opened;
        return "sent";
      },
      { name: "send_sms", store, clock },
    );
    const owner = tool({}, { key: "k" });
    let replay: unknown;
    const waiter = tool({}, { key: "k", signal: new AbortController().signal }).then((envelope) => {
      replay = envelope;
    });
    await clock.advance(0);
    expect(clock.pending).toBeGreaterThan(0);
    const before = clock.now();
    hold.open();
    await clock.advance(0);
    expect(clock.now()).toBe(before);
    expect(replay).toMatchObject({ result: "sent", was_replay: true });
    await owner;
    await waiter;
  });

  it("is empty again after calls that completed, failed, threw, released, replayed or waited", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const hold = gate();
    const tool = idempotent(
      async (args: { outcome: string }) => {
        if (args.outcome === "held") await hold.opened;
        if (args.outcome === "definitive") throw definitiveFailure(new Error("declined"));
        if (args.outcome === "not-executed") throw notExecuted(new Error("invalid address"));
        if (args.outcome === "throw") throw new Error("socket hang up");
        return args.outcome;
      },
      { name: "send_sms", store, clock },
    );
    const nativeKey = idempotent(
      async () => {
        throw new Error("socket hang up");
      },
      { name: "charge", store, clock, effect: "native-key" },
    );

    await tool({ outcome: "ok" }, { key: "ok" });
    await tool({ outcome: "ok" }, { key: "ok" });
    await rejection(tool({ outcome: "definitive" }, { key: "definitive" }));
    await rejection(tool({ outcome: "not-executed" }, { key: "not-executed" }));
    await rejection(tool({ outcome: "throw" }, { key: "throw" }));
    await rejection(nativeKey({}, { key: "native" }));
    const held = tool({ outcome: "held" }, { key: "held" });
    const waiting = tool({ outcome: "held" }, { key: "held" });
    await clock.advance(0);
    expect(flightCount(store)).toBe(1);
    hold.open();
    await clock.advance(1_000);
    await Promise.all([held, waiting]);

    expect(flightCount(store)).toBe(0);
  });
});

describe("a store error is reported as such", () => {
  it("a takeover that cannot reach the store is store_unavailable, and the tool does not run", async () => {
    const inner = memoryStore();
    const store: IdempotencyStore = {
      ...inner,
      takeover: () => Promise.reject(new Error("ECONNRESET")),
    };
    const { tool, clock, runs } = smsTool({ store, effect: "native-key" });
    await crashedClaim(store, clock.now());
    await clock.advance(LEASE_MS);
    expect(await rejection(tool(sms, { key: "k" }))).toBeInstanceOf(StoreUnavailableError);
    expect(runs()).toBe(0);
  });

  it("a takeover that landed but whose reply was lost is read back: the tool runs once, on the taken record", async () => {
    const inner = memoryStore();
    const store: IdempotencyStore = {
      ...inner,
      takeover: async (request) => {
        await inner.takeover(request);
        throw new Error("ECONNRESET after commit");
      },
    };
    const { tool, clock, runs } = smsTool({ store, effect: "native-key" });
    await crashedClaim(store, clock.now());
    await clock.advance(LEASE_MS);
    const envelope = await tool(sms, { key: "k" });
    expect(envelope.result).toBe("msg-1");
    expect(envelope.was_replay).toBe(false);
    expect(runs()).toBe(1);
    const record = await inner.get({ scope: "default", key: "k" }, clock.now());
    expect(record?.status).toBe("completed");
    expect(record?.attempts).toBe(2);
  });

  it("a takeover whose reply was lost is not taken as this call's once its lease has passed by the read-back", async () => {
    const inner = memoryStore();
    const clock = fakeClock();
    const store: IdempotencyStore = {
      ...inner,
      takeover: async (request) => {
        await inner.takeover(request);
        // The reply comes back only as the new lease ends.
        await clock.advance(LEASE_MS);
        throw new Error("ECONNRESET after commit");
      },
    };
    const { tool, runs } = smsTool({ store, effect: "native-key", clock });
    await crashedClaim(store, clock.now());
    await clock.advance(LEASE_MS);
    expect(await rejection(tool(sms, { key: "k" }))).toBeInstanceOf(StoreUnavailableError);
    expect(runs()).toBe(0);
  });

  it("a takeover whose reply was lost is not taken as this call's when its lease, by a store behind, has passed here", async () => {
    const inner = memoryStore();
    const clock = fakeClock();
    const store: IdempotencyStore = {
      ...inner,
      takeover: async (request) => {
        // A store whose clock runs half a lease behind this process's: the lease it wrote ends half a lease
        // from now here. The reply is lost as that moment comes, within the lease since sending.
        await inner.takeover({ ...request, now: request.now - LEASE_MS / 2 });
        await clock.advance(LEASE_MS / 2);
        throw new Error("ECONNRESET after commit");
      },
    };
    const { tool, runs } = smsTool({ store, effect: "native-key", clock });
    await crashedClaim(store, clock.now());
    // Past the crashed claim's lease by the store's clock too.
    await clock.advance(2 * LEASE_MS);
    const error = await rejection(tool(sms, { key: "k" }));
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as Error).message).toMatch(
      /^The idempotency store failed during takeover: ECONNRESET after commit/,
    );
    expect(runs()).toBe(0);
  });

  it("a takeover whose reply was lost and whose read-back fails is store_unavailable during the takeover", async () => {
    for (const takeover of [
      () => Promise.reject(new Error("ECONNRESET")),
      // A refusal that may hide our own takeover, resent, whose read-back cannot reach the store either.
      async () => null,
    ]) {
      const inner = memoryStore();
      let down = false;
      const store: IdempotencyStore = {
        ...inner,
        takeover: () => {
          down = true;
          return takeover();
        },
        get: (id, now) => (down ? Promise.reject(new Error("ECONNRESET on read")) : inner.get(id, now)),
      };
      const { tool, clock, runs } = smsTool({ store, effect: "native-key" });
      await crashedClaim(store, clock.now());
      await clock.advance(LEASE_MS);
      const error = await rejection(tool(sms, { key: "k" }));
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as Error).message).toMatch(/^The idempotency store failed during takeover: ECONNRESET/);
      expect(runs()).toBe(0);
    }
  });

  it("a store whose claim throws at once is store_unavailable during the claim, and the tool does not run", async () => {
    const inner = memoryStore();
    const store: IdempotencyStore = {
      ...inner,
      claim: () => {
        throw new Error("pool exhausted");
      },
    };
    const { tool, runs } = smsTool({ store, effect: "native-key" });
    const error = await rejection(tool(sms, { key: "k" }));
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as StoreUnavailableError).cause).toEqual(new Error("pool exhausted"));
    expect(runs()).toBe(0);
  });
});

describe("the context a tool receives", () => {
  it("hands the tool its context as plain own properties, signal included, so a spread keeps them all", async () => {
    let spread: Partial<ToolContext> = {};
    const tool = idempotent(
      async (_args: { n: number }, context: ToolContext) => {
        spread = { ...context };
        return "ok";
      },
      { name: "ctx", store: memoryStore(), clock: fakeClock() },
    );
    await tool({ n: 1 }, { key: "k", scope: "s" });
    expect(Object.keys(spread)).toEqual(["key", "scope", "tool", "attempt", "signal"]);
    // Nothing else rides along: a copy keeps no lease alive, and a deep equality sees only these five.
    expect(Object.getOwnPropertySymbols(spread)).toEqual([]);
    expect(spread).toMatchObject({ key: "k", scope: "s", tool: "ctx", attempt: 1 });
    expect(spread.signal).toBeInstanceOf(AbortSignal);
    expect(spread.signal?.aborted).toBe(false);
  });
});

describe("a repeat that waits on a call in this process", () => {
  it("leaves no claim marked on its way after a claim the store did not answer, so no later repeat joins it", async () => {
    const inner = memoryStore();
    let down = true;
    const store: IdempotencyStore = {
      ...inner,
      claim: (request) => (down ? Promise.reject(new Error("ECONNRESET")) : inner.claim(request)),
    };
    const { tool, runs } = smsTool({ store, effect: "native-key" });
    expect(await rejection(tool(sms, { key: "k" }))).toBeInstanceOf(StoreUnavailableError);
    expect(flightCount(store)).toBe(0);
    down = false;
    expect((await tool(sms, { key: "k" })).was_replay).toBe(false);
    expect(runs()).toBe(1);
    expect(flightCount(store)).toBe(0);
  });

  it("is woken by the holder's end, not by a poll, though it began after the holder's claim landed", async () => {
    const hold = gate();
    const { tool, clock, runs } = smsTool({
      store: memoryStore(),
      effect: "irreversible",
      hold: hold.opened,
    });
    const first = tool(sms, { key: "k" });
    await clock.advance(0);
    expect(runs()).toBe(1);
    const repeat = tool(sms, { key: "k" });
    expect(await hasSettled(repeat)).toBe(false);
    hold.open();
    expect((await first).result).toBe("msg-1");
    // The clock stands still: only the holder's end can have woken the repeat.
    expect(await hasSettled(repeat)).toBe(true);
    const replayed = await repeat;
    expect([replayed.result, replayed.was_replay]).toEqual(["msg-1", true]);
    expect(runs()).toBe(1);
  });

  it("looks again when the holder's lease would pass, and takes over once its renewals stopped reaching the store", async () => {
    const inner = memoryStore();
    const store: IdempotencyStore = { ...inner, renew: () => Promise.reject(new Error("ECONNRESET")) };
    const clock = fakeClock();
    const hold = gate();
    let runs = 0;
    const tool = idempotent(
      async (_args: Sms) => {
        runs++;
        if (runs === 1) await hold.opened;
        return `msg-${runs}`;
      },
      { name: "send_sms", store, clock, effect: "native-key", leaseMs: 3_000, waitMs: 60_000 },
    );
    const first = tool(sms, { key: "k" });
    await clock.advance(0);
    const repeat = tool(sms, { key: "k" });
    await clock.advance(2_999);
    expect(await hasSettled(repeat)).toBe(false);
    await clock.advance(1);
    // Not at the end of its 60 s wait: at the lease's end, 3 s in, it found the claim stale and took it over.
    expect(await hasSettled(repeat)).toBe(true);
    expect((await repeat).result).toBe("msg-2");
    hold.open();
    await rejection(first);
  });

  it("gives up when its wait is over, though the holder's lease, renewed, runs longer", async () => {
    const clock = fakeClock();
    const hold = gate();
    const tool = idempotent(
      async (_args: Sms) => {
        await hold.opened;
        return "msg-1";
      },
      { name: "send_sms", store: memoryStore(), clock, effect: "native-key", leaseMs: 3_000, waitMs: 4_000 },
    );
    const first = tool(sms, { key: "k" });
    await clock.advance(0);
    const repeat = tool(sms, { key: "k" });
    for (let t = 0; t < 3_999; t += 500) await clock.advance(Math.min(500, 3_999 - t));
    expect(await hasSettled(repeat)).toBe(false);
    await clock.advance(1);
    expect(await hasSettled(repeat)).toBe(true);
    expect(await rejection(repeat)).toBeInstanceOf(KeyInUseError);
    hold.open();
    expect((await first).result).toBe("msg-1");
  });
});

describe("a renewal in flight when the tool returns", () => {
  it("is answered before the settle is sent, so the two never cross on the way to the store", async () => {
    const inner = memoryStore();
    const renewalHeld = gate();
    const order: string[] = [];
    const store: IdempotencyStore = {
      ...inner,
      renew: async (request) => {
        order.push("renew sent");
        await renewalHeld.opened;
        const renewed = await inner.renew(request);
        order.push("renew answered");
        return renewed;
      },
      settle: (request) => {
        order.push("settle sent");
        return inner.settle(request);
      },
    };
    const clock = fakeClock();
    const toolHeld = gate();
    const tool = idempotent(
      async (_args: Sms) => {
        await toolHeld.opened;
        return "msg-1";
      },
      { name: "send_sms", store, clock, effect: "native-key", leaseMs: 3_000 },
    );
    const call = tool(sms, { key: "k" });
    await clock.advance(1_000);
    expect(order).toEqual(["renew sent"]);
    toolHeld.open();
    expect(await hasSettled(call)).toBe(false);
    expect(order).toEqual(["renew sent"]);
    renewalHeld.open();
    expect((await call).result).toBe("msg-1");
    expect(order).toEqual(["renew sent", "renew answered", "settle sent"]);
  });
});

describe("a worker cut off from the store while its tool runs", () => {
  it("is told to stop once its lease passed unrenewed, before a repeat could take the key over and run it", async () => {
    const inner = memoryStore();
    let cutOff = false;
    const store: IdempotencyStore = {
      ...inner,
      renew: (request) => (cutOff ? Promise.reject(new Error("connection reset")) : inner.renew(request)),
    };
    const clock = fakeClock();
    let sent = 0;
    const tool = idempotent(
      async (_args: Sms, context: ToolContext) => {
        // A long job: it sends only if its signal never aborted.
        await clock.sleep(10_000, context.signal);
        sent++;
        return "msg-1";
      },
      { name: "send_sms", store, clock, effect: "native-key", leaseMs: 3_000 },
    );
    const call = tool(sms, { key: "k" });
    await clock.advance(1_000);
    cutOff = true;
    await clock.advance(2_999);
    expect(await hasSettled(call)).toBe(false);
    await clock.advance(1);
    const error = await rejection(call);
    expect(error).toBeInstanceOf(LeaseLostError);
    expect((error as LeaseLostError).message).toContain("could not be reached to renew it");
    expect(sent).toBe(0);
    // Nobody took the key over: the worker released it (native-key), and a repeat runs the tool once.
    cutOff = false;
    const repeat = tool(sms, { key: "k" });
    await clock.advance(10_000);
    expect((await repeat).was_replay).toBe(false);
    expect(sent).toBe(1);
  });
});

// The store began the lease it answers with no earlier than the claim was sent: by the time an answer that
// took a whole lease arrives, another caller may have taken the key over and be running the tool.
describe("a claim or takeover answered late", () => {
  /** A memory store whose next claim (or takeover) is answered `lateMs` after it landed, on `clock`. */
  function slowStore(clock: ReturnType<typeof fakeClock>, lateMs: number, operation: "claim" | "takeover") {
    const inner = memoryStore();
    let slow = true;
    const late = async <T>(answer: Promise<T>): Promise<T> => {
      const result = await answer;
      if (slow) {
        slow = false;
        await clock.advance(lateMs);
      }
      return result;
    };
    const store: IdempotencyStore =
      operation === "claim"
        ? { ...inner, claim: (request) => late(inner.claim(request)) }
        : { ...inner, takeover: (request) => late(inner.takeover(request)) };
    return { inner, store };
  }

  it("a claim answered as long as its lease after it was sent: the tool does not run, the key is freed", async () => {
    const clock = fakeClock();
    const { inner, store } = slowStore(clock, LEASE_MS, "claim");
    const { tool, runs } = smsTool({ store, effect: "native-key", clock });
    const error = await rejection(tool(sms, { key: "k" }));
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as Error).message).toBe(
      `The idempotency store failed during claim: its answer came ${LEASE_MS} ms after it was sent, past the ` +
        `${LEASE_MS} ms lease. The tool did not run: by then another caller may have taken the key over. Retry the call.`,
    );
    expect(runs()).toBe(0);
    expect(await inner.get({ scope: "default", key: "k" }, clock.now())).toBeUndefined();
    const retry = await tool(sms, { key: "k" });
    expect(retry).toMatchObject({ result: "msg-1", was_replay: false });
    expect(runs()).toBe(1);
  });

  it("a claim answered a moment inside its lease runs the tool", async () => {
    const clock = fakeClock();
    const { store } = slowStore(clock, LEASE_MS - 1, "claim");
    const { tool, runs } = smsTool({ store, effect: "native-key", clock });
    expect(await tool(sms, { key: "k" })).toMatchObject({ result: "msg-1", was_replay: false });
    expect(runs()).toBe(1);
  });

  it("a takeover answered as long as its lease after it was sent: the tool does not run, the key is freed", async () => {
    const clock = fakeClock();
    const { inner, store } = slowStore(clock, LEASE_MS, "takeover");
    const { tool, runs } = smsTool({ store, effect: "native-key", clock });
    await crashedClaim(store, clock.now());
    await clock.advance(LEASE_MS);
    const error = await rejection(tool(sms, { key: "k" }));
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as Error).message).toMatch(/^The idempotency store failed during claim: its answer came/);
    expect(runs()).toBe(0);
    expect(await inner.get({ scope: "default", key: "k" }, clock.now())).toBeUndefined();
  });

  it("counts verify's lease from the takeover's sending: cut off from the store, verify is told to stop a lease after it", async () => {
    const clock = fakeClock();
    const inner = memoryStore();
    let sent: (() => void) | undefined;
    const takeoverSent = new Promise<void>((resolve) => {
      sent = resolve;
    });
    let answer: (() => void) | undefined;
    const answered = new Promise<void>((resolve) => {
      answer = resolve;
    });
    const store: IdempotencyStore = {
      ...inner,
      // The takeover lands at once, and its answer comes when the test says; every renewal fails.
      takeover: async (request) => {
        const taken = await inner.takeover(request);
        sent?.();
        await answered;
        return taken;
      },
      renew: () => Promise.reject(new Error("connection reset")),
    };
    let stoppedAt: number | undefined;
    const { tool, runs } = smsTool({
      store,
      effect: "irreversible",
      clock,
      verify: async (_record, context) => {
        await clock.sleep(10 * LEASE_MS, context.signal).catch((reason: unknown) => {
          stoppedAt = clock.now();
          throw reason;
        });
        return { status: "not_executed" };
      },
    });
    await crashedClaim(store, clock.now());
    await clock.advance(LEASE_MS);
    const sentAt = clock.now();
    const failed = rejection(tool(sms, { key: "k" }));
    await takeoverSent;
    // Two thirds of the lease pass before the answer comes.
    await clock.advance((LEASE_MS * 2) / 3);
    answer?.();
    await clock.advance(LEASE_MS / 3 - 1);
    expect(stoppedAt).toBeUndefined();
    await clock.advance(1);
    expect(stoppedAt).toBe(sentAt + LEASE_MS);
    // Cut off from the store, verify could not finish, and the tool did not run.
    expect((await failed) as Error).toBeInstanceOf(StoreUnavailableError);
    expect(runs()).toBe(0);
  });

  it("counts the lease from the claim's sending: cut off from the store, the tool is told to stop a lease after it", async () => {
    const clock = fakeClock();
    const inner = memoryStore();
    let claims = 0;
    const store: IdempotencyStore = {
      ...inner,
      // The claim's answer takes 2 s of the 3 s lease; every renewal fails.
      claim: async (request) => {
        const answer = await inner.claim(request);
        if (claims++ === 0) await clock.advance(2_000);
        return answer;
      },
      renew: () => Promise.reject(new Error("connection reset")),
    };
    const sentAt = clock.now();
    let stoppedAt: number | undefined;
    const tool = idempotent(
      async (_args: Sms, context: ToolContext) => {
        await clock.sleep(10_000, context.signal).catch((reason: unknown) => {
          stoppedAt = clock.now();
          throw reason;
        });
        return "msg-1";
      },
      { name: "send_sms", store, clock, effect: "native-key", leaseMs: 3_000 },
    );
    const failed = rejection(tool(sms, { key: "k" }));
    await clock.advance(999);
    expect(stoppedAt).toBeUndefined();
    await clock.advance(1);
    expect(stoppedAt).toBe(sentAt + 3_000);
    expect(await failed).toBeInstanceOf(LeaseLostError);
  });
});

// Review of e0fb42b: the verify path holds the key through renewals, then runs the tool under the same claim.
describe("a verify hook that answers after a whole lease, renewed meanwhile", () => {
  it("finds nothing done: the tool runs, counted from the renewal that proved the claim still held", async () => {
    const clock = fakeClock();
    const store = memoryStore();
    const { tool, runs } = smsTool({
      store,
      effect: "irreversible",
      clock,
      verify: async (_record, context) => {
        await clock.sleep(2 * LEASE_MS, context.signal);
        return { status: "not_executed" };
      },
    });
    await crashedClaim(store, clock.now());
    await clock.advance(LEASE_MS);
    const call = tool(sms, { key: "k" });
    await clock.advance(2 * LEASE_MS);
    expect(await call).toMatchObject({ result: "msg-1", was_replay: false });
    expect(runs()).toBe(1);
  });
});
