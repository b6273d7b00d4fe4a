import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { storeConformanceCases } from "../testing/conformance.js";
import { fakeClock } from "../testing/fake-clock.js";
import { IdempotencyError, StoreFullError } from "./errors.js";
import { memoryStore } from "./memory-store.js";
import type { ClaimRequest } from "./store.js";

describe("memoryStore conformance", () => {
  for (const c of storeConformanceCases({
    name: "memory",
    create: () => ({ store: memoryStore(), clock: fakeClock() }),
  })) {
    it(c.name, c.run);
  }
});

const T0 = Date.parse("2026-01-01T00:00:00.000Z");

function claim(key: string, overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return {
    scope: "s",
    key,
    tool: "send_email",
    fingerprint: "f",
    token: `token-${key}`,
    leaseMs: 60_000,
    ttlMs: 86_400_000,
    now: T0,
    ...overrides,
  };
}

describe("memoryStore", () => {
  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, "10" as unknown as number])(
    "rejects maxRecords %s at configuration time, naming the option",
    (maxRecords) => {
      const attempt = () => memoryStore({ maxRecords });
      expect(attempt).toThrow(IdempotencyError);
      expect(attempt).toThrow(/^memoryStore\(\): option `maxRecords`/);
      try {
        attempt();
      } catch (error) {
        expect((error as IdempotencyError).code).toBe("invalid_options");
      }
    },
  );

  it("refuses a new claim when full of live records, and keeps every one of them", async () => {
    const store = memoryStore({ maxRecords: 3 });
    for (const key of ["a", "b", "c"]) expect((await store.claim(claim(key))).claimed).toBe(true);

    const refused = store.claim(claim("d", { now: T0 + 1_000 }));
    await expect(refused).rejects.toBeInstanceOf(StoreFullError);
    await expect(store.claim(claim("d"))).rejects.toMatchObject({ code: "store_full", maxRecords: 3 });

    for (const key of ["a", "b", "c"])
      expect((await store.get({ scope: "s", key }, T0))?.token).toBe(`token-${key}`);
    expect(await store.get({ scope: "s", key: "d" }, T0)).toBeUndefined();
  });

  it("still answers claims of keys it holds when full", async () => {
    const store = memoryStore({ maxRecords: 1 });
    await store.claim(claim("a"));
    const again = await store.claim(claim("a", { token: "other" }));
    expect(again.claimed).toBe(false);
    expect(again.record.token).toBe("token-a");
  });

  it("removes expired records to make room before refusing a claim", async () => {
    const store = memoryStore({ maxRecords: 3 });
    await store.claim(claim("short-1", { ttlMs: 1_000, leaseMs: 1_000 }));
    await store.claim(claim("short-2", { ttlMs: 2_000, leaseMs: 1_000 }));
    await store.claim(claim("long"));

    const later = T0 + 2_000;
    expect((await store.claim(claim("new", { now: later }))).claimed).toBe(true);
    const held = (await store.list({})).records.map((record) => record.key).sort();
    expect(held).toEqual(["long", "new", "short-2"]);
    await expect(store.claim(claim("newer", { now: later }))).rejects.toBeInstanceOf(StoreFullError);
  });

  it("replaces an expired record of the same key when full without touching others", async () => {
    const store = memoryStore({ maxRecords: 2 });
    await store.claim(claim("a", { ttlMs: 1_000, leaseMs: 1_000 }));
    await store.claim(claim("b", { ttlMs: 1_000, leaseMs: 1_000 }));
    const again = await store.claim(claim("a", { token: "second", now: T0 + 2_000 }));
    expect(again.claimed).toBe(true);
    expect((await store.list({})).records.map((record) => record.key).sort()).toEqual(["a", "b"]);
  });

  it("makes room again once a record is released or deleted", async () => {
    const store = memoryStore({ maxRecords: 1 });
    await store.claim(claim("a"));
    await expect(store.claim(claim("b"))).rejects.toBeInstanceOf(StoreFullError);
    expect(await store.release({ scope: "s", key: "a", token: "token-a" })).toBe(true);
    expect((await store.claim(claim("b"))).claimed).toBe(true);
    expect(await store.delete({ scope: "s", key: "b" })).toBe(true);
    expect((await store.claim(claim("c"))).claimed).toBe(true);
  });

  it("holds 10_000 records by default", async () => {
    const store = memoryStore();
    for (let i = 0; i < 10_000; i++) await store.claim(claim(`k${i}`));
    await expect(store.claim(claim("one-more"))).rejects.toBeInstanceOf(StoreFullError);
  });

  it("counts a key once however often its record is rewritten", async () => {
    const store = memoryStore({ maxRecords: 2 });
    await store.claim(claim("a"));
    for (let i = 0; i < 3; i++) {
      await store.renew({ scope: "s", key: "a", token: "token-a", leaseMs: 60_000, ttlMs: 1_000, now: T0 });
    }
    await store.settle({
      ...{ scope: "s", key: "a", token: "token-a", ttlMs: 1_000, now: T0 },
      status: "completed",
      result: "1",
      error: null,
    });
    await expect(store.claim(claim("b"))).resolves.toMatchObject({ claimed: true });
  });

  it("hands out frozen records", async () => {
    const store = memoryStore();
    const { record } = await store.claim(claim("a"));
    expect(Object.isFrozen(record)).toBe(true);
  });

  it("lists expired records until a purge or a lookup removes them", async () => {
    const store = memoryStore();
    await store.claim(claim("a", { ttlMs: 1_000, leaseMs: 1_000 }));
    expect((await store.list({})).records).toHaveLength(1);
    expect(await store.get({ scope: "s", key: "a" }, T0 + 2_000)).toBeUndefined();
    expect((await store.list({})).records).toHaveLength(0);
  });

  it("keeps listing an expired record while claims of other keys come and go (it purges only when full)", async () => {
    const store = memoryStore();
    await store.claim(claim("a", { ttlMs: 1_000, leaseMs: 1_000 }));
    await store.claim(claim("b", { now: T0 + 5_000 }));
    expect((await store.list({})).records.map((r) => r.key)).toEqual(["a", "b"]);
  });

  it("lists by scope, then key, in pages; the page that holds the last match has no cursor", async () => {
    const store = memoryStore();
    for (const [scope, key] of [
      ["s2", "a"],
      ["s1", "b"],
      ["s1", "a"],
      ["s2", "0"],
    ] as const) {
      await store.claim(claim(key, { scope }));
    }
    const ids = (page: { records: readonly { scope: string; key: string }[] }) =>
      page.records.map((r) => `${r.scope}/${r.key}`);
    const first = await store.list({ limit: 2 });
    expect(ids(first)).toEqual(["s1/a", "s1/b"]);
    const second = await store.list({ limit: 2, cursor: first.nextCursor! });
    expect(ids(second)).toEqual(["s2/0", "s2/a"]);
    expect(second.nextCursor).toBeUndefined();
    const exact = await store.list({ limit: 2, scope: "s2" });
    expect(ids(exact)).toEqual(["s2/0", "s2/a"]);
    expect(exact.nextCursor).toBeUndefined();
    expect((await store.list({ scope: "s3" })).records).toEqual([]);
  });

  it("rejects a cursor it did not issue and a limit that is not a positive integer, naming itself", async () => {
    const store = memoryStore();
    await expect(store.list({ cursor: "not-a-cursor" })).rejects.toThrow(/^memoryStore.*cursor/);
    await expect(store.list({ limit: 0 })).rejects.toThrow(/^memoryStore.*limit/);
    await expect(store.purge({ now: T0, limit: 0 })).rejects.toThrow(/^memoryStore.*limit/);
    await expect(store.purge({ now: T0, limit: 1.5 })).rejects.toThrow(/limit/);
  });

  it("purges expired records only, and all of them, across renewals, settles, takeovers and releases", async () => {
    const op = fc.oneof(
      fc.record({
        kind: fc.constant("claim" as const),
        key: fc.nat(8),
        ttlMs: fc.integer({ min: 1, max: 50 }),
      }),
      fc.record({
        kind: fc.constant("settle" as const),
        key: fc.nat(8),
        ttlMs: fc.integer({ min: 0, max: 50 }),
      }),
      fc.record({
        kind: fc.constant("renew" as const),
        key: fc.nat(8),
        leaseMs: fc.integer({ min: 1, max: 50 }),
      }),
      fc.record({ kind: fc.constant("takeover" as const), key: fc.nat(8) }),
      fc.record({ kind: fc.constant("release" as const), key: fc.nat(8) }),
      fc.record({ kind: fc.constant("advance" as const), ms: fc.integer({ min: 0, max: 30 }) }),
      fc.record({ kind: fc.constant("purge" as const), limit: fc.integer({ min: 1, max: 5 }) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 20, maxLength: 200, size: "max" }), async (ops) => {
        const store = memoryStore({ maxRecords: 1_000 });
        let now = T0;
        const tokens = new Map<string, string>();
        for (const [i, step] of ops.entries()) {
          if (step.kind === "advance") {
            now += step.ms;
            continue;
          }
          if (step.kind === "purge") {
            const all = (await store.list({ limit: 1_000 })).records;
            const expired = all.filter((record) => record.expiresAt <= now);
            const { deleted } = await store.purge({ now, limit: step.limit });
            expect(deleted).toBe(Math.min(step.limit, expired.length));
            const left = (await store.list({ limit: 1_000 })).records;
            expect(left).toHaveLength(all.length - deleted);
            for (const gone of all.filter((record) => !left.includes(record))) {
              expect(gone.expiresAt).toBeLessThanOrEqual(now);
            }
            continue;
          }
          const key = `k${step.key}`;
          const token = tokens.get(key) ?? "none";
          const id = { scope: "s", key };
          if (step.kind === "claim") {
            const outcome = await store.claim(
              claim(key, { token: `t${i}`, ttlMs: step.ttlMs, leaseMs: 5, now }),
            );
            if (outcome.claimed) tokens.set(key, `t${i}`);
          } else if (step.kind === "settle") {
            await store.settle({
              ...id,
              token,
              status: "unknown",
              result: null,
              error: null,
              ttlMs: step.ttlMs,
              now,
            });
          } else if (step.kind === "renew") {
            await store.renew({ ...id, token, leaseMs: step.leaseMs, ttlMs: 86_400_000, now });
          } else if (step.kind === "takeover") {
            const taken = await store.takeover({
              ...id,
              fromToken: token,
              token: `t${i}`,
              leaseMs: 5,
              ttlMs: 86_400_000,
              now,
            });
            if (taken) tokens.set(key, `t${i}`);
          } else {
            await store.release({ ...id, token });
          }
        }
      }),
      { numRuns: 100 },
    );
  });

  it("purges every expired record after released records made it rebuild its expiry heap", async () => {
    const store = memoryStore();
    // The first record lives longest, so the rebuilt heap must sift it down below the others.
    await store.claim(claim("long", { ttlMs: 1_000_000, leaseMs: 1_000 }));
    for (let i = 0; i < 8; i++) await store.claim(claim(`short-${i}`, { ttlMs: 1_000, leaseMs: 1_000 }));
    // Each released record leaves a stale heap entry behind; past about a thousand, the heap is rebuilt.
    for (let i = 0; i < 1_100; i++) {
      await store.claim(claim(`churn-${i}`));
      await store.release({ scope: "s", key: `churn-${i}`, token: `token-churn-${i}` });
    }
    expect(await store.purge({ now: T0 + 500_000 })).toEqual({ deleted: 8 });
    expect((await store.list({})).records.map((r) => r.key)).toEqual(["long"]);
  });

  it("keeps purge exact while released records churn through the expiry heap", async () => {
    const store = memoryStore({ maxRecords: 10 });
    for (let i = 0; i < 5; i++) await store.claim(claim(`keep-${i}`, { ttlMs: 1_000, leaseMs: 1_000 }));
    for (let i = 0; i < 5_000; i++) {
      await store.claim(claim(`churn-${i}`));
      await store.release({ scope: "s", key: `churn-${i}`, token: `token-churn-${i}` });
    }
    expect(await store.purge({ now: T0 + 1_999 })).toEqual({ deleted: 0 });
    expect(await store.purge({ now: T0 + 2_000 })).toEqual({ deleted: 5 });
    expect((await store.list({})).records).toHaveLength(0);
  });
});
