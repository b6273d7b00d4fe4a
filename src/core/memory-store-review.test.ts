import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { StoreFullError } from "./errors.js";
import { memoryStore } from "./memory-store.js";
import type { IdempotencyRecord, IdempotencyStore } from "./store.js";

// The memory store against a model: a Map of records, with the record formulas of the store contract.
// Clocks move backward as well as forward, and every op brings its own lease and ttl, so a settle, renewal
// or takeover can bring a record's expiry earlier than the claim's, or leave it later.

type Op =
  | { kind: "claim"; scope: number; key: number; now: number; leaseMs: number; ttlMs: number }
  | { kind: "settle"; scope: number; key: number; now: number; ttlMs: number; own: boolean; status: number }
  | { kind: "renew"; scope: number; key: number; now: number; leaseMs: number; ttlMs: number; own: boolean }
  | {
      kind: "takeover";
      scope: number;
      key: number;
      now: number;
      leaseMs: number;
      ttlMs: number;
      own: boolean;
    }
  | { kind: "release"; scope: number; key: number; own: boolean }
  | { kind: "delete"; scope: number; key: number }
  | { kind: "get"; scope: number; key: number; now: number }
  | { kind: "purge"; now: number; limit: number }
  | { kind: "churn"; now: number; ttlMs: number; count: number };

const statuses = ["completed", "failed", "unknown"] as const;

function id(scope: number, key: number) {
  return { scope: `s${scope}`, key: `k${key}` };
}

function text(scope: string, key: string) {
  return JSON.stringify([scope, key]);
}

function rec(base: IdempotencyRecord, patch: Partial<IdempotencyRecord>): IdempotencyRecord {
  return { ...base, ...patch };
}

async function listAll(store: IdempotencyStore): Promise<IdempotencyRecord[]> {
  const out: IdempotencyRecord[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await store.list({ limit: 1000, ...(cursor === undefined ? {} : { cursor }) });
    out.push(...page.records);
    if (page.nextCursor === undefined) return out;
    cursor = page.nextCursor;
  }
}

function sorted(records: Iterable<IdempotencyRecord>): IdempotencyRecord[] {
  return [...records].sort((a, b) => (text(a.scope, a.key) < text(b.scope, b.key) ? -1 : 1));
}

