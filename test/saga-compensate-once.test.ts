/**
 * `saga.compensate()` undoes a saga's effect at most once per saga record: a second click on "undo", an
 * agent's retry after a timeout or a second operator gets the first undo's outcome, never a second refund
 * reversal. On every store; Redis and PostgreSQL are the real servers on this machine (never skipped).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  definitiveFailure,
  type IdempotencyEvent,
  type IdempotencyStore,
  isIdempotencyError,
  memoryStore,
  notExecuted,
  ReplayedFailureError,
} from "../src/index.js";
import { postgresStore } from "../src/postgres/index.js";
import { type CompensateHook, reconcileOnce } from "../src/reconcile/index.js";
import { redisStore } from "../src/redis/index.js";
import { saga } from "../src/saga/index.js";
import { sqliteStore } from "../src/sqlite/index.js";
import { type FakeClock, fakeClock } from "../src/testing/index.js";
import { dropTable, freshTable, testPool } from "./fixtures/pg-helpers.js";
import { dropPrefix, freshPrefix, reachable, testClient } from "./fixtures/redis-helpers.js";

const dir = mkdtempSync(join(tmpdir(), "idempotool-saga-compensate-"));
const redis = testClient();
const redisReady = reachable(redis);
redisReady.catch(() => {});
const pool = testPool({ max: 4 });
const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  await Promise.allSettled(cleanups.map((cleanup) => cleanup()));
  redis.disconnect();
  await pool.end();
  rmSync(dir, { recursive: true, force: true });
});

let sqliteCount = 0;
const backends: { readonly name: string; create(): Promise<IdempotencyStore> }[] = [
  { name: "memory", create: async () => memoryStore() },
  {
    name: "sqlite",
    create: async () => {
      const store = sqliteStore({ path: join(dir, `records-${sqliteCount++}.db`) });
      store.migrate();
      cleanups.push(() => store.close());
      return store;
    },
  },
  {
    name: "redis",
    create: async () => {
      await redisReady;
      const prefix = freshPrefix("saga-compensate");
      cleanups.push(() => dropPrefix(redis, prefix));
      return redisStore({ client: redis, prefix, clock: "request" });
    },
  },
  {
    name: "postgres",
    create: async () => {
      const table = freshTable();
      cleanups.push(() => dropTable(pool, table));
      const store = postgresStore({ client: pool, table, clock: "request" });
      await store.migrate();
      return store;
    },
  },
];

interface Step {
  readonly externalId: string;
}

/** A refund saga whose bank counts every reversal, with the undo under test. */
function refundSaga(
  store: IdempotencyStore,
  clock: FakeClock,
  undo: CompensateHook<Step>,
  options: { waitMs?: number; ttlMs?: number } = {},
) {
  const reversals: { externalId: string | undefined; reason: string }[] = [];
  const waiting: ((event: IdempotencyEvent) => void)[] = [];
  let refunds = 0;
  const refund = saga({
    name: "issue_refund",
    store,
    clock,
    ...options,
    run: async (args: { orderId: string }) => ({ externalId: `re_${args.orderId}_${++refunds}` }),
    compensate: async (record, context) => {
      reversals.push({ externalId: context.step?.externalId, reason: context.reason });
      return undo(record, context);
    },
    onEvent: (event) => {
      for (const wake of waiting) wake(event);
    },
  });
  /** Resolves at the next event of this type. */
  const next = (type: IdempotencyEvent["type"]) =>
    new Promise<void>((resolve) => {
      waiting.push((event) => {
        if (event.type === type) resolve();
      });
    });
  return { refund, reversals, next };
}

const reversed: CompensateHook<Step> = (_record, { step }) => ({ reversed: step?.externalId });

