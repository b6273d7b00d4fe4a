/** Edges of the in-process join: other tools on the key, a settle refused or failing, and flights always ended. */
import { describe, expect, it } from "vitest";
import { idempotent } from "./idempotent.js";
import { flightCount } from "./in-flight.js";
import { memoryStore } from "./memory-store.js";
import type { IdempotencyStore } from "./store.js";

describe("repeats joining a claim in one process, at the edges", () => {
  it("a joiner of another tool name on the same key is refused, not replayed", async () => {
    const store = memoryStore();
    let runs = 0;
    const a = idempotent(
      async (x: { to: string }) => {
        runs++;
        await new Promise((r) => setTimeout(r, 20));
        return `a-${x.to}`;
      },
      { name: "a", store, effect: "irreversible" },
    );
    const b = idempotent(
      async (x: { to: string }) => {
        runs++;
        return `b-${x.to}`;
      },
      { name: "b", store, effect: "owned-store" },
    );
    const [ra, rb] = await Promise.allSettled([a({ to: "x" }, { key: "k" }), b({ to: "x" }, { key: "k" })]);
    expect(ra.status).toBe("fulfilled");
    expect(rb.status).toBe("rejected");
    expect(runs).toBe(1);
    expect(flightCount(store)).toBe(0);
  });

  it("a settle refused (lease lost) hands no outcome to waiters", async () => {
    const inner = memoryStore();
    const store: IdempotencyStore = {
      ...inner,
      settle: async () => null,
      claim: (r) => inner.claim(r),
      get: (i, n) => inner.get(i, n),
      takeover: (r) => inner.takeover(r),
      renew: (r) => inner.renew(r),
      release: (r) => inner.release(r),
    };
    let runs = 0;
    const t = idempotent(
      async () => {
        runs++;
        await new Promise((r) => setTimeout(r, 20));
        return runs;
      },
      { name: "t", store, effect: "irreversible", leaseMs: 200, waitMs: 100 },
    );
    const all = await Promise.allSettled([t({}, { key: "k" }), t({}, { key: "k" }), t({}, { key: "k" })]);
    expect(runs).toBe(1);
    for (const r of all.slice(1)) {
      if (r.status === "fulfilled") expect(r.value.was_replay).toBe(false);
    }
    expect(all.slice(1).every((r) => r.status === "rejected")).toBe(true);
    expect(flightCount(store)).toBe(0);
  });

  it("a winner whose settle throws every time leaves no flight and no replay", async () => {
    const inner = memoryStore();
    const store: IdempotencyStore = {
      ...inner,
      settle: async () => {
        throw new Error("down");
      },
      claim: (r) => inner.claim(r),
      get: (i, n) => inner.get(i, n),
      takeover: (r) => inner.takeover(r),
      renew: (r) => inner.renew(r),
      release: (r) => inner.release(r),
    };
    let runs = 0;
    const t = idempotent(
      async () => {
        runs++;
        return runs;
      },
      { name: "t", store, effect: "irreversible", leaseMs: 200, waitMs: 50 },
    );
    const all = await Promise.allSettled([t({}, { key: "k" }), t({}, { key: "k" })]);
    expect(runs).toBe(1);
    expect(all[1]?.status).toBe("rejected");
    expect(flightCount(store)).toBe(0);
  });
});
