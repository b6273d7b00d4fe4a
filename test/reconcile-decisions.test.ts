/** The reconciler's decisions that need no real store: failing hooks, compensation, options, limits, its lease. */
import { describe, expect, it, vi } from "vitest";
import { fingerprint, type IdempotencyStore, isIdempotencyError, memoryStore } from "../src/index.js";
import { checkpoint } from "../src/ops/index.js";
import { type ReconcileOutcome, reconcileOnce } from "../src/reconcile/index.js";
import { readTrail, resolveRecord } from "../src/review/index.js";
import { type FakeClock, fakeClock } from "../src/testing/index.js";

async function stale(store: IdempotencyStore, clock: FakeClock, keys: string[]) {
  for (const key of keys) {
    await store.claim({
      scope: "default",
      key,
      tool: "send_email",
      fingerprint: fingerprint({ key }),
      token: `t-${key}`,
      leaseMs: 1_000,
      ttlMs: 86_400_000,
      now: clock.now(),
    });
  }
  await clock.advance(1_001);
}

/** A send_email whose hook always asks to compensate, counting the recalls its compensate makes. */
function recallingTools() {
  let recalls = 0;
  const tools = {
    send_email: {
      verify: (): ReconcileOutcome => ({ status: "compensate", reason: "sent, but to the wrong list" }),
      compensate: () => {
        recalls++;
        return { recalled: recalls };
      },
    },
  };
  return { tools, refunds: () => recalls };
}

describe("reconcile decisions", () => {
  it("counts a hook that throws as an error and puts the record back as unknown", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    await stale(store, clock, ["k"]);
    const summary = await reconcileOnce({
      store,
      clock,
      tools: {
        send_email: {
          verify: () => {
            throw new Error("provider timeout");
          },
        },
      },
    });
    expect(summary).toMatchObject({ examined: 1, errors: 1 });
    expect(summary.decisions[0]?.reason).toContain("provider timeout");
    expect((await store.get({ scope: "default", key: "k" }, clock.now()))?.status).toBe("unknown");
  });

  it("flags a compensate answer for review when the tool has no compensate step", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    await stale(store, clock, ["k"]);
    const summary = await reconcileOnce({
      store,
      clock,
      tools: { send_email: { verify: () => ({ status: "compensate", reason: "duplicate" }) } },
    });
    expect(summary).toMatchObject({ needsReview: 1, compensated: 0 });
    expect((await store.get({ scope: "default", key: "k" }, clock.now()))?.status).toBe("unknown");
  });

  it("keeps a compensation that failed for review, as an error", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    await stale(store, clock, ["k"]);
    const summary = await reconcileOnce({
      store,
      clock,
      tools: {
        send_email: {
          verify: () => ({ status: "compensate" }),
          compensate: () => {
            throw new Error("reversal refused");
          },
        },
      },
    });
    expect(summary).toMatchObject({ errors: 1, compensated: 0 });
    expect((await store.get({ scope: "default", key: "k" }, clock.now()))?.status).toBe("unknown");
  });

  it("stops a pass the store cannot list, as store_unavailable saying what was left", async () => {
    const down = new Error("connection reset");
    const store: IdempotencyStore = { ...memoryStore(), list: () => Promise.reject(down) };
    await expect(reconcileOnce({ store, tools: {} })).rejects.toMatchObject({
      code: "store_unavailable",
      message:
        "The idempotency store failed during list: connection reset. The pass stopped here; records not yet examined are left for the next one.",
      cause: down,
    });
  });

  it("examines at most `limit` records, across pages", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    await stale(store, clock, ["a", "b", "c", "d", "e"]);
    const summary = await reconcileOnce({
      store,
      clock,
      limit: 3,
      pageSize: 2,
      tools: { send_email: { verify: () => ({ status: "not_executed" }) } },
    });
    expect(summary).toMatchObject({ examined: 3, released: 3 });
  });

  it("logs every decision even when the callback throws", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    await stale(store, clock, ["a", "b"]);
    const summary = await reconcileOnce({
      store,
      clock,
      tools: { send_email: { verify: () => ({ status: "not_executed" }) } },
      onDecision: () => {
        throw new Error("logger down");
      },
    });
    expect(summary.released).toBe(2);
  });

  it("leaves the trail of operators' resolutions alone, an interrupted entry too", async () => {
    const clock = fakeClock();
    const store = memoryStore();
    await stale(store, clock, ["k1"]);
    // The resolver writes its intent, then loses the store: the entry stays interrupted (unknown).
    const failing: IdempotencyStore = {
      ...store,
      claim: (request) => store.claim(request),
      settle: (request) => store.settle(request),
      get: (id, now) => store.get(id, now),
      list: (query) => store.list(query),
      release: (request) => store.release(request),
      takeover: () => Promise.reject(new Error("connection reset")),
    };
    const resolving = resolveRecord({
      store: failing,
      clock,
      scope: "default",
      key: "k1",
      as: "not_executed",
      evidence: "not in the provider's log",
      by: "ops",
    });
    await expect(resolving).rejects.toThrow(/connection reset|store/);
    expect((await readTrail({ store, scope: "default", key: "k1" })).map((e) => e.state)).toEqual([
      "interrupted",
    ]);
    const summary = await reconcileOnce({ store, tools: {}, clock });
    expect(summary.decisions.map((d) => [d.scope, d.key, d.decision])).toEqual([
      ["default", "k1", "needs_review"],
    ]);
  });

  it("names the option at fault", async () => {
    await expect(
      reconcileOnce({ store: memoryStore(), tools: { send_email: {} as never } }),
    ).rejects.toMatchObject({
      code: "invalid_options",
      message: expect.stringContaining("tools.send_email.verify"),
    });
    await expect(reconcileOnce({ store: memoryStore(), tools: {}, limit: 0 })).rejects.toMatchObject({
      code: "invalid_options",
    });
  });
});

