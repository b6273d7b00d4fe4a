/**
 * A settle answers the record it left without shipping back what its request holds: that record must equal
 * what get() reads back, on either clock, whatever ttlMs, and whatever the server's float output.
 */
import { afterAll, describe, expect, it } from "vitest";
import type { SettleRequest } from "../src/core/store.js";
import { readBackOwnSettle } from "../src/core/store.js";
import { postgresStore } from "../src/postgres/index.js";
import { claimRequest } from "./fixtures/claim-request.js";
import { tablesDroppedAfterEach, testPool } from "./fixtures/pg-helpers.js";

const pool = testPool({ max: 4 });
const table = tablesDroppedAfterEach(pool);
afterAll(async () => {
  await pool.end();
});

const t0 = Date.parse("2026-01-01T00:00:00.001Z");
const id = { scope: "tenant-a", key: "order-1" };
const settle = (o: Partial<SettleRequest> = {}): SettleRequest => ({
  ...id,
  token: "token-a",
  status: "completed",
  result: '{"ok":"☃ 𝄞"}',
  error: null,
  ttlMs: 86_400_000,
  now: t0 + 5,
  ...o,
});

describe("settle answers what get reads back", () => {
  for (const clock of ["request", "server"] as const) {
    it(`${clock} clock: in_progress -> unknown -> completed, and a resent settle read back`, async () => {
      const store = postgresStore({
        client: pool,
        table: table(),
        clock,
        ...(clock === "server" ? { clockOffsetMs: () => 7 } : {}),
      });
      expect((await store.claim(claimRequest({ now: t0 }))).claimed).toBe(true);
      const u = await store.settle(
        settle({ status: "unknown", result: null, error: '{"m":"x"}', ttlMs: 1_000 }),
      );
      expect(u).toEqual(await store.get(id, t0));
      const c = await store.settle(settle({ now: t0 + 9, ttlMs: 3_333 }));
      expect(c).toEqual(await store.get(id, t0));
      // The reply lost and the settle resent: refused, read back, the same record.
      const again = settle({ now: t0 + 9, ttlMs: 3_333 });
      expect(await store.settle(again)).toBeNull();
      expect(await readBackOwnSettle(store, again)).toEqual(c);
    });
  }

  // Direct store calls (the core caps ttlMs at ten years): sums past 2^53 round once on either side.
  for (const [now, ttlMs] of [
    [t0, 2 ** 53 - t0 - 1],
    [t0, 2 ** 53],
    [t0 + 2, 2 ** 53 + 2],
    [t0 + 1, 2 ** 54],
    [2 ** 53 - 2, 3],
    [3, 2 ** 62],
    // Past 2^53 pg sends String(ttlMs), the shortest decimal ("…050"), not the exact integer ("…048").
    [t0, 18014398511179048],
  ] as const) {
    it(`request clock: now ${now}, ttlMs ${ttlMs}`, async () => {
      const store = postgresStore({ client: pool, table: table(), clock: "request" });
      expect((await store.claim(claimRequest({ now: Math.min(now, t0), ttlMs: 1_000 }))).claimed).toBe(true);
      const s = await store.settle(settle({ now, ttlMs }));
      expect(s).not.toBeNull();
      expect(s).toEqual(await store.get(id, 0));
    });
  }

  it("under extra_float_digits = -3, as get() reads the same rounded columns", async () => {
    const p = testPool({ max: 1, options: "-c extra_float_digits=-3" });
    try {
      const name = table();
      const store = postgresStore({ client: p, table: name, clock: "request" });
      await store.claim(claimRequest({ now: t0 }));
      const s = await store.settle(settle({ now: t0 + 2, ttlMs: 86_400_005 }));
      expect(s).toEqual(await store.get(id, t0));
    } finally {
      await p.end();
    }
  });
});