/** An undo whose first run holds until `open()`; `entered` resolves once it started. Later runs do not wait. */
function gatedUndo() {
  let open: () => void = () => {};
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  let enter: () => void = () => {};
  const entered = new Promise<void>((resolve) => {
    enter = resolve;
  });
  let runs = 0;
  const hook: CompensateHook<Step> = async (record, context) => {
    if (runs++ === 0) {
      enter();
      await gate;
    }
    return reversed(record, context);
  };
  return { hook, entered, open: () => open() };
}

for (const backend of backends) {
  describe(`saga.compensate() over ${backend.name}`, () => {
    it("undoes once: a second compensate() replays what the first returned, whatever its reason", async () => {
      const clock = fakeClock();
      const { refund, reversals } = refundSaga(await backend.create(), clock, reversed);
      await refund({ orderId: "o-1" }, { key: "refund-o-1" });
      const first = await refund.compensate({ key: "refund-o-1" }, "refunded twice");
      await clock.advance(1_000);
      const again = await refund.compensate({ key: "refund-o-1" }, "clicked undo again");
      expect(first).toEqual({ reversed: "re_o-1_1" });
      expect(again).toEqual(first);
      expect(reversals).toEqual([{ externalId: "re_o-1_1", reason: "refunded twice" }]);
      // The saga itself still replays its external id.
      expect((await refund({ orderId: "o-1" }, { key: "refund-o-1" })).was_replay).toBe(true);
    });

    it("undoes once when two compensate() calls race: the second waits for the first and gets its result", async () => {
      const clock = fakeClock();
      const slow = gatedUndo();
      const { refund, reversals, next } = refundSaga(await backend.create(), clock, slow.hook);
      await refund({ orderId: "o-2" }, { key: "refund-o-2" });
      const secondWaits = next("in_flight_wait");
      const first = refund.compensate({ key: "refund-o-2" }, "operator A");
      const second = refund.compensate({ key: "refund-o-2" }, "operator B");
      await Promise.race([secondWaits, second.catch(() => {})]);
      slow.open();
      const [a, b] = await Promise.all([first, second]);
      expect(a).toEqual({ reversed: "re_o-2_1" });
      expect(b).toEqual(a);
      expect(reversals).toHaveLength(1);
    });

    it("tells a racing compensate() that may not wait that the undo is in use, and never runs it twice", async () => {
      const clock = fakeClock();
      const slow = gatedUndo();
      const { refund, reversals } = refundSaga(await backend.create(), clock, slow.hook, { waitMs: 0 });
      await refund({ orderId: "o-3" }, { key: "refund-o-3" });
      const first = refund.compensate({ key: "refund-o-3" }, "operator A");
      await slow.entered;
      const error = await refund.compensate({ key: "refund-o-3" }, "operator B").catch((e: unknown) => e);
      expect(isIdempotencyError(error, "idempotency_key_in_use")).toBe(true);
      slow.open();
      await expect(first).resolves.toEqual({ reversed: "re_o-3_1" });
      expect(reversals).toHaveLength(1);
    });

    it("fails closed after an undo that threw: repeats get outcome_unknown and the hook never runs again", async () => {
      const clock = fakeClock();
      const { refund, reversals } = refundSaga(await backend.create(), clock, () => {
        throw new Error("socket hang up");
      });
      await refund({ orderId: "o-4" }, { key: "refund-o-4" });
      const first = await refund.compensate({ key: "refund-o-4" }, "refunded twice").catch((e: unknown) => e);
      expect(isIdempotencyError(first, "outcome_unknown")).toBe(true);
      expect((first as Error).cause).toMatchObject({ message: "socket hang up" });
      await clock.advance(120_000); // well past the undo's lease
      const again = await refund.compensate({ key: "refund-o-4" }, "retry").catch((e: unknown) => e);
      expect(isIdempotencyError(again, "outcome_unknown")).toBe(true);
      expect(reversals).toHaveLength(1);
    });

    it("runs the undo again after it threw notExecuted, and replays once it succeeded", async () => {
      const clock = fakeClock();
      let bankDown = true;
      const { refund, reversals } = refundSaga(await backend.create(), clock, (r, c) => {
        if (bankDown) throw notExecuted(new Error("bank unreachable: nothing was reversed"));
        return reversed(r, c);
      });
      await refund({ orderId: "o-5" }, { key: "refund-o-5" });
      await expect(refund.compensate({ key: "refund-o-5" }, "first try")).rejects.toThrow("bank unreachable");
      bankDown = false;
      await expect(refund.compensate({ key: "refund-o-5" }, "second try")).resolves.toEqual({
        reversed: "re_o-5_1",
      });
      await expect(refund.compensate({ key: "refund-o-5" }, "third try")).resolves.toEqual({
        reversed: "re_o-5_1",
      });
      expect(reversals.map((r) => r.reason)).toEqual(["first try", "second try"]);
    });

    it("replays an undo that failed definitively instead of trying again", async () => {
      const clock = fakeClock();
      const { refund, reversals } = refundSaga(await backend.create(), clock, () => {
        throw definitiveFailure(new Error("the refund was already paid out"));
      });
      await refund({ orderId: "o-6" }, { key: "refund-o-6" });
      await expect(refund.compensate({ key: "refund-o-6" }, "first")).rejects.toThrow("already paid out");
      const again = await refund.compensate({ key: "refund-o-6" }, "again").catch((e: unknown) => e);
      expect(again).toBeInstanceOf(ReplayedFailureError);
      expect((again as Error).message).toContain("already paid out");
      expect(reversals).toHaveLength(1);
    });
  });
}

