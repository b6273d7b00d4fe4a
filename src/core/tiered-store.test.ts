import { describe, expect, it } from "vitest";
import { storeConformanceCases } from "../testing/conformance.js";
import { fakeClock } from "../testing/fake-clock.js";
import { isIdempotencyError } from "./errors.js";
import { idempotent } from "./idempotent.js";
import { memoryStore } from "./memory-store.js";
import type { ClaimRequest, IdempotencyStore } from "./store.js";
import { tieredStore } from "./tiered-store.js";

/** A durable store that counts the operations that reach it. */
function counted(inner: IdempotencyStore = memoryStore()) {
  const counts: Record<string, number> = {};
  const store = Object.fromEntries(
    Object.entries(inner).map(([name, op]) => [
      name,
      (...args: unknown[]) => {
        counts[name] = (counts[name] ?? 0) + 1;
        return (op as (...a: unknown[]) => unknown)(...args);
      },
    ]),
  ) as unknown as IdempotencyStore;
  return { store, counts };
}

/**
 * A durable store whose clock runs `aheadMs` ahead of the caller's, as a database server's may: it judges
 * every request at the request's time plus `aheadMs`, and reports that time from claim.
 */
function aheadBy(aheadMs: number, inner: IdempotencyStore = memoryStore()): IdempotencyStore {
  return {
    claim: (request) => inner.claim({ ...request, now: request.now + aheadMs }),
    takeover: (request) => inner.takeover({ ...request, now: request.now + aheadMs }),
    settle: (request) => inner.settle({ ...request, now: request.now + aheadMs }),
    renew: (request) => inner.renew({ ...request, now: request.now + aheadMs }),
    release: (request) => inner.release(request),
    get: (id, now) => inner.get(id, now + aheadMs),
    delete: (id) => inner.delete(id),
    list: (query) => inner.list(query),
    purge: (request) => inner.purge({ ...request, now: request.now + aheadMs }),
  };
}

const HOUR = 60 * 60 * 1000;
const longest = 2 ** 31 - 1;
const claimOf = (token: string, now: number): ClaimRequest => ({
  scope: "s",
  key: "k",
  tool: "t",
  fingerprint: "f",
  token,
  leaseMs: 1_000,
  ttlMs: 60_000,
  now,
});
const settleOf = (token: string, now: number) => ({
  scope: "s",
  key: "k",
  token,
  status: "completed" as const,
  result: "1",
  error: null,
  ttlMs: 60_000,
  now,
});

describe("tieredStore conformance", () => {
  for (const [label, maxStalenessMs] of [
    ["default staleness", undefined],
    ["longest staleness", longest],
    ["no staleness", 0],
  ] as const) {
    for (const c of storeConformanceCases({
      name: `tiered over memory, ${label}`,
      create: () => ({
        store: tieredStore({
          store: memoryStore(),
          maxEntries: 4,
          ...(maxStalenessMs === undefined ? {} : { maxStalenessMs }),
        }),
        clock: fakeClock(),
      }),
    })) {
      it(c.name, c.run);
    }
  }
});

