/**
 * OP-5 through `saga()`: intent, call, external id, compensation; and the saga's entry in the reconciler.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import {
  fingerprint,
  type IdempotencyStore,
  isIdempotencyError,
  memoryStore,
  ReplayedFailureError,
} from "../src/index.js";
import { reconcileOnce, startReconciler } from "../src/reconcile/index.js";
import { saga } from "../src/saga/index.js";
import { type FakeClock, fakeClock } from "../src/testing/index.js";

const root = join(import.meta.dirname, "..");

/** A bank with no idempotency: refunds by our reference, reversible. */
function bank() {
  const refunds = new Map<string, { id: string; cents: number; reversed: boolean }>();
  let calls = 0;
  return {
    refunds,
    get calls() {
      return calls;
    },
    refund(reference: string, cents: number) {
      calls++;
      const id = `re_${calls}`;
      refunds.set(reference, { id, cents, reversed: false });
      return id;
    },
  };
}

function refundSaga(store: IdempotencyStore, clock: FakeClock, b: ReturnType<typeof bank>) {
  return saga({
    name: "issue_refund",
    store,
    clock,
    leaseMs: 1_000,
    waitMs: 5_000,
    run: async (args: { orderId: string; cents: number }, { key }) => ({
      externalId: b.refund(key, args.cents),
      cents: args.cents,
    }),
    verify: (record) => {
      const found = b.refunds.get(record.key);
      if (!found) return { status: "not_executed" };
      if (found.cents > 10_000)
        return {
          status: "compensate",
          found: { externalId: found.id, cents: found.cents },
          reason: "over the limit",
        };
      return { status: "completed", result: { externalId: found.id, cents: found.cents } };
    },
    compensate: (_record, { step }) => {
      for (const refund of b.refunds.values()) if (refund.id === step?.externalId) refund.reversed = true;
      return { reversed: step?.externalId };
    },
  });
}

const order = { orderId: "o-1", cents: 500 };

async function crash(store: IdempotencyStore, clock: FakeClock, key: string, args: object) {
  await store.claim({
    scope: "default",
    key,
    tool: "issue_refund",
    fingerprint: fingerprint(args),
    token: "crashed",
    leaseMs: 1_000,
    ttlMs: 86_400_000,
    now: clock.now(),
  });
}

describe("saga", () => {
  it("stores the external id and returns it on every retry without calling again", async () => {
    const clock = fakeClock();
    const b = bank();
    const refund = refundSaga(memoryStore(), clock, b);
    const first = await refund(order, { key: "refund-o-1" });
    const again = await refund(order, { key: "refund-o-1" });
    expect(first.result.externalId).toBe("re_1");
    expect(again).toMatchObject({ was_replay: true, result: { externalId: "re_1", cents: 500 } });
    expect(b.calls).toBe(1);
  });

  it("waits for a call in flight instead of calling again", async () => {
    const clock = fakeClock();
    const b = bank();
    let finish: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const store = memoryStore();
    const slow = saga({
      name: "issue_refund",
      store,
      clock,
      run: async (args: typeof order, { key }) => {
        await gate;
        return { externalId: b.refund(key, args.cents) };
      },
    });
    const first = slow(order, { key: "k" });
    const second = slow(order, { key: "k" });
    await clock.advance(50);
    finish();
    const [a, c] = await Promise.all([first, second]);
    expect(c.result.externalId).toBe(a.result.externalId);
    expect(b.calls).toBe(1);
  });

  it("looks a stale attempt up downstream on retry: found means its id comes back, not a second refund", async () => {
    const clock = fakeClock();
    const b = bank();
    const store = memoryStore();
    await crash(store, clock, "refund-o-2", order);
    b.refund("refund-o-2", 500); // the crashed worker's refund did reach the bank
    await clock.advance(1_001);
    const refund = refundSaga(store, clock, b);
    const retry = await refund(order, { key: "refund-o-2" });
    expect(retry).toMatchObject({ was_replay: true, result: { externalId: "re_1" } });
    expect(b.calls).toBe(1);
  });

  it("fails closed on a stale attempt that must be compensated, and the reconciler compensates it", async () => {
    const clock = fakeClock();
    const b = bank();
    const store = memoryStore();
    const big = { orderId: "o-3", cents: 20_000 };
    await crash(store, clock, "refund-o-3", big);
    b.refund("refund-o-3", 20_000);
    await clock.advance(1_001);
    const refund = refundSaga(store, clock, b);
    const error = await refund(big, { key: "refund-o-3" }).catch((e: unknown) => e);
    expect(isIdempotencyError(error, "outcome_unknown")).toBe(true);

    const summary = await reconcileOnce({ store, clock, tools: { issue_refund: refund.reconciler } });
    expect(summary).toMatchObject({ examined: 1, compensated: 1 });
    expect(b.refunds.get("refund-o-3")?.reversed).toBe(true);
    const replay = await refund(big, { key: "refund-o-3" }).catch((e: unknown) => e);
    expect(replay).toBeInstanceOf(ReplayedFailureError);
    expect(replay).toMatchObject({ name: "CompensatedError", code: "compensated" });
    expect(b.calls).toBe(1);
  });

  it("compensates a completed saga explicitly when a duplicate is found after the fact", async () => {
    const clock = fakeClock();
    const b = bank();
    const refund = refundSaga(memoryStore(), clock, b);
    await refund(order, { key: "refund-o-4" });
    await expect(
      refund.compensate({ key: "refund-o-4" }, "the customer was refunded twice"),
    ).resolves.toEqual({
      reversed: "re_1",
    });
    expect(b.refunds.get("refund-o-4")?.reversed).toBe(true);
    // The record still replays the external id: the saga never calls the bank again for this key.
    expect((await refund(order, { key: "refund-o-4" })).was_replay).toBe(true);
    await expect(refund.compensate({ key: "nope" }, "x")).rejects.toMatchObject({
      code: "invalid_arguments",
    });
  });

  it("runs the reconciler on an interval until stopped", async () => {
    const clock = fakeClock();
    const b = bank();
    const store = memoryStore();
    const refund = refundSaga(store, clock, b);
    const summaries: number[] = [];
    const running = startReconciler({
      store,
      clock,
      intervalMs: 10_000,
      tools: { issue_refund: refund.reconciler },
      onSummary: (s) => summaries.push(s.examined),
    });
    await crash(store, clock, "refund-o-5", order);
    await clock.advance(10_000);
    await clock.advance(10_000);
    await running.stop();
    expect(summaries.slice(0, 1)).toEqual([0]);
    expect(summaries).toContain(1);
    expect(await store.get({ scope: "default", key: "refund-o-5" }, clock.now())).toBeUndefined();
  });

  it("runs examples/saga-refund.ts, which checks itself", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--import", "tsx", join(root, "examples/saga-refund.ts")],
      { cwd: root },
    );
    expect(stdout).toContain("saga-refund: ok");
  });
});
