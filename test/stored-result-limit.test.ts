/**
 * A store that declares `maxStoredResultBytes` (as dynamoStore does, for DynamoDB's item limit) refuses a
 * larger result, the way a real one would: every path that records a completed call must then keep the
 * record completed without the result (`result_too_large`), never leave it in progress for a repeat to
 * find, and never send the store a result it said it cannot keep. Likewise every path that records a
 * failure keeps it failed (or unknown) without its data, its message cut short if need be.
 */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  definitiveFailure,
  fingerprint,
  type IdempotencyRecord,
  type IdempotencyStore,
  idempotent,
  isIdempotencyError,
  memoryStore,
  OutcomeUnknownError,
  ReplayedFailureError,
  ResultTooLargeError,
  tieredStore,
} from "../src/index.js";
import { checkpoint } from "../src/ops/index.js";
import { reconcileOnce } from "../src/reconcile/index.js";
import { fakeClock } from "../src/testing/index.js";
import { rejection } from "./fixtures/tools.js";

const limit = 64;

/** A memory store that keeps results of up to `maxBytes` and rejects a larger settle outright. */
function limitedStore(maxBytes = limit) {
  const inner = memoryStore();
  const refused: number[] = [];
  const store: IdempotencyStore = {
    ...inner,
    maxStoredResultBytes: maxBytes,
    settle: async (request) => {
      // A failure is kept in `error`, under the same limit.
      const kept = request.status === "completed" ? request.result : request.error;
      const size = kept === null ? 0 : Buffer.byteLength(kept, "utf8");
      if (size > maxBytes) {
        refused.push(size);
        throw new Error(`item too large: ${size} bytes`);
      }
      return inner.settle(request);
    },
  };
  return { store, refused };
}

/** The record is completed, keeps no result, and its note says result_too_large against the store's limit. */
function expectKeptWithoutResult(record: IdempotencyRecord | undefined, sizeBytes: number) {
  expect(record?.status).toBe("completed");
  expect(record?.result).toBeNull();
  expect(JSON.parse(record?.error ?? "null")).toEqual({
    code: "result_too_large",
    sizeBytes,
    maxBytes: limit,
  });
}

// "x" repeated n times is n + 2 bytes as JSON.
const exactly = (bytes: number) => "x".repeat(bytes - 2);