async function run(ops: readonly Op[], maxRecords: number): Promise<void> {
  const store = memoryStore({ maxRecords });
  const model = new Map<string, IdempotencyRecord>();
  let tokens = 0;

  const expiredAt = (now: number) => [...model.values()].filter((r) => r.expiresAt <= now);

  for (const [step, op] of ops.entries()) {
    const where = `step ${step}: ${JSON.stringify(op)}`;
    switch (op.kind) {
      case "claim": {
        const { scope, key } = id(op.scope, op.key);
        const token = `t${++tokens}`;
        const request = {
          scope,
          key,
          tool: "tool",
          fingerprint: "f",
          token,
          leaseMs: op.leaseMs,
          ttlMs: op.ttlMs,
          now: op.now,
        };
        const existing = model.get(text(scope, key));
        let expected: { claimed: boolean; record: IdempotencyRecord } | "full";
        if (existing !== undefined && existing.expiresAt > op.now) {
          expected = { claimed: false, record: existing };
        } else {
          if (existing === undefined && model.size >= maxRecords) {
            for (const r of expiredAt(op.now)) model.delete(text(r.scope, r.key));
          }
          if (existing === undefined && model.size >= maxRecords) expected = "full";
          else {
            const leaseExpiresAt = op.now + op.leaseMs;
            const record: IdempotencyRecord = {
              scope,
              key,
              tool: "tool",
              fingerprint: "f",
              status: "in_progress",
              token,
              createdAt: op.now,
              updatedAt: op.now,
              leaseExpiresAt,
              expiresAt: leaseExpiresAt + op.ttlMs,
              attempts: 1,
              result: null,
              error: null,
            };
            model.set(text(scope, key), record);
            expected = { claimed: true, record };
          }
        }
        if (expected === "full") {
          await expect(store.claim(request), where).rejects.toBeInstanceOf(StoreFullError);
        } else {
          const got = await store.claim(request);
          expect({ claimed: got.claimed, record: got.record }, where).toEqual(expected);
        }
        break;
      }
      case "settle": {
        const { scope, key } = id(op.scope, op.key);
        const r = model.get(text(scope, key));
        const token = op.own && r !== undefined ? r.token : "nobody";
        let expected: IdempotencyRecord | null = null;
        if (r !== undefined && r.token === token && (r.status === "in_progress" || r.status === "unknown")) {
          expected = rec(r, {
            status: statuses[op.status]!,
            updatedAt: op.now,
            leaseExpiresAt: op.now,
            expiresAt: op.now + op.ttlMs,
            result: op.status === 0 ? '"ok"' : null,
            error: op.status === 1 ? "boom" : null,
          });
          model.set(text(scope, key), expected);
        }
        const got = await store.settle({
          scope,
          key,
          token,
          status: statuses[op.status]!,
          result: op.status === 0 ? '"ok"' : null,
          error: op.status === 1 ? "boom" : null,
          ttlMs: op.ttlMs,
          now: op.now,
        });
        expect(got, where).toEqual(expected);
        break;
      }
      case "renew": {
        const { scope, key } = id(op.scope, op.key);
        const r = model.get(text(scope, key));
        const token = op.own && r !== undefined ? r.token : "nobody";
        let expected = false;
        if (r !== undefined && r.token === token && r.status === "in_progress") {
          const leaseExpiresAt = op.now + op.leaseMs;
          model.set(
            text(scope, key),
            rec(r, {
              updatedAt: op.now,
              leaseExpiresAt,
              expiresAt: Math.max(r.expiresAt, leaseExpiresAt + op.ttlMs),
            }),
          );
          expected = true;
        }
        const got = await store.renew({
          scope,
          key,
          token,
          leaseMs: op.leaseMs,
          ttlMs: op.ttlMs,
          now: op.now,
        });
        expect(got, where).toBe(expected);
        break;
      }
      case "takeover": {
        const { scope, key } = id(op.scope, op.key);
        const r = model.get(text(scope, key));
        const fromToken = op.own && r !== undefined ? r.token : "nobody";
        const token = `t${++tokens}`;
        let expected: IdempotencyRecord | null = null;
        if (
          r !== undefined &&
          r.expiresAt > op.now &&
          r.token === fromToken &&
          (r.status === "unknown" || (r.status === "in_progress" && r.leaseExpiresAt <= op.now))
        ) {
          const leaseExpiresAt = op.now + op.leaseMs;
          expected = rec(r, {
            status: "in_progress",
            token,
            updatedAt: op.now,
            leaseExpiresAt,
            expiresAt: Math.max(r.expiresAt, leaseExpiresAt + op.ttlMs),
            attempts: r.attempts + 1,
            result: null,
          });
          model.set(text(scope, key), expected);
        }
        const got = await store.takeover({
          scope,
          key,
          fromToken,
          token,
          leaseMs: op.leaseMs,
          ttlMs: op.ttlMs,
          now: op.now,
        });
        expect(got, where).toEqual(expected);
        break;
      }
      case "release": {
        const { scope, key } = id(op.scope, op.key);
        const r = model.get(text(scope, key));
        const token = op.own && r !== undefined ? r.token : "nobody";
        const expected =
          r !== undefined && r.token === token && (r.status === "in_progress" || r.status === "unknown");
        if (expected) model.delete(text(scope, key));
        expect(await store.release({ scope, key, token }), where).toBe(expected);
        break;
      }
      case "delete": {
        const { scope, key } = id(op.scope, op.key);
        const expected = model.delete(text(scope, key));
        expect(await store.delete({ scope, key }), where).toBe(expected);
        break;
      }
      case "get": {
        const { scope, key } = id(op.scope, op.key);
        const r = model.get(text(scope, key));
        let expected: IdempotencyRecord | undefined = r;
        if (r !== undefined && r.expiresAt <= op.now) {
          model.delete(text(scope, key));
          expected = undefined;
        }
        expect(await store.get({ scope, key }, op.now), where).toEqual(expected);
        break;
      }
      case "purge": {
        const expired = expiredAt(op.now);
        const { deleted } = await store.purge({ now: op.now, limit: op.limit });
        expect(deleted, where).toBe(Math.min(op.limit, expired.length));
        // Which expired records go under a limit is the store's choice; exactly those, and only expired ones.
        const held = new Set((await listAll(store)).map((r) => text(r.scope, r.key)));
        const gone = [...model.keys()].filter((k) => !held.has(k));
        expect(gone.length, where).toBe(deleted);
        for (const k of gone) {
          expect(model.get(k)!.expiresAt, `${where}: purged live ${k}`).toBeLessThanOrEqual(op.now);
          model.delete(k);
        }
        break;
      }
      case "churn": {
        // A full store would purge (or refuse) on these claims: leave that to the claim op.
        if (model.size >= maxRecords) break;
        // Claims and deletes of keys outside the model: each files a heap entry and leaves it stale, so
        // the heap is rebuilt (it holds more than 2 × size + 1024 entries) in the middle of the run.
        for (let i = 0; i < op.count; i++) {
          const key = `churn${i % 3}`;
          await store.claim({
            scope: "churn",
            key,
            tool: "tool",
            fingerprint: "f",
            token: `c${i}`,
            leaseMs: 1,
            ttlMs: op.ttlMs,
            now: op.now,
          });
          await store.delete({ scope: "churn", key });
        }
        break;
      }
    }
    expect(sorted(await listAll(store)), where).toEqual(sorted(model.values()));
  }

  // Enough purges leave no expired record behind, at any time.
  // Every time in turn, so a record whose heap entry is filed even 1 ms after its expiry is caught.
  const times = [...Array.from({ length: 40 }, (_, t) => t), 1e15 - 1, 1e15, 2e15, Number.POSITIVE_INFINITY];
  for (const now of times) {
    const expired = expiredAt(now).length;
    for (;;) {
      const { deleted } = await store.purge({ now, limit: 7 });
      if (deleted === 0) break;
    }
    for (const r of expiredAt(now)) model.delete(text(r.scope, r.key));
    expect(sorted(await listAll(store)), `final purge at ${now} (${expired} expired)`).toEqual(
      sorted(model.values()),
    );
  }
}