describe("saga.compensate() and its own key space", () => {
  it("gives a saga key reused after its record expired an undo of its own", async () => {
    const clock = fakeClock();
    const { refund, reversals } = refundSaga(memoryStore(), clock, reversed, { ttlMs: 3_600_000 });
    await refund({ orderId: "o-7" }, { key: "refund-o-7" });
    await clock.advance(60_000);
    await refund.compensate({ key: "refund-o-7" }, "first refund undone");
    await clock.advance(3_540_001); // the saga record is gone; its undo's record, a minute younger, is not
    await refund({ orderId: "o-7" }, { key: "refund-o-7" });
    await expect(refund.compensate({ key: "refund-o-7" }, "second refund undone")).resolves.toEqual({
      reversed: "re_o-7_2",
    });
    expect(reversals.map((r) => r.externalId)).toEqual(["re_o-7_1", "re_o-7_2"]);
  });

  it("refuses a caller's key in the compensations' key space", async () => {
    const clock = fakeClock();
    const store = memoryStore();
    const { refund } = refundSaga(store, clock, reversed);
    await refund({ orderId: "o-8" }, { key: "refund-o-8" });
    await refund.compensate({ key: "refund-o-8" }, "undo");
    const { records } = await store.list({ tool: "issue_refund:compensate" });
    expect(records).toHaveLength(1);
    const undoKey = records[0]?.key ?? "";
    expect(undoKey).toMatch(/^~compensation~[0-9a-f]{64}$/);
    const error = await refund({ orderId: "o-8" }, { key: undoKey }).catch((e: unknown) => e);
    expect(isIdempotencyError(error, "idempotency_key_invalid")).toBe(true);
    expect((error as Error).message).toContain('starting with "~compensation~" are reserved');
  });

  it("leaves an undo of unknown outcome to an operator: the reconciler flags it and never runs it", async () => {
    const clock = fakeClock();
    const store = memoryStore();
    const { refund, reversals } = refundSaga(store, clock, () => {
      throw new Error("socket hang up");
    });
    await refund({ orderId: "o-9" }, { key: "refund-o-9" });
    await refund.compensate({ key: "refund-o-9" }, "undo").catch(() => {});
    const summary = await reconcileOnce({ store, clock, tools: { issue_refund: refund.reconciler } });
    expect(summary).toMatchObject({ examined: 1, needsReview: 1, compensated: 0 });
    expect(summary.decisions[0]?.tool).toBe("issue_refund:compensate");
    expect(reversals).toHaveLength(1);
  });
});
