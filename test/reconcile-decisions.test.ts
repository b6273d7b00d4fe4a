/** The reconciler's decisions that need no real store: failing hooks, compensation, options, limits, its lease. */
import { describe, expect, it, vi } from "vitest";
import { fingerprint, type IdempotencyStore, isIdempotencyError, memoryStore } from "../src/index.js";
import { checkpoint } from "../src/ops/index.js";
import { type ReconcileOutcome, reconcileOnce } from "../src/reconcile/index.js";
import { readTrail, resolveRecord, reviewQueue } from "../src/review/index.js";
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

  it("asks no hook when its takeover was answered a whole lease after it was sent: another may hold the record", async () => {
    const inner = memoryStore();
    const clock = fakeClock();
    await stale(inner, clock, ["k"]);
    const store: IdempotencyStore = {
      ...inner,
      takeover: async (request) => {
        const taken = await inner.takeover(request);
        await clock.advance(request.leaseMs);
        return taken;
      },
    };
    const { tools, refunds } = recallingTools();
    const summary = await reconcileOnce({ store, clock, tools, leaseMs: 5_000 });
    expect(summary).toMatchObject({ examined: 1, errors: 1, compensated: 0 });
    expect(summary.decisions[0]?.reason).toContain("the takeover was answered too late");
    expect(refunds()).toBe(0);
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

describe("what the reconciler leaves for the review queue", () => {
  it("keeps the hook's answer beside the record it puts back as unknown, and the earlier failure with it", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    await stale(store, clock, ["k", "thrown"]);
    await store.settle({
      scope: "default",
      key: "k",
      token: "t-k",
      status: "unknown",
      result: null,
      error: JSON.stringify({ name: "Error", message: "socket hang up" }),
      ttlMs: 86_400_000,
      now: clock.now(),
    });
    await reconcileOnce({
      store,
      clock,
      tools: {
        send_email: {
          verify: (record): ReconcileOutcome => {
            if (record.key === "thrown") throw new Error("provider timeout");
            return { status: "unknown", reason: "the provider keeps no log older than a day" };
          },
        },
      },
    });
    const queue = await reviewQueue({ store, clock });
    const byKey = Object.fromEntries(queue.items.map((item) => [item.key, item]));
    expect(byKey.k?.failure?.message).toBe("socket hang up");
    expect(byKey.k?.verify).toEqual({
      status: "unknown",
      reason: "the provider keeps no log older than a day",
      at: new Date(clock.now()).toISOString(),
    });
    expect(byKey.thrown?.verify).toMatchObject({ status: "error", reason: "provider timeout" });
    expect(byKey.thrown?.failure).toBeUndefined();
  });

  it("leaves operators' trail entries alone, even one left interrupted", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    await stale(store, clock, ["k"]);
    const failing: IdempotencyStore = { ...store, takeover: () => Promise.reject(new Error("reset")) };
    for (const name of ["claim", "settle", "get", "list", "release", "renew", "delete", "purge"] as const) {
      (failing as unknown as Record<string, unknown>)[name] = (
        store[name] as (...a: unknown[]) => unknown
      ).bind(store);
    }
    await expect(
      resolveRecord({
        store: failing,
        scope: "default",
        key: "k",
        as: "not_executed",
        evidence: "e",
        by: "o",
        clock,
        minStaleMs: 0,
      }),
    ).rejects.toMatchObject({ code: "store_unavailable" });
    await clock.advance(120_000);
    const verify = vi.fn((): ReconcileOutcome => ({ status: "not_executed" }));
    const summary = await reconcileOnce({ store, clock, tools: { send_email: { verify } } });
    expect(summary.examined).toBe(1);
    expect(summary.decisions.map((d) => d.key)).toEqual(["k"]);
    expect((await readTrail({ store, scope: "default", key: "k" })).map((e) => e.state)).toEqual([
      "interrupted",
    ]);
  });
});