const now = fc.integer({ min: 0, max: 15 });
const span = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 10 }) },
  { weight: 1, arbitrary: fc.constant(Number.POSITIVE_INFINITY) },
  { weight: 1, arbitrary: fc.constant(1e15) },
);
const scope = fc.nat(1);
const key = fc.nat(2);
// Mostly the owner's token, so settles, renewals and takeovers apply.
const own = fc.oneof(
  { weight: 4, arbitrary: fc.constant(true) },
  { weight: 1, arbitrary: fc.constant(false) },
);

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant("claim" as const),
      scope,
      key,
      now,
      leaseMs: span,
      ttlMs: span,
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("settle" as const),
      scope,
      key,
      now,
      ttlMs: span,
      own,
      status: fc.nat(2),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("renew" as const),
      scope,
      key,
      now,
      leaseMs: span,
      ttlMs: span,
      own,
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("takeover" as const),
      scope,
      key,
      now,
      leaseMs: span,
      ttlMs: span,
      own,
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("release" as const), scope, key, own }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("delete" as const), scope, key }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("get" as const), scope, key, now }) },
  {
    weight: 4,
    arbitrary: fc.record({ kind: fc.constant("purge" as const), now, limit: fc.integer({ min: 1, max: 4 }) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("churn" as const),
      now,
      ttlMs: span,
      count: fc.constantFrom(3, 1_100),
    }),
  },
);

