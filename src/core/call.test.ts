/**
 * The fenced store operations every path shares, seen from outside: what a store failure turns into, how
 * long a release is retried, and the events a call reports.
 */
import { describe, expect, it, vi } from "vitest";
import { type FakeClock, fakeClock } from "../testing/fake-clock.js";
import { unreachable } from "./call.js";
import { LeaseLostError, StoreUnavailableError } from "./errors.js";
import type { IdempotencyEvent } from "./events.js";
import { fingerprint } from "./fingerprint.js";
import { idempotent } from "./idempotent.js";
import { memoryStore } from "./memory-store.js";
import type { Effect } from "./options.js";
import { notExecuted } from "./outcomes.js";
import type { IdempotencyStore } from "./store.js";

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected the call to fail");
}

/** A tool on `store` whose events are kept, with a fake clock. */
function observed<R>(
  store: IdempotencyStore,
  fn: () => R | Promise<R>,
  options: { effect?: Effect; leaseMs?: number } = {},
) {
  const clock = fakeClock();
  const events: IdempotencyEvent[] = [];
  const tool = idempotent(async () => fn(), {
    name: "send_email",
    store,
    clock,
    waitMs: 0,
    onEvent: (e) => events.push(e),
    ...options,
  });
  return { tool, clock, events, types: () => events.map((e) => e.type) };
}

/** What a store_error event says: the operation that failed and the store's own error as the cause. */
function expectStoreError(
  event: IdempotencyEvent | undefined,
  operation: string,
  cause: Error,
  consequence = "The tool did not run.",
) {
  expect(event?.type).toBe("store_error");
  expect(event?.error).toBeInstanceOf(StoreUnavailableError);
  const error = event?.error as StoreUnavailableError;
  expect(error.message).toBe(
    `The idempotency store failed during ${operation}: ${cause.message}. ${consequence}`,
  );
  expect(error.cause).toBe(cause);
}

describe("settling", () => {
  it("tries a settle the store does not answer three times, reporting each failure, and still returns the result", async () => {
    const inner = memoryStore();
    const down = new Error("connection refused");
    let settles = 0;
    const store: IdempotencyStore = {
      ...inner,
      settle: async () => {
        settles++;
        throw down;
      },
    };
    const { tool, events, types, clock } = observed(store, () => "sent");
    expect((await tool({}, { key: "k" })).result).toBe("sent");
    expect(settles).toBe(3);
    expect(types()).toEqual(["run", "store_error", "store_error", "store_error", "completed"]);
    for (const event of events.filter((e) => e.type === "store_error"))
      expectStoreError(event, "settle", down, "The tool ran; its outcome may not be recorded.");
    // The record stays in progress: its lease decides what a repeat gets.
    expect((await inner.get({ scope: "default", key: "k" }, clock.now()))?.status).toBe("in_progress");
  });

  it("reports lease_lost, with no cause, when another caller took the record while the tool ran", async () => {
    const inner = memoryStore();
    // Every renewal is refused: the claim is lost at the first one, and another caller takes over.
    const store: IdempotencyStore = { ...inner, renew: async () => false };
    let finish!: () => void;
    const held = new Promise<void>((resolve) => {
      finish = resolve;
    });
    let runs = 0;
    const { tool, events, clock } = observed(
      store,
      async () => {
        runs++;
        if (runs === 1) await held;
        return `run ${runs}`;
      },
      { effect: "native-key", leaseMs: 3_000 },
    );
    const first = rejection(tool({}, { key: "k" }));
    await clock.advance(3_000);
    expect((await tool({}, { key: "k" })).result).toBe("run 2");
    finish();
    const error = await first;
    expect(error).toBeInstanceOf(LeaseLostError);
    expect(error).not.toHaveProperty("cause");
    const lost = events.filter((e) => e.type === "lease_lost");
    expect(lost).toHaveLength(1);
    expect(lost[0]).toMatchObject({ attempt: 1, error });
  });
});

describe("taking over a stale claim", () => {
  /** Leave an abandoned claim of this tool's call on "k", and let its lease pass. */
  async function abandoned(store: IdempotencyStore, clock: FakeClock) {
    await store.claim({
      scope: "default",
      key: "k",
      tool: "send_email",
      fingerprint: fingerprint({}, { bigint: "reject" }),
      token: "crashed-worker",
      leaseMs: 1_000,
      ttlMs: 60_000,
      now: clock.now(),
    });
    await clock.advance(2_000);
  }

  it("looks again when the record vanished under its takeover, and runs on a fresh claim", async () => {
    const inner = memoryStore();
    // Another caller deletes the record just before the compare-and-swap: nothing is taken, nothing is there.
    const store: IdempotencyStore = {
      ...inner,
      takeover: async (request) => {
        await inner.delete({ scope: request.scope, key: request.key });
        return inner.takeover(request);
      },
    };
    let runs = 0;
    const { tool, clock, types } = observed(store, () => ++runs, { effect: "native-key" });
    await abandoned(inner, clock);
    expect(await tool({}, { key: "k" })).toMatchObject({ result: 1, was_replay: false });
    expect(runs).toBe(1);
    expect(types()).toEqual(["run", "completed"]);
  });

  it("fails with store_unavailable naming the takeover when the store does not answer it", async () => {
    const inner = memoryStore();
    const down = new Error("connection reset");
    const store: IdempotencyStore = { ...inner, takeover: () => Promise.reject(down) };
    let runs = 0;
    const { tool, clock, events } = observed(store, () => ++runs, { effect: "native-key" });
    await abandoned(inner, clock);
    const error = await rejection(tool({}, { key: "k" }));
    expect(runs).toBe(0);
    expectStoreError(events.at(-1), "takeover", down);
    expect(events.at(-1)?.error).toBe(error);
  });
});

