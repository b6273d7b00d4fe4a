// Repeats in one process join the claim of the call already on its way instead of sending their own, and
// wake on its settle; whatever that call's claim or settle meets, each repeat still gets what the store says.
import { describe, expect, it } from "vitest";
import { gate, rejection } from "../../test/fixtures/tools.js";
import { fakeClock } from "../testing/fake-clock.js";
import { isIdempotencyError, KeyConflictError, StoreUnavailableError } from "./errors.js";
import { fingerprint } from "./fingerprint.js";
import { idempotent } from "./idempotent.js";
import { flightCount } from "./in-flight.js";
import { memoryStore } from "./memory-store.js";
import type { ClaimRequest, IdempotencyStore } from "./store.js";

/** A memory store that counts the claims it answers, and can hold or fail the next ones. */
function countingStore() {
  const inner = memoryStore();
  const counts = { claims: 0, settles: 0 };
  let holdClaims: Promise<void> | undefined;
  let failClaims = 0;
  let failSettles = 0;
  const store: IdempotencyStore = {
    ...inner,
    claim: async (request: ClaimRequest) => {
      counts.claims++;
      if (holdClaims) await holdClaims;
      if (failClaims > 0) {
        failClaims--;
        throw new Error("ECONNRESET");
      }
      return inner.claim(request);
    },
    settle: async (request) => {
      counts.settles++;
      if (failSettles > 0) {
        failSettles--;
        throw new Error("ECONNRESET");
      }
      return inner.settle(request);
    },
  };
  return {
    store,
    inner,
    counts,
    holdClaimsUntil: (p: Promise<void> | undefined) => {
      holdClaims = p;
    },
    failNextClaims: (n: number) => {
      failClaims = n;
    },
    failNextSettles: (n: number) => {
      failSettles = n;
    },
  };
}

