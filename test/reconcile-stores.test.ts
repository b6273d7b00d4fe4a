/**
 * The reconciler over every store: a crash leaves a stale claim, the reconciler asks the tool's hook and
 * settles, releases or flags it, and the next call behaves accordingly. Redis and PostgreSQL are the real
 * servers on this machine; without them these cases fail, never skip.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  fingerprint,
  type IdempotencyStore,
  idempotent,
  isIdempotencyError,
  memoryStore,
} from "../src/index.js";
import { postgresStore } from "../src/postgres/index.js";
import { type ReconcileDecision, reconcileOnce } from "../src/reconcile/index.js";
import { redisStore } from "../src/redis/index.js";
import { sqliteStore } from "../src/sqlite/index.js";
import { type FakeClock, fakeClock } from "../src/testing/index.js";
import { dropTable, freshTable, testPool } from "./fixtures/pg-helpers.js";
import { dropPrefix, freshPrefix, reachable, testClient } from "./fixtures/redis-helpers.js";

const dir = mkdtempSync(join(tmpdir(), "idempotool-reconcile-"));
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

interface Backend {
  readonly name: string;
  create(): Promise<IdempotencyStore>;
}

let sqliteCount = 0;
const backends: Backend[] = [
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
      const prefix = freshPrefix("reconcile");
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

const args = { to: "alice@example.com", subject: "Refund issued" };
const leaseMs = 1_000;

/** A worker that claimed the key, may have sent the email, and died before recording it. */
async function crashedClaim(store: IdempotencyStore, clock: FakeClock, key: string, tool = "send_email") {
  const claim = await store.claim({
    scope: "default",
    key,
    tool,
    fingerprint: fingerprint(args),
    token: `crashed-${key}`,
    leaseMs,
    ttlMs: 86_400_000,
    now: clock.now(),
  });
  expect(claim.claimed).toBe(true);
}

function sendEmail(store: IdempotencyStore, clock: FakeClock) {
  const sent: string[] = [];
  const tool = idempotent(
    async (_args: typeof args, { key }) => {
      sent.push(key);
      return { messageId: `m-${key}` };
    },
    { name: "send_email", store, clock, leaseMs },
  );
  return { tool, sent };
}