describe("memoryStore against a model (review of the settle-aware expiry heap)", () => {
  it("matches the model with clocks going back and ttl differing per op", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 60 }), async (ops) => run(ops, 1_000)),
      { numRuns: 250 },
    );
  });

  it("matches the model when full, where a claim purges to make room", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(op, { minLength: 1, maxLength: 60 }),
        fc.integer({ min: 1, max: 5 }),
        async (ops, maxRecords) => run(ops, maxRecords),
      ),
      { numRuns: 250 },
    );
  });

  it("purges a record settled by a clock behind its claim's, with a shorter ttl", async () => {
    const store = memoryStore();
    const base = { scope: "s", key: "k", tool: "t", fingerprint: "f", token: "a" };
    await store.claim({ ...base, leaseMs: 10, ttlMs: 100, now: 50 });
    await store.settle({ ...base, status: "completed", result: null, error: null, ttlMs: 5, now: 20 });
    expect(await store.purge({ now: 24 })).toEqual({ deleted: 0 });
    expect(await store.purge({ now: 25 })).toEqual({ deleted: 1 });
  });

  it("purges a record claimed again after its expired predecessor was left in place", async () => {
    const store = memoryStore();
    const base = { scope: "s", key: "k", tool: "t", fingerprint: "f" };
    await store.claim({ ...base, token: "a", leaseMs: 0, ttlMs: 1_000, now: 0 });
    await store.claim({ ...base, token: "b", leaseMs: 1_000, ttlMs: 1_000, now: 1_000 });
    await store.settle({
      ...base,
      token: "b",
      status: "completed",
      result: null,
      error: null,
      ttlMs: 1,
      now: 1_000,
    });
    expect(await store.purge({ now: 1_000 })).toEqual({ deleted: 0 });
    expect(await store.purge({ now: 1_001 })).toEqual({ deleted: 1 });
  });

  it("purges a record claimed after its key was deleted, with the deleted record's entry still in the heap", async () => {
    const store = memoryStore();
    const base = { scope: "s", key: "k", tool: "t", fingerprint: "f" };
    await store.claim({ ...base, token: "a", leaseMs: 0, ttlMs: 5, now: 0 });
    await store.delete(base);
    await store.claim({ ...base, token: "b", leaseMs: 0, ttlMs: 100, now: 0 });
    await store.settle({
      ...base,
      token: "b",
      status: "completed",
      result: null,
      error: null,
      ttlMs: 3,
      now: 0,
    });
    expect(await store.purge({ now: 2 })).toEqual({ deleted: 0 });
    expect(await store.purge({ now: 3 })).toEqual({ deleted: 1 });
    expect(await store.purge({ now: 1e9 })).toEqual({ deleted: 0 });
  });

  it("purges a record settled earlier than its expiry after the heap was rebuilt under it", async () => {
    const store = memoryStore();
    const base = { scope: "s", key: "k", tool: "t", fingerprint: "f", token: "a" };
    // Filed at 100 (where a settle at 0 with the same ttl lands), expiring at 110.
    await store.claim({ ...base, leaseMs: 10, ttlMs: 100, now: 0 });
    // Over 1024 stale entries: the heap is rebuilt with one entry per record, at its expiry (110).
    for (let i = 0; i < 1_100; i++) {
      await store.claim({ ...base, key: "churn", token: `c${i}`, leaseMs: 0, ttlMs: 1, now: 0 });
      await store.delete({ scope: "s", key: "churn" });
    }
    await store.settle({ ...base, status: "completed", result: null, error: null, ttlMs: 105, now: 0 });
    expect(await store.purge({ now: 104 })).toEqual({ deleted: 0 });
    expect(await store.purge({ now: 105 })).toEqual({ deleted: 1 });
  });
});