describe("repeats in one process join the claim on its way", () => {
  it("sends one claim for a crowd on one key, and the waiters take the outcome from the settle, not by polling", async () => {
    const { store, counts } = countingStore();
    const clock = fakeClock();
    const hold = gate();
    let runs = 0;
    const tool = idempotent(
      async (args: { to: string }) => {
        runs++;
        await hold.opened;
        return `sent-${args.to}`;
      },
      { name: "send", store, clock },
    );
    const crowd = Array.from({ length: 8 }, () => tool({ to: "a" }, { key: "k" }));
    await clock.advance(0);
    expect(counts.claims).toBe(1);
    // Time passes while the tool runs: nobody polls the store.
    await clock.advance(5_000);
    expect(counts.claims).toBe(1);
    hold.open();
    const envelopes = await Promise.all(crowd);
    expect(runs).toBe(1);
    expect(envelopes.filter((e) => !e.was_replay)).toHaveLength(1);
    expect(envelopes.every((e) => e.result === "sent-a")).toBe(true);
    // The waiters were waiting when the owner settled: they take the record its settle stored, and
    // never read the store at all.
    expect(counts.claims).toBe(1);
    expect(flightCount(store)).toBe(0);
  });

  it("the waiters take the outcome of a quick tool whose call began to settle before they resumed", async () => {
    const { store, counts, holdClaimsUntil } = countingStore();
    const hold = gate();
    holdClaimsUntil(hold.opened);
    let runs = 0;
    // Returns at once: its call reaches its settle in fewer steps than the repeats take to resume from the
    // claim they joined.
    const tool = idempotent(
      async () => {
        runs++;
        return "sent";
      },
      { name: "send", store },
    );
    const crowd = Array.from({ length: 8 }, () => tool({}, { key: "k" }));
    await new Promise((resolve) => setImmediate(resolve));
    holdClaimsUntil(undefined);
    hold.open();
    const envelopes = await Promise.all(crowd);
    expect(runs).toBe(1);
    expect(envelopes.filter((e) => e.was_replay)).toHaveLength(7);
    // They joined the claim before its call could settle: its outcome is theirs, with no claim of their own.
    expect(counts).toMatchObject({ claims: 1, settles: 1 });
    expect(flightCount(store)).toBe(0);
  });

  it("joins the claim of its own scope when the same key is on its way in another scope too", async () => {
    const { store, counts } = countingStore();
    const clock = fakeClock();
    const hold = gate();
    const runs: string[] = [];
    const tool = idempotent(
      async (args: { to: string }, context) => {
        runs.push(args.to);
        await hold.opened;
        return `sent-${args.to}-${context.key}`;
      },
      { name: "send", store, clock },
    );
    // Interleaved: each scope's repeats arrive while both claims are on their way.
    const calls = ["t1", "t2", "t1", "t2", "t2", "t1"].map((scope) =>
      tool({ to: scope }, { key: "k", scope }).then((e) => [scope, e.result, e.was_replay]),
    );
    await clock.advance(0);
    expect(counts.claims).toBe(2);
    expect(flightCount(store)).toBe(2);
    hold.open();
    const answers = await Promise.all(calls);
    expect(runs.sort()).toEqual(["t1", "t2"]);
    expect(answers.filter(([, , replay]) => replay === false)).toHaveLength(2);
    for (const [scope, result] of answers) expect(result).toBe(`sent-${scope}-k`);
    expect(counts.claims).toBe(2);
    expect(flightCount(store)).toBe(0);
  });

  it("refuses a repeat with other arguments at once, without waiting for the call it joined", async () => {
    const { store } = countingStore();
    const clock = fakeClock();
    const hold = gate();
    const tool = idempotent(
      async (args: { to: string }) => {
        await hold.opened;
        return args.to;
      },
      { name: "send", store, clock },
    );
    const first = tool({ to: "a" }, { key: "k" });
    const other = rejection(tool({ to: "b" }, { key: "k" }));
    await clock.advance(0);
    expect(await other).toBeInstanceOf(KeyConflictError);
    hold.open();
    expect((await first).result).toBe("a");
  });

  it("claims for itself when the claim it joined failed, and runs the tool once", async () => {
    const { store, counts, failNextClaims } = countingStore();
    const clock = fakeClock();
    let runs = 0;
    const tool = idempotent(
      async () => {
        runs++;
        return "ok";
      },
      { name: "send", store, clock },
    );
    failNextClaims(1);
    const [first, second] = await Promise.allSettled([tool({}, { key: "k" }), tool({}, { key: "k" })]);
    expect(first.status === "rejected" && first.reason instanceof StoreUnavailableError).toBe(true);
    expect(second).toMatchObject({ status: "fulfilled", value: { result: "ok", was_replay: false } });
    expect(runs).toBe(1);
    expect(counts.claims).toBe(2);
    expect(flightCount(store)).toBe(0);
  });

  it("claims for itself, and polls, when the claim it joined found the key held by another worker", async () => {
    const { store, inner, counts } = countingStore();
    const clock = fakeClock();
    let runs = 0;
    const tool = idempotent(
      async () => {
        runs++;
        return "mine";
      },
      { name: "send", store, clock },
    );
    // Another process holds the key.
    const elsewhere = await inner.claim({
      scope: "default",
      key: "k",
      tool: "send",
      fingerprint: fingerprint({}),
      token: "other-process",
      leaseMs: 60_000,
      ttlMs: 86_400_000,
      now: clock.now(),
    });
    const crowd = [tool({}, { key: "k" }), tool({}, { key: "k" })];
    await clock.advance(0);
    expect(counts.claims).toBe(2);
    await inner.settle({
      scope: "default",
      key: "k",
      token: elsewhere.record.token,
      status: "completed",
      result: JSON.stringify("theirs"),
      error: null,
      ttlMs: 86_400_000,
      now: clock.now(),
    });
    await clock.advance(1_000);
    const envelopes = await Promise.all(crowd);
    expect(envelopes.map((e) => [e.result, e.was_replay])).toEqual([
      ["theirs", true],
      ["theirs", true],
    ]);
    expect(runs).toBe(0);
  });

  it("wakes its waiters when the settle fails, and they answer by the record the store holds", async () => {
    const { store, failNextSettles } = countingStore();
    const clock = fakeClock();
    let runs = 0;
    const tool = idempotent(
      async () => {
        runs++;
        return "ok";
      },
      { name: "send", store, clock, waitMs: 1_000 },
    );
    failNextSettles(3);
    const owner = tool({}, { key: "k" });
    const waiter = rejection(tool({}, { key: "k" }));
    for (let i = 0; i < 20; i++) await clock.advance(100);
    // The owner's effect happened: it gets its result though the store kept no outcome.
    expect(await owner).toMatchObject({ result: "ok", was_replay: false });
    // The record is still in progress under a live lease: the waiter gives up, it never runs the tool.
    expect(isIdempotencyError(await waiter, "idempotency_key_in_use")).toBe(true);
    expect(runs).toBe(1);
    expect(flightCount(store)).toBe(0);
  });

  it("does not join a claim already answered: a later repeat judges the lease by its own claim", async () => {
    const { store, counts } = countingStore();
    const clock = fakeClock();
    const hold = gate();
    const tool = idempotent(
      async () => {
        await hold.opened;
        return "late";
      },
      { name: "send", store, clock, leaseMs: 1_000, waitMs: 0 },
    );
    const first = tool({}, { key: "k" });
    await clock.advance(0);
    expect(counts.claims).toBe(1);
    const second = rejection(tool({}, { key: "k" }));
    await clock.advance(0);
    expect(counts.claims).toBe(2);
    expect(isIdempotencyError(await second, "idempotency_key_in_use")).toBe(true);
    hold.open();
    await first;
  });
});