describe("tieredStore", () => {
  it("answers a replay from the in-process cache without a round trip to the durable store", async () => {
    const { store: durable, counts } = counted();
    const clock = fakeClock();
    let runs = 0;
    const tool = idempotent(
      async () => {
        runs++;
        return "sent";
      },
      { name: "send", store: tieredStore({ store: durable }), clock },
    );
    await tool({}, { key: "k" });
    const before = { ...counts };
    for (let i = 0; i < 5; i++) expect((await tool({}, { key: "k" })).was_replay).toBe(true);
    expect(counts).toEqual(before);
    expect(runs).toBe(1);
  });

  it("never caches an in-progress record: another worker may settle it at any moment", async () => {
    const { store: durable, counts } = counted();
    const tiered = tieredStore({ store: durable });
    const clock = fakeClock();
    const request = { scope: "s", key: "k", tool: "t", fingerprint: "f", leaseMs: 1_000, ttlMs: 60_000 };
    await tiered.claim({ ...request, token: "a", now: clock.now() });
    await tiered.claim({ ...request, token: "b", now: clock.now() });
    await tiered.claim({ ...request, token: "c", now: clock.now() });
    expect(counts.claim).toBe(3);
    // Settled elsewhere (straight on the durable store): the next claim sees it and caches it from then on.
    await durable.settle({
      scope: "s",
      key: "k",
      token: "a",
      status: "completed",
      result: "1",
      error: null,
      ttlMs: 60_000,
      now: clock.now(),
    });
    const seen = await tiered.claim({ ...request, token: "d", now: clock.now() });
    expect(seen.record.status).toBe("completed");
    await tiered.claim({ ...request, token: "e", now: clock.now() });
    expect(counts.claim).toBe(4);
  });

  it("stops serving a cached record once it expires", async () => {
    const { store: durable, counts } = counted();
    const tiered = tieredStore({ store: durable });
    const clock = fakeClock();
    const request = { scope: "s", key: "k", tool: "t", fingerprint: "f", leaseMs: 1_000, ttlMs: 60_000 };
    await tiered.claim({ ...request, token: "a", now: clock.now() });
    await tiered.settle({
      scope: "s",
      key: "k",
      token: "a",
      status: "completed",
      result: "1",
      error: null,
      ttlMs: 60_000,
      now: clock.now(),
    });
    await clock.advance(60_000);
    const again = await tiered.claim({ ...request, token: "b", now: clock.now() });
    expect(again.claimed).toBe(true);
    expect(counts.claim).toBe(2);
  });

  it("evicts the least recently used beyond maxEntries, and the durable store still answers", async () => {
    const { store: durable, counts } = counted();
    const tiered = tieredStore({ store: durable, maxEntries: 2 });
    const now = fakeClock().now();
    for (const key of ["a", "b", "c"]) {
      await tiered.claim({
        scope: "s",
        key,
        tool: "t",
        fingerprint: "f",
        token: key,
        leaseMs: 1_000,
        ttlMs: 60_000,
        now,
      });
      await tiered.settle({
        scope: "s",
        key,
        token: key,
        status: "completed",
        result: "1",
        error: null,
        ttlMs: 60_000,
        now,
      });
    }
    const gets = counts.get ?? 0;
    expect((await tiered.get({ scope: "s", key: "c" }, now))?.status).toBe("completed");
    expect(counts.get ?? 0).toBe(gets);
    expect((await tiered.get({ scope: "s", key: "a" }, now))?.status).toBe("completed");
    expect(counts.get).toBe(gets + 1);
  });

  it("never serves a cached record past its expiry by the durable store's clock when the caller's clock is behind", async () => {
    const { store: durable, counts } = counted(aheadBy(HOUR));
    const clock = fakeClock();
    let runs = 0;
    const tool = idempotent(async () => ++runs, {
      name: "send",
      store: tieredStore({ store: durable, maxStalenessMs: longest }),
      clock,
      ttlMs: 2 * HOUR,
    });
    expect((await tool({}, { key: "k" })).result).toBe(1);
    const claims = counts.claim;
    await clock.advance(2 * HOUR - 1);
    expect(await tool({}, { key: "k" })).toMatchObject({ result: 1, was_replay: true });
    expect(counts.claim).toBe(claims);
    // The store's clock reached the record's expiry; the caller's is still an hour short of it.
    await clock.advance(1);
    expect(await tool({}, { key: "k" })).toMatchObject({ result: 2, was_replay: false });
  });

  it("judges a record it cached from a claim by the clock that claim reported", async () => {
    const { store: durable, counts } = counted(aheadBy(HOUR));
    const tiered = tieredStore({ store: durable, maxStalenessMs: longest });
    const t0 = fakeClock().now();
    // Settled by another worker: this process first sees the record through its own claim.
    await durable.claim(claimOf("a", t0));
    await durable.settle(settleOf("a", t0));
    expect(await tiered.claim(claimOf("b", t0))).toMatchObject({ claimed: false, now: t0 + HOUR });
    expect(await tiered.claim(claimOf("c", t0 + 59_999))).toMatchObject({
      claimed: false,
      now: t0 + 59_999 + HOUR,
    });
    expect(counts.claim).toBe(2);
    expect((await tiered.claim(claimOf("d", t0 + 60_000))).claimed).toBe(true);
  });

  it("asks the durable store again after maxStalenessMs, so a delete made elsewhere stops being replayed", async () => {
    const durable = memoryStore();
    const clock = fakeClock();
    let runs = 0;
    const tool = idempotent(async () => ++runs, {
      name: "send",
      store: tieredStore({ store: durable, maxStalenessMs: 1_000 }),
      clock,
    });
    await tool({}, { key: "k" });
    // An operator removes the record through the durable store, not through this tiered store.
    expect(await durable.delete({ scope: "default", key: "k" })).toBe(true);
    await clock.advance(999);
    expect(await tool({}, { key: "k" })).toMatchObject({ result: 1, was_replay: true });
    await clock.advance(1);
    expect(await tool({}, { key: "k" })).toMatchObject({ result: 2, was_replay: false });
  });

  it("finds a record settled anew elsewhere after maxStalenessMs", async () => {
    const durable = memoryStore();
    const tiered = tieredStore({ store: durable, maxStalenessMs: 1_000 });
    const t0 = fakeClock().now();
    await tiered.claim(claimOf("a", t0));
    await tiered.settle(settleOf("a", t0));
    await durable.delete({ scope: "s", key: "k" });
    await durable.claim(claimOf("b", t0 + 10));
    await durable.settle({ ...settleOf("b", t0 + 10), result: "2" });
    expect((await tiered.claim(claimOf("c", t0 + 999))).record.result).toBe("1");
    expect((await tiered.claim(claimOf("c", t0 + 1_000))).record.result).toBe("2");
    expect((await tiered.get({ scope: "s", key: "k" }, t0 + 1_000))?.result).toBe("2");
  });

  it("serves nothing from the cache when maxStalenessMs is 0", async () => {
    const { store: durable, counts } = counted();
    const tiered = tieredStore({ store: durable, maxStalenessMs: 0 });
    const t0 = fakeClock().now();
    await tiered.claim(claimOf("a", t0));
    await tiered.settle(settleOf("a", t0));
    for (let i = 0; i < 3; i++) expect((await tiered.claim(claimOf("b", t0))).claimed).toBe(false);
    expect(counts.claim).toBe(4);
  });

  it("asks the durable store again when the caller's clock steps back", async () => {
    const { store: durable, counts } = counted();
    const tiered = tieredStore({ store: durable, maxStalenessMs: longest });
    const t0 = fakeClock().now();
    await tiered.claim(claimOf("a", t0));
    await tiered.settle(settleOf("a", t0));
    expect((await tiered.claim(claimOf("b", t0 - 1))).claimed).toBe(false);
    expect(counts.claim).toBe(2);
  });

  it("drops the cached record at once on a delete made through it", async () => {
    const durable = memoryStore();
    const tiered = tieredStore({ store: durable, maxStalenessMs: longest });
    const t0 = fakeClock().now();
    await tiered.claim(claimOf("a", t0));
    await tiered.settle(settleOf("a", t0));
    expect(await tiered.delete({ scope: "s", key: "k" })).toBe(true);
    expect(await tiered.get({ scope: "s", key: "k" }, t0)).toBeUndefined();
    expect((await tiered.claim(claimOf("b", t0))).claimed).toBe(true);
  });

  it("drops what a purge made through it may have removed at once", async () => {
    const durable = memoryStore();
    const tiered = tieredStore({ store: durable, maxStalenessMs: longest });
    const t0 = fakeClock().now();
    await tiered.claim(claimOf("a", t0));
    await tiered.settle(settleOf("a", t0));
    // A purge judged by a later clock (a cron job's, say) removes what the caller still sees as live.
    expect(await tiered.purge({ now: t0 + 60_000 })).toEqual({ deleted: 1 });
    expect(await tiered.get({ scope: "s", key: "k" }, t0 + 1)).toBeUndefined();
    expect((await tiered.claim(claimOf("b", t0 + 1))).claimed).toBe(true);
  });

  it("rejects bad options by name", () => {
    const bad: [string, Parameters<typeof tieredStore>[0]][] = [
      ["store", { store: {} as IdempotencyStore }],
      ["maxEntries", { store: memoryStore(), maxEntries: 0 }],
      ...[-1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31, "5" as unknown as number].map(
        (maxStalenessMs) => ["maxStalenessMs", { store: memoryStore(), maxStalenessMs }] as [string, never],
      ),
    ];
    for (const [name, options] of bad) {
      let thrown: unknown;
      try {
        tieredStore(options);
      } catch (error) {
        thrown = error;
      }
      expect(isIdempotencyError(thrown, "invalid_options"), name).toBe(true);
      expect((thrown as Error).message).toContain(`\`${name}\``);
    }
  });

  it("accepts maxStalenessMs from 0 to 2^31 - 1", () => {
    for (const maxStalenessMs of [0, 1, 1_000, longest])
      tieredStore({ store: memoryStore(), maxStalenessMs });
  });
});