describe("releasing a claim", () => {
  it("reports the release when the tool says it did not run", async () => {
    const { tool, events } = observed(memoryStore(), () => {
      throw notExecuted(new Error("mailbox full"));
    });
    expect(await rejection(tool({}, { key: "k" }))).toMatchObject({ message: "mailbox full" });
    expect(events.at(-1)).toMatchObject({ type: "released", attempt: 1 });
  });

  it("reports a release the store does not answer, and passes the tool's error on", async () => {
    const down = new Error("store unreachable");
    const store: IdempotencyStore = { ...memoryStore(), release: () => Promise.reject(down) };
    const { tool, events, types } = observed(store, () => {
      throw notExecuted(new Error("mailbox full"));
    });
    expect(await rejection(tool({}, { key: "k" }))).toMatchObject({ message: "mailbox full" });
    expect(types()).toEqual(["run", "store_error"]);
    expectStoreError(events[1], "release", down, "The key stays claimed until its lease passes.");
  });
});

describe("releasing a claim whose reply was lost", () => {
  /** A store whose first claim lands but throws, and whose first `failures` releases throw. */
  function lostClaim(failures: number) {
    const inner = memoryStore();
    const down = new Error("store unreachable");
    const releases: number[] = [];
    let claims = 0;
    let clock!: FakeClock;
    const store: IdempotencyStore = {
      ...inner,
      async claim(request) {
        const answer = await inner.claim(request);
        if (++claims === 1) throw new Error("connection reset after the claim was written");
        return answer;
      },
      async release(request) {
        releases.push(clock.now());
        if (releases.length <= failures) throw down;
        return inner.release(request);
      },
    };
    return { inner, store, down, releases, setClock: (c: FakeClock) => (clock = c) };
  }

  it("retries from 100 ms, doubling up to 5 s, until the store answers", async () => {
    const lost = lostClaim(8);
    const { tool, clock, events, types } = observed(lost.store, () => "sent");
    lost.setClock(clock);
    const start = clock.now();
    expect(await rejection(tool({}, { key: "k" }))).toBeInstanceOf(StoreUnavailableError);
    await clock.advance(60_000);
    expect(lost.releases.map((at) => at - start)).toEqual([
      0, 100, 300, 700, 1_500, 3_100, 6_300, 11_300, 16_300,
    ]);
    expect(types()).toEqual(["store_error", ...Array(8).fill("store_error"), "released"]);
    for (const event of events.slice(1, -1)) expectStoreError(event, "release", lost.down);
    expect(await lost.inner.get({ scope: "default", key: "k" }, clock.now())).toBeUndefined();
  });

  it("gives up a minute past the lease when the store never answers", async () => {
    const lost = lostClaim(Number.POSITIVE_INFINITY);
    const { tool, clock } = observed(lost.store, () => "sent", { leaseMs: 1_200 });
    lost.setClock(clock);
    const start = clock.now();
    await rejection(tool({}, { key: "k" }));
    await clock.advance(10 * 60_000);
    const retries = lost.releases.slice(1).map((at) => at - start);
    // 100, 200, 400, … 3,200 ms apart, then every 5 s, while the time counted stays under lease + 60 s.
    expect(retries.slice(0, 7)).toEqual([100, 300, 700, 1_500, 3_100, 6_300, 11_300]);
    expect(retries).toHaveLength(16);
    expect(retries.at(-1)).toBe(56_300);
  });
});

describe("events", () => {
  it("carries exactly what happened: the call, the time by the clock, and the attempt only when there is one", async () => {
    const down = new Error("store unreachable");
    const store: IdempotencyStore = { ...memoryStore(), release: () => Promise.reject(down) };
    const { tool, clock, events } = observed(
      store,
      async () => {
        await clock.sleep(250);
        throw notExecuted(new Error("mailbox full"));
      },
      { effect: "native-key" },
    );
    const start = clock.now();
    const call = rejection(tool({}, { key: "k" }));
    await clock.advance(250);
    await call;
    const callId = events[0]?.callId;
    const common = { callId, tool: "send_email", effect: "native-key", scope: "default", key: "k" };
    expect(events).toStrictEqual([
      { type: "run", ...common, at: start, durationMs: 0, attempt: 1 },
      {
        type: "store_error",
        ...common,
        at: start + 250,
        durationMs: 250,
        error: expect.any(StoreUnavailableError),
      },
    ]);
  });

  it("gives calls in different processes (module instances here) different ids: a random part, then a counter", async () => {
    const ids: string[] = [];
    for (let instance = 0; instance < 2; instance++) {
      vi.resetModules();
      const fresh = await import("./idempotent.js");
      const tool = fresh.idempotent(async () => 1, {
        name: "t",
        store: memoryStore(),
        clock: fakeClock(),
        onEvent: (e) => ids.push(e.callId),
      });
      await tool({}, { key: "k" });
    }
    expect(ids).toHaveLength(4);
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{12}-[0-9a-z]+$/);
    expect(ids[0]).toBe(ids[1]);
    expect(ids[2]).not.toBe(ids[0]);
  });
});

describe("an action no step carries out", () => {
  it("throws, naming the action, so that nothing more runs", () => {
    expect(() => unreachable("send_twice" as never)).toThrow(
      new Error('idempotool: no step carries out "send_twice"; nothing more runs.'),
    );
  });
});
