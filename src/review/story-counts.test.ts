import { describe, expect, it } from "vitest";
import { idempotent } from "../core/idempotent.js";
import { memoryStore } from "../core/memory-store.js";
import type { IdempotencyStore } from "../core/store.js";
import { fakeClock } from "../testing/fake-clock.js";
import { readRecordStory, resolveRecord, reviewCounts, reviewQueue } from "./index.js";

const hourMs = 60 * 60 * 1000;

/** A mailer whose first call per key throws after its effect may have happened: its outcome is unknown. */
function flakyMailer(store: IdempotencyStore, clock = fakeClock()) {
  const failed = new Set<string>();
  const tool = idempotent(
    async (args: { to: string }) => {
      if (!failed.has(args.to)) {
        failed.add(args.to);
        throw new Error("socket hang up");
      }
      return { sent: args.to };
    },
    { name: "send_email", store, effect: "irreversible", clock },
  );
  return { tool, clock };
}

/** An in-progress record whose worker stopped: its lease passes and nobody settles it. */
async function abandonedClaim(store: IdempotencyStore, key: string, now: number) {
  await store.claim({
    scope: "default",
    key,
    tool: "charge_card",
    fingerprint: "f",
    token: `tok-${key}-0000`,
    leaseMs: 1000,
    ttlMs: 30 * 24 * hourMs,
    now,
  });
}

describe("readRecordStory", () => {
  it("shows the arguments' preview of a tool that keeps one", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const tool = idempotent(
      async (_args: { to: string }) => {
        throw new Error("socket hang up");
      },
      { name: "send_email", store, effect: "irreversible", clock, reviewPreview: true },
    );
    await tool({ to: "ada@example.com" }, { key: "k" }).catch(() => undefined);
    const story = await readRecordStory({ store, scope: "default", key: "k", clock });
    expect(story.record?.preview).toBe('{"to":"ada@example.com"}');
  });

  it("tells an unknown record's fields, why it is unknown and its version, with an empty trail", async () => {
    const store = memoryStore();
    const { tool, clock } = flakyMailer(store);
    await tool({ to: "ada@example.com" }, { key: "k1" }).catch(() => undefined);
    const { record, trail } = await readRecordStory({ store, scope: "default", key: "k1", clock });
    const [item] = (await reviewQueue({ store, clock })).items;
    expect(record).toMatchObject({
      tool: "send_email",
      status: "unknown",
      reason: "unknown",
      needsReview: true,
      attempts: 1,
      failure: { message: "socket hang up" },
      version: item?.version,
      sealed: false,
    });
    expect(trail).toEqual([]);
  });

  it("after a completed resolution, shows who resolved it and the trail entry", async () => {
    const store = memoryStore();
    const { tool, clock } = flakyMailer(store);
    await tool({ to: "ada@example.com" }, { key: "k1" }).catch(() => undefined);
    await resolveRecord({
      store,
      clock,
      scope: "default",
      key: "k1",
      as: "completed",
      result: { sent: "ada@example.com" },
      evidence: "provider log: delivered",
      by: "ops",
      via: "console",
    });
    const { record, trail } = await readRecordStory({ store, scope: "default", key: "k1", clock });
    expect(record).toMatchObject({ status: "completed", needsReview: false });
    expect(record?.resolvedByOperator).toEqual({
      by: "ops",
      at: new Date(clock.now()).toISOString(),
      evidence: "provider log: delivered",
    });
    expect(trail.map((e) => [e.as, e.by, e.via, e.state, e.before.status])).toEqual([
      ["completed", "ops", "console", "applied", "unknown"],
    ]);
  });

  it("keeps the trail of a record a not-executed resolution freed", async () => {
    const store = memoryStore();
    const { tool, clock } = flakyMailer(store);
    await tool({ to: "ada@example.com" }, { key: "k1" }).catch(() => undefined);
    await resolveRecord({
      store,
      clock,
      scope: "default",
      key: "k1",
      as: "not_executed",
      evidence: "nothing in the provider's log",
      by: "ops",
    });
    const story = await readRecordStory({ store, scope: "default", key: "k1", clock });
    expect([story.record, story.trail.map((e) => e.as)]).toEqual([undefined, ["not_executed"]]);
  });

  it("a failed resolution shows the failure repeats get and who recorded it", async () => {
    const store = memoryStore();
    const { tool, clock } = flakyMailer(store);
    await tool({ to: "ada@example.com" }, { key: "k1" }).catch(() => undefined);
    await resolveRecord({
      store,
      clock,
      scope: "default",
      key: "k1",
      as: "failed",
      error: "mailbox does not exist",
      evidence: "bounce seen",
      by: "ops",
    });
    const { record } = await readRecordStory({ store, scope: "default", key: "k1", clock });
    expect([record?.status, record?.failure?.message, record?.resolvedByOperator?.by]).toEqual([
      "failed",
      "mailbox does not exist",
      "ops",
    ]);
  });

  it("refuses a call without a key", async () => {
    await expect(readRecordStory({ store: memoryStore(), scope: "default", key: "" })).rejects.toThrow(/key/);
  });
});

describe("reviewCounts", () => {
  it("buckets what needs a person by age, tells unknown from stale, and counts takeovers", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const start = clock.now();
    const { tool } = flakyMailer(store, clock);
    await tool({ to: "old@example.com" }, { key: "old" }).catch(() => undefined); // 8 days old at the end
    await clock.advance(6 * 24 * hourMs);
    await abandonedClaim(store, "two-days", clock.now());
    await clock.advance(24 * hourMs);
    await tool({ to: "fresh@example.com" }, { key: "fresh" }).catch(() => undefined);
    await clock.advance(2 * hourMs);
    await abandonedClaim(store, "recent", clock.now());
    await clock.advance(2 * 1000);
    // A key that failed, then ran again after a not-executed resolution: a second attempt, and done.
    await tool({ to: "done@example.com" }, { key: "done" }).catch(() => undefined);
    await resolveRecord({
      store,
      clock,
      scope: "default",
      key: "done",
      as: "not_executed",
      evidence: "never sent",
      by: "ops",
    });
    await tool({ to: "done@example.com" }, { key: "done" });
    const counts = await reviewCounts({ store, clock });
    expect(clock.now() - start).toBeGreaterThan(7 * 24 * hourMs);
    expect(counts.needingReviewByAge).toEqual({ under_1h: 1, "1h_to_24h": 1, "1d_to_7d": 1, over_7d: 1 });
    expect([counts.unknown, counts.stale]).toEqual([2, 2]);
    expect(counts.resolutionsPerDay).toEqual([
      {
        day: new Date(clock.now()).toISOString().slice(0, 10),
        total: 1,
        byAs: { completed: 0, failed: 0, not_executed: 1 },
        interrupted: 0,
      },
    ]);
    // The freed key's new claim starts again at attempt 1; the queue's records have one attempt each.
    expect(counts.takeovers).toBe(0);
  });

  it("counts a record claimed again after its lease passed as a takeover", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    await abandonedClaim(store, "k", clock.now());
    await clock.advance(5000);
    await store.takeover({
      scope: "default",
      key: "k",
      fromToken: "tok-k-0000",
      token: "tok-k-0001",
      leaseMs: 1000,
      ttlMs: 24 * hourMs,
      now: clock.now(),
    });
    expect((await reviewCounts({ store, clock })).takeovers).toBe(1);
  });
});