describe("the reconciler's claim while a hook runs", () => {
  /** A hook that answers when told to, and the signal it was given. */
  function slowHook() {
    let answer: (outcome: ReconcileOutcome) => void = () => {};
    let signal: AbortSignal | undefined;
    const verify = (_record: unknown, context: { signal: AbortSignal }) => {
      signal = context.signal;
      return new Promise<ReconcileOutcome>((resolve) => {
        answer = resolve;
      });
    };
    return { verify, answer: (outcome: ReconcileOutcome) => answer(outcome), signal: () => signal };
  }

  it("is renewed, so a hook that runs three times the lease is not stale to another reconciler or a caller", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    await stale(store, clock, ["k"]);
    const hook = slowHook();
    const pass = reconcileOnce({
      store,
      clock,
      leaseMs: 1_000,
      tools: { send_email: { verify: hook.verify } },
    });
    await clock.advance(3_000);

    const other = vi.fn(() => ({ status: "not_executed" as const }));
    const second = await reconcileOnce({ store, clock, tools: { send_email: { verify: other } } });
    expect(second.examined).toBe(0);
    expect(other).not.toHaveBeenCalled();
    await expect(
      checkpoint(store, { tool: "send_email", key: "k", args: { key: "k" }, clock, waitMs: 0 }),
    ).rejects.toMatchObject({ code: "idempotency_key_in_use" });

    hook.answer({ status: "completed", result: { id: "m-1" } });
    expect(await pass).toMatchObject({ examined: 1, completed: 1 });
    expect((await store.get({ scope: "default", key: "k" }, clock.now()))?.status).toBe("completed");
    expect(clock.pending).toBe(0);
  });

  it("aborts the hook's signal with lease_lost when the record is taken from it, and its settle is refused", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    await stale(store, clock, ["k"]);
    const hook = slowHook();
    const pass = reconcileOnce({
      store,
      clock,
      leaseMs: 1_000,
      tools: { send_email: { verify: hook.verify } },
    });
    await clock.advance(0);
    await store.delete({ scope: "default", key: "k" });
    const cp = await checkpoint(store, { tool: "send_email", key: "k", args: { key: "k" }, clock });

    await clock.advance(400); // the reconciler's next renewal is refused
    expect(isIdempotencyError(hook.signal()?.reason, "lease_lost")).toBe(true);
    hook.answer({ status: "completed", result: { id: "m-1" } });
    expect(await pass).toMatchObject({ examined: 1, completed: 0, errors: 1 });
    expect((await store.get({ scope: "default", key: "k" }, clock.now()))?.status).toBe("in_progress");
    await cp.complete({ id: "m-2" });
  });

  it("compensates once when the reconciler dies between the compensation and its settle", async () => {
    const inner = memoryStore();
    const clock = fakeClock();
    // The first pass's process "dies" after compensating: none of its writes to the record land.
    let dead = true;
    const store: IdempotencyStore = {
      ...inner,
      settle: (request) =>
        dead && request.key === "k" ? Promise.reject(new Error("process gone")) : inner.settle(request),
    };
    await stale(inner, clock, ["k"]);
    const { tools, refunds } = recallingTools();
    const first = await reconcileOnce({ store, clock, tools, leaseMs: 1_000 });
    expect(first).toMatchObject({ compensated: 0, errors: 1 });
    expect((await inner.get({ scope: "default", key: "k" }, clock.now()))?.status).toBe("in_progress");

    dead = false;
    await clock.advance(2_000);
    const second = await reconcileOnce({ store, clock, tools, leaseMs: 1_000 });
    expect(second).toMatchObject({ compensated: 1, errors: 0 });
    expect(refunds()).toBe(1);
    const record = await inner.get({ scope: "default", key: "k" }, clock.now());
    expect(record?.status).toBe("failed");
    // The settled failure keeps what the one compensation returned.
    expect(record?.error).toContain('"recalled":1');
  });

  it("leaves a record whose compensation threw unknown, and never compensates it again by itself", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    await stale(store, clock, ["k"]);
    let attempts = 0;
    const tools = {
      send_email: {
        verify: (): ReconcileOutcome => ({ status: "compensate" }),
        compensate: () => {
          attempts++;
          throw new Error("timeout: the reversal may have gone through");
        },
      },
    };
    const first = await reconcileOnce({ store, clock, tools });
    const second = await reconcileOnce({ store, clock, tools });
    expect(first).toMatchObject({ errors: 1, compensated: 0 });
    expect(second).toMatchObject({ errors: 1, compensated: 0 });
    expect(second.decisions[0]?.reason).toMatch(/outcome_unknown|outcome unknown|unknown/);
    expect(attempts).toBe(1);
    expect((await store.get({ scope: "default", key: "k" }, clock.now()))?.status).toBe("unknown");
  });

  it("compensates once when the store blips on the settle after a compensation", async () => {
    const inner = memoryStore();
    const clock = fakeClock();
    let failSettles = 1;
    const store: IdempotencyStore = {
      ...inner,
      settle: (request) =>
        failSettles-- > 0 ? Promise.reject(new Error("ECONNRESET")) : inner.settle(request),
    };
    await stale(inner, clock, ["k"]);
    const { tools, refunds } = recallingTools();
    const first = await reconcileOnce({ store, clock, tools, leaseMs: 1_000 });
    expect(first).toMatchObject({ compensated: 1, errors: 0 });
    await clock.advance(2_000);
    const second = await reconcileOnce({ store, clock, tools, leaseMs: 1_000 });
    expect(second.examined).toBe(0);
    expect(refunds()).toBe(1);
    expect((await inner.get({ scope: "default", key: "k" }, clock.now()))?.status).toBe("failed");
  });
});