describe("a store's maxStoredResultBytes, in idempotent()", () => {
  it("keeps a result of exactly the store's limit and replays it", async () => {
    const { store, refused } = limitedStore();
    let runs = 0;
    const tool = idempotent(
      async () => {
        runs++;
        return exactly(limit);
      },
      { name: "render", store, clock: fakeClock() },
    );
    await tool({}, { key: "k" });
    const replay = await tool({}, { key: "k" });
    expect(replay).toMatchObject({ was_replay: true, result: exactly(limit) });
    expect(runs).toBe(1);
    expect(refused).toEqual([]);
  });

  it("records a larger result as completed without it: the first caller gets it, a repeat gets result_too_large and never runs", async () => {
    const { store, refused } = limitedStore();
    const clock = fakeClock();
    let runs = 0;
    const tool = idempotent(
      async () => {
        runs++;
        return exactly(limit + 1);
      },
      { name: "render", store, clock },
    );
    const first = await tool({}, { key: "k" });
    expect(first).toMatchObject({ was_replay: false, result: exactly(limit + 1) });
    expectKeptWithoutResult(await store.get({ scope: "default", key: "k" }, clock.now()), limit + 1);
    const replay = await rejection(tool({}, { key: "k" }));
    expect(replay).toBeInstanceOf(ResultTooLargeError);
    expect(replay).toMatchObject({ code: "result_too_large", sizeBytes: limit + 1, maxBytes: limit });
    // The store's limit applied, not maxResultBytes (1 MiB): the message names both.
    expect((replay as Error).message).toMatch(
      /over the 64-byte limit \(maxResultBytes, or the store's maxStoredResultBytes/,
    );
    expect(runs).toBe(1);
    expect(refused, "the store was sent a result it said it cannot keep").toEqual([]);
  });

  it("counts the sealed text with encryption, which is larger than the result", async () => {
    const { store, refused } = limitedStore();
    const clock = fakeClock();
    let runs = 0;
    const tool = idempotent(
      async () => {
        runs++;
        return exactly(limit - 10);
      },
      { name: "render", store, clock, encryption: { keys: { k1: randomBytes(32) }, current: "k1" } },
    );
    await tool({}, { key: "k" });
    const record = await store.get({ scope: "default", key: "k" }, clock.now());
    expect(record?.status).toBe("completed");
    expect(record?.result).toBeNull();
    expect(isIdempotencyError(await rejection(tool({}, { key: "k" })), "result_too_large")).toBe(true);
    expect(runs).toBe(1);
    expect(refused).toEqual([]);
  });

  it("holds through tieredStore(), which declares its durable store's limit", async () => {
    const { store: durable, refused } = limitedStore();
    const store = tieredStore({ store: durable });
    expect(store.maxStoredResultBytes).toBe(limit);
    const clock = fakeClock();
    let runs = 0;
    const tool = idempotent(
      async () => {
        runs++;
        return exactly(limit + 1);
      },
      { name: "render", store, clock },
    );
    await tool({}, { key: "k" });
    expectKeptWithoutResult(await durable.get({ scope: "default", key: "k" }, clock.now()), limit + 1);
    expect(isIdempotencyError(await rejection(tool({}, { key: "k" })), "result_too_large")).toBe(true);
    expect(runs).toBe(1);
    expect(refused).toEqual([]);
  });
});

describe("a store's maxStoredResultBytes, in checkpoint()", () => {
  it("records a larger result as completed without it, and a repeat checkpoint says result_too_large", async () => {
    const { store, refused } = limitedStore();
    const clock = fakeClock();
    const cp = await checkpoint(store, { tool: "render", key: "k", args: {}, clock });
    await cp.complete(exactly(limit + 1));
    expectKeptWithoutResult(await store.get({ scope: "default", key: "k" }, clock.now()), limit + 1);
    await expect(checkpoint(store, { tool: "render", key: "k", args: {}, clock })).rejects.toMatchObject({
      code: "result_too_large",
      maxBytes: limit,
    });
    expect(refused).toEqual([]);
  });

  it("keeps a result of exactly the store's limit", async () => {
    const { store } = limitedStore();
    const clock = fakeClock();
    const cp = await checkpoint(store, { tool: "render", key: "k", args: {}, clock });
    await cp.complete(exactly(limit));
    const again = await checkpoint(store, { tool: "render", key: "k", args: {}, clock });
    expect(again.shouldRun).toBe(false);
    expect(again.replay?.result).toBe(exactly(limit));
  });
});

describe("a store's maxStoredResultBytes, in the reconciler", () => {
  it("records a result its verify hook found as completed without it when it is over the store's limit", async () => {
    const { store, refused } = limitedStore();
    const clock = fakeClock();
    await store.claim({
      scope: "default",
      key: "k",
      tool: "render",
      fingerprint: fingerprint({}),
      token: "t-crashed",
      leaseMs: 1_000,
      ttlMs: 86_400_000,
      now: clock.now(),
    });
    await clock.advance(1_001);
    const summary = await reconcileOnce({
      store,
      clock,
      tools: { render: { verify: () => ({ status: "completed", result: exactly(limit + 1) }) } },
    });
    expect(summary).toMatchObject({ examined: 1, errors: 0 });
    expectKeptWithoutResult(await store.get({ scope: "default", key: "k" }, clock.now()), limit + 1);
    expect(refused).toEqual([]);
  });
});

/** Room for a failure's name, message, code and the note on its data, but not for the data. */
const failureLimit = 300;
const declined = () => Object.assign(new Error("card declined"), { code: "card_declined" });
const bigData = { log: "x".repeat(failureLimit) };

/** The record is failed, within the store's limit, and keeps no data but a note on it. */
function expectFailedWithoutData(record: IdempotencyRecord | undefined) {
  expect(record?.status).toBe("failed");
  expect(Buffer.byteLength(record?.error ?? "", "utf8")).toBeLessThanOrEqual(failureLimit);
  const stored = JSON.parse(record?.error ?? "null");
  expect(stored).not.toHaveProperty("data");
  expect(stored).toMatchObject({ dataNotKept: { code: "result_too_large", maxBytes: failureLimit } });
}

function expectReplayedWithoutData(error: unknown, fields: Record<string, unknown> = {}) {
  expect(error).toBeInstanceOf(ReplayedFailureError);
  expect(error).toMatchObject({
    message: "card declined",
    code: "card_declined",
    data: undefined,
    data_not_kept: { code: "result_too_large", maxBytes: failureLimit },
    ...fields,
  });
}

describe("a store's maxStoredResultBytes, for failures", () => {
  it("records a definitive failure without data it cannot keep: the first caller gets its error, a repeat the failure without the data", async () => {
    const { store, refused } = limitedStore(failureLimit);
    const clock = fakeClock();
    let runs = 0;
    const tool = idempotent(
      async () => {
        runs++;
        throw definitiveFailure(declined(), bigData);
      },
      { name: "charge", store, clock },
    );
    expect(await rejection(tool({}, { key: "k" }))).toMatchObject({ code: "card_declined" });
    expectFailedWithoutData(await store.get({ scope: "default", key: "k" }, clock.now()));
    expectReplayedWithoutData(await rejection(tool({}, { key: "k" })));
    expect(runs).toBe(1);
    expect(refused, "the store was sent a failure it said it cannot keep").toEqual([]);
  });

  it("keeps data that fits the store's limit", async () => {
    const { store } = limitedStore(failureLimit);
    const tool = idempotent(
      async () => {
        throw definitiveFailure(declined(), { last4: "4242" });
      },
      { name: "charge", store, clock: fakeClock() },
    );
    await rejection(tool({}, { key: "k" }));
    const replayed = await rejection(tool({}, { key: "k" }));
    expect(replayed).toMatchObject({ data: { last4: "4242" }, data_not_kept: undefined });
  });

  it("hands back what the record keeps when verify finds a failure too large for it", async () => {
    const { store, refused } = limitedStore(failureLimit);
    const clock = fakeClock();
    let runs = 0;
    const tool = idempotent(
      async () => {
        runs++;
        throw new Error("socket hang up");
      },
      {
        name: "charge",
        store,
        clock,
        effect: "irreversible",
        verify: () => ({ status: "failed", error: declined(), data: bigData }),
      },
    );
    expect(await rejection(tool({}, { key: "k" }))).toBeInstanceOf(OutcomeUnknownError);
    // The repeat asks verify, records its failure, and hands it back as the record keeps it.
    expectReplayedWithoutData(await rejection(tool({}, { key: "k" })));
    expectFailedWithoutData(await store.get({ scope: "default", key: "k" }, clock.now()));
    expectReplayedWithoutData(await rejection(tool({}, { key: "k" })));
    expect(runs).toBe(1);
    expect(refused).toEqual([]);
  });

  it("records an unknown outcome whose error message is over the limit, cut short, so repeats fail closed at once", async () => {
    const { store, refused } = limitedStore(failureLimit);
    const clock = fakeClock();
    let runs = 0;
    const tool = idempotent(
      async () => {
        runs++;
        throw new Error(`upstream said: ${"e".repeat(1_000)}`);
      },
      { name: "charge", store, clock, effect: "irreversible" },
    );
    expect(await rejection(tool({}, { key: "k" }))).toBeInstanceOf(OutcomeUnknownError);
    const record = await store.get({ scope: "default", key: "k" }, clock.now());
    expect(record?.status).toBe("unknown");
    expect(JSON.parse(record?.error ?? "null").message).toMatch(/^upstream said: e+… \[message cut short/);
    expect(await rejection(tool({}, { key: "k" }))).toBeInstanceOf(OutcomeUnknownError);
    expect(runs).toBe(1);
    expect(refused).toEqual([]);
  });

  it("holds in checkpoint(): fail and unknown record what the store can keep", async () => {
    const { store, refused } = limitedStore(failureLimit);
    const clock = fakeClock();
    const cp = await checkpoint(store, { tool: "charge", key: "k", args: {}, clock });
    await cp.fail(declined(), bigData);
    expectFailedWithoutData(await store.get({ scope: "default", key: "k" }, clock.now()));
    expectReplayedWithoutData(
      await rejection(checkpoint(store, { tool: "charge", key: "k", args: {}, clock })),
    );
    const other = await checkpoint(store, { tool: "charge", key: "u", args: {}, clock });
    await other.unknown(new Error("u".repeat(1_000)));
    expect((await store.get({ scope: "default", key: "u" }, clock.now()))?.status).toBe("unknown");
    expect(refused).toEqual([]);
  });

  it("holds in the reconciler, for a failure its hook found and for what a compensation returned", async () => {
    const { store, refused } = limitedStore(failureLimit);
    const clock = fakeClock();
    for (const key of ["failed", "compensated"]) {
      await store.claim({
        scope: "default",
        key,
        tool: "charge",
        fingerprint: fingerprint({}),
        token: `t-${key}`,
        leaseMs: 1_000,
        ttlMs: 86_400_000,
        now: clock.now(),
      });
    }
    await clock.advance(1_001);
    const summary = await reconcileOnce({
      store,
      clock,
      tools: {
        charge: {
          verify: (record) =>
            record.key === "failed"
              ? { status: "failed", error: declined(), data: bigData }
              : { status: "compensate", reason: "refund" },
          compensate: () => bigData,
        },
      },
    });
    expect(summary).toMatchObject({ examined: 2, errors: 0 });
    expectFailedWithoutData(await store.get({ scope: "default", key: "failed" }, clock.now()));
    expectFailedWithoutData(await store.get({ scope: "default", key: "compensated" }, clock.now()));
    expect(refused).toEqual([]);
  });
});
