/**
 * OP-5, offline, on SQLite: a refund API with no idempotency of its own, made safe with `saga()`.
 * A worker crashes after the bank refunded but before the external id was stored; the reconciler
 * looks the refund up by our reference and records it, so the retry hands back the same refund id.
 * Run: node --import tsx examples/saga-refund.ts
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fingerprint } from "idempotool";
import { reconcileOnce } from "idempotool/reconcile";
import { saga } from "idempotool/saga";
import { sqliteStore } from "idempotool/sqlite";

const dir = mkdtempSync(join(tmpdir(), "saga-refund-"));
const store = sqliteStore({ path: join(dir, "records.db") });
store.migrate();

// The bank: refunds are found by the reference we send, and can be reversed.
const bank = new Map<string, { id: string; cents: number; reversed: boolean }>();
let bankCalls = 0;
let bankReversals = 0;

const refund = saga({
  name: "issue_refund",
  store,
  leaseMs: 200,
  run: async (args: { orderId: string; cents: number }, { key }) => {
    bankCalls++;
    const id = `re_${bankCalls}`;
    bank.set(key, { id, cents: args.cents, reversed: false });
    return { externalId: id, cents: args.cents };
  },
  // Read-only: ask the bank whether a refund with our reference exists.
  verify: (record) => {
    const found = bank.get(record.key);
    return found
      ? { status: "completed", result: { externalId: found.id, cents: found.cents } }
      : { status: "not_executed" };
  },
  compensate: (_record, { step }) => {
    bankReversals++;
    for (const r of bank.values()) if (r.id === step?.externalId) r.reversed = true;
    return { reversed: step?.externalId };
  },
});

try {
  // 1. A normal call, then a retry: one bank call, the same external id.
  const first = await refund({ orderId: "o-1", cents: 500 }, { key: "refund-o-1" });
  const again = await refund({ orderId: "o-1", cents: 500 }, { key: "refund-o-1" });
  assert.equal(again.was_replay, true);
  assert.equal(again.result.externalId, first.result.externalId);
  assert.equal(bankCalls, 1);

  // 2. A crash: the intent was claimed and the bank refunded, but the worker died before settling.
  const args = { orderId: "o-2", cents: 700 };
  await store.claim({
    scope: "default",
    key: "refund-o-2",
    tool: "issue_refund",
    fingerprint: fingerprint(args),
    token: "worker-that-died",
    leaseMs: 200,
    ttlMs: 86_400_000,
    now: Date.now(),
  });
  bank.set("refund-o-2", { id: "re_crashed", cents: 700, reversed: false });
  await new Promise((resolve) => setTimeout(resolve, 250)); // the dead worker's lease passes

  // 3. The reconciler finds the stale intent, asks the bank, and records the refund it finds.
  const summary = await reconcileOnce({ store, tools: { issue_refund: refund.reconciler } });
  assert.equal(summary.completed, 1);

  // 4. The retry replays the recorded refund: the bank is not called again.
  const retry = await refund(args, { key: "refund-o-2" });
  assert.equal(retry.was_replay, true);
  assert.equal(retry.result.externalId, "re_crashed");
  assert.equal(bankCalls, 1);

  // 5. A duplicate found after the fact is undone explicitly, once: a second click replays the first undo.
  const undone = await refund.compensate({ key: "refund-o-1" }, "refunded twice by the support desk");
  const undoneAgain = await refund.compensate({ key: "refund-o-1" }, "clicked undo again");
  assert.equal(bank.get("refund-o-1")?.reversed, true);
  assert.deepEqual(undoneAgain, undone);
  assert.equal(bankReversals, 1);

  console.log("saga-refund: ok (1 bank call, 1 crash reconciled, 1 compensation)");
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