for (const backend of backends) {
  describe(`reconcile over ${backend.name}`, () => {
    it("settles a stale claim the hook found completed, and the next call replays it", async () => {
      const store = await backend.create();
      const clock = fakeClock();
      await crashedClaim(store, clock, "k-done");
      await clock.advance(leaseMs + 1);
      const decisions: ReconcileDecision[] = [];
      const summary = await reconcileOnce({
        store,
        clock,
        tools: {
          send_email: {
            verify: (record) => ({ status: "completed", result: { messageId: `m-${record.key}` } }),
          },
        },
        onDecision: (d) => decisions.push(d),
      });
      expect(summary).toMatchObject({ examined: 1, completed: 1, skipped: 0, errors: 0, dryRun: false });
      expect(decisions.map((d) => [d.key, d.decision])).toEqual([["k-done", "completed"]]);

      const { tool, sent } = sendEmail(store, clock);
      const again = await tool(args, { key: "k-done" });
      expect(again.was_replay).toBe(true);
      expect(again.result).toEqual({ messageId: "m-k-done" });
      expect(sent).toEqual([]);
    });

    it("releases a stale claim the hook found not executed, and the next call runs", async () => {
      const store = await backend.create();
      const clock = fakeClock();
      await crashedClaim(store, clock, "k-none");
      await clock.advance(leaseMs + 1);
      const summary = await reconcileOnce({
        store,
        clock,
        tools: { send_email: { verify: () => ({ status: "not_executed" }) } },
      });
      expect(summary).toMatchObject({ examined: 1, released: 1 });
      expect(await store.get({ scope: "default", key: "k-none" }, clock.now())).toBeUndefined();

      const { tool, sent } = sendEmail(store, clock);
      const next = await tool(args, { key: "k-none" });
      expect(next.was_replay).toBe(false);
      expect(sent).toEqual(["k-none"]);
    });

    it("flags a record the hook cannot tell about for review, and callers keep failing closed", async () => {
      const store = await backend.create();
      const clock = fakeClock();
      await crashedClaim(store, clock, "k-unsure");
      await clock.advance(leaseMs + 1);
      const summary = await reconcileOnce({
        store,
        clock,
        tools: { send_email: { verify: () => ({ status: "unknown", reason: "the provider is down" }) } },
      });
      expect(summary).toMatchObject({ examined: 1, needsReview: 1 });
      expect(summary.decisions[0]?.reason).toContain("the provider is down");
      const record = await store.get({ scope: "default", key: "k-unsure" }, clock.now());
      expect(record?.status).toBe("unknown");

      const { tool, sent } = sendEmail(store, clock);
      const error = await tool(args, { key: "k-unsure" }).catch((e: unknown) => e);
      expect(isIdempotencyError(error, "outcome_unknown")).toBe(true);
      expect(sent).toEqual([]);
    });

    it("never lets two concurrent reconcilers both act on one record", async () => {
      const store = await backend.create();
      const clock = fakeClock();
      for (const key of ["c-1", "c-2", "c-3"]) await crashedClaim(store, clock, key);
      await clock.advance(leaseMs + 1);
      const asked: string[] = [];
      const tools = {
        send_email: {
          verify: async (record: { key: string }) => {
            asked.push(record.key);
            await new Promise((resolve) => setTimeout(resolve, 20));
            return { status: "completed" as const, result: { messageId: `m-${record.key}` } };
          },
        },
      };
      const [a, b] = await Promise.all([
        reconcileOnce({ store, clock, tools, leaseMs: 60_000 }),
        reconcileOnce({ store, clock, tools, leaseMs: 60_000 }),
      ]);
      expect(a.completed + b.completed).toBe(3);
      expect(a.skipped + b.skipped).toBe(a.examined + b.examined - 3);
      expect([...asked].sort()).toEqual(["c-1", "c-2", "c-3"]);
    });

    it("changes nothing in a dry run, yet reports what it would do", async () => {
      const store = await backend.create();
      const clock = fakeClock();
      await crashedClaim(store, clock, "k-dry");
      await clock.advance(leaseMs + 1);
      const before = await store.get({ scope: "default", key: "k-dry" }, clock.now());
      const summary = await reconcileOnce({
        store,
        clock,
        dryRun: true,
        tools: { send_email: { verify: () => ({ status: "completed", result: { messageId: "m" } }) } },
      });
      expect(summary).toMatchObject({ dryRun: true, examined: 1, completed: 1 });
      expect(summary.decisions[0]?.reason).toContain("would");
      expect(await store.get({ scope: "default", key: "k-dry" }, clock.now())).toEqual(before);
    });

    it("leaves records of tools without a hook untouched and flags them; live leases are not examined", async () => {
      const store = await backend.create();
      const clock = fakeClock();
      await crashedClaim(store, clock, "k-other", "charge_card");
      await clock.advance(leaseMs + 1);
      await crashedClaim(store, clock, "k-live");
      const before = await store.get({ scope: "default", key: "k-other" }, clock.now());
      const summary = await reconcileOnce({
        store,
        clock,
        tools: { send_email: { verify: () => ({ status: "not_executed" }) } },
      });
      expect(summary).toMatchObject({ examined: 1, needsReview: 1, released: 0 });
      expect(summary.decisions[0]?.reason).toContain("no hook for tool charge_card");
      expect(await store.get({ scope: "default", key: "k-other" }, clock.now())).toEqual(before);
      expect((await store.get({ scope: "default", key: "k-live" }, clock.now()))?.status).toBe("in_progress");
    });
  });
}

describe("reconcile and a server clock", () => {
  it("cannot take over a lease the server's clock says is live, even when its own clock runs ahead", async () => {
    const table = freshTable();
    cleanups.push(() => dropTable(pool, table));
    const store = postgresStore({ client: pool, table });
    await store.migrate();
    const serverTime = Date.now();
    const clock = fakeClock(serverTime);
    await crashedClaim(store, clock, "k-skew");
    // The reconciler's clock is an hour ahead of PostgreSQL's: by its own reckoning the lease has passed.
    const ahead = fakeClock(serverTime + 3_600_000);
    let asked = 0;
    const summary = await reconcileOnce({
      store,
      clock: ahead,
      tools: {
        send_email: {
          verify: () => {
            asked++;
            return { status: "not_executed" };
          },
        },
      },
    });
    expect(summary).toMatchObject({ examined: 1, skipped: 1, released: 0 });
    expect(asked).toBe(0);
    expect((await store.get({ scope: "default", key: "k-skew" }, Date.now()))?.status).toBe("in_progress");
  });
});
