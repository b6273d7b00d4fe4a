import { describe, expect, it } from "vitest";
import { storeConformanceCases } from "../testing/conformance.js";
import { fakeClock } from "../testing/fake-clock.js";
import { isIdempotencyError } from "./errors.js";
import { idempotent } from "./idempotent.js";
import { memoryStore } from "./memory-store.js";
import type { IdempotencyStore } from "./store.js";
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

describe("tieredStore conformance", () => {
  for (const c of storeConformanceCases({
    name: "tiered over memory",
    create: () => ({ store: tieredStore({ store: memoryStore(), maxEntries: 4 }), clock: fakeClock() }),
  })) {
    it(c.name, c.run);
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

  it("rejects bad options by name", () => {
    for (const bad of [{ store: {} as IdempotencyStore }, { store: memoryStore(), maxEntries: 0 }]) {
      let thrown: unknown;
      try {
        tieredStore(bad);
      } catch (error) {
        thrown = error;
      }
      expect(isIdempotencyError(thrown, "invalid_options")).toBe(true);
    }
  });
});
