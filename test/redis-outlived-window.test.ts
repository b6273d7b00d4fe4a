/**
 * A call that outlives its lease and its window without renewing (a worker paused by a long GC or SIGSTOP),
 * on Redis judged by its own clock: the contract lets its owner settle it while nobody claimed the key
 * since, and a repeat then replays the result. Redis deletes keys by its own clock, which no test can move:
 * here a store whose clock is hours on (`clockOffsetMs`) stands for Redis later, and `expireRecordsAt`
 * deletes what Redis would have deleted by then.
 */
import { describe, expect, it } from "vitest";
import { type IdempotencyStore, idempotent, isIdempotencyError } from "../src/index.js";
import { redisStore } from "../src/redis/index.js";
import { recordName } from "../src/redis/record-key.js";
import { fakeClock } from "../src/testing/index.js";
import { expireRecordsAt, serverNow } from "./fixtures/redis-helpers.js";
import { redisTestFile } from "./fixtures/redis-test-file.js";

const { client, fresh } = redisTestFile("outlived");

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const ttlMs = HOUR;

/** A store whose calls go to `first`, then to whichever store `moveTo` names: Redis, later. */
function movingStore(first: IdempotencyStore) {
  let current = first;
  const store: IdempotencyStore = {
    claim: (request) => current.claim(request),
    takeover: (request) => current.takeover(request),
    settle: (request) => current.settle(request),
    renew: (request) => current.renew(request),
    release: (request) => current.release(request),
    get: (id, now) => current.get(id, now),
    delete: (id) => current.delete(id),
    list: (query) => current.list(query),
    purge: (request) => current.purge(request),
  };
  return {
    store,
    moveTo(next: IdempotencyStore) {
      current = next;
    },
  };
}

/**
 * A `send_email` tool on `store` whose runs wait until `finish()`: its fake clock never moves while one
 * waits, so it never renews its lease, as a paused worker would not.
 */
function pausedTool(store: IdempotencyStore) {
  const sent: string[] = [];
  let finish = () => {};
  let started = () => {};
  const running = new Promise<void>((resolve) => {
    started = resolve;
  });
  const send = idempotent(
    async (args: { to: string }) => {
      sent.push(args.to);
      started();
      await new Promise<void>((resolve) => {
        finish = resolve;
      });
      return { sent: args.to };
    },
    { name: "send_email", store, clock: fakeClock(Date.now()), ttlMs, waitMs: 0 },
  );
  return { send, sent, running, finish: () => finish() };
}

/** Redis `ms` later: a store judging by a clock that far on, once Redis has deleted what it would have. */
async function redisLater(prefix: string, ms: number) {
  await expireRecordsAt(client, prefix, (await serverNow(client)) + ms);
  return redisStore({ client, prefix, clockOffsetMs: ms });
}

describe("Redis: a call that outlives its lease and its window without renewing", () => {
  for (const [label, options] of [
    ["a plain claim (a stub)", {}],
    ["a script claim", { clockOffsetMs: () => 0 }],
  ] as const) {
    it(`records its result late, and a repeat replays it: the tool runs once (${label})`, async () => {
      const prefix = await fresh();
      const moving = movingStore(redisStore({ client, prefix, ...options }));
      const paused = pausedTool(moving.store);
      const call = paused.send({ to: "alice" }, { key: "k" });
      await paused.running;
      // Paused through its lease (60 s) and its window (an hour after it).
      const later = await redisLater(prefix, 3 * HOUR);
      moving.moveTo(later);
      expect(await later.get({ scope: "default", key: "k" }, 0), "past its window: absent").toBeUndefined();
      paused.finish();
      expect(await call).toMatchObject({ result: { sent: "alice" }, was_replay: false });

      const again = pausedTool(later);
      expect(await again.send({ to: "alice" }, { key: "k" })).toMatchObject({
        result: { sent: "alice" },
        was_replay: true,
      });
      expect([...paused.sent, ...again.sent]).toEqual(["alice"]);
    });
  }

  it("is fenced out by a claim made after its window: lease_lost, and the record stays the new caller's", async () => {
    const prefix = await fresh();
    const moving = movingStore(redisStore({ client, prefix }));
    const paused = pausedTool(moving.store);
    const call = paused.send({ to: "alice" }, { key: "k" }).catch((error: unknown) => error);
    await paused.running;
    const later = await redisLater(prefix, 3 * HOUR);
    moving.moveTo(later);
    // The window has passed: a repeat is a new call, and runs.
    const other = pausedTool(later);
    const otherCall = other.send({ to: "alice" }, { key: "k" });
    await other.running;
    other.finish();
    expect(await otherCall).toMatchObject({ was_replay: false });
    paused.finish();
    expect(isIdempotencyError(await call, "lease_lost")).toBe(true);
    const record = await later.get({ scope: "default", key: "k" }, 0);
    expect(record).toMatchObject({ status: "completed", attempts: 1, result: '{"sent":"alice"}' });
    expect(record!.createdAt).toBeGreaterThan(Date.now() + 2 * HOUR);
  });

  it("keeps the key of a record in progress or unknown a day past its window, and no longer", async () => {
    const prefix = await fresh();
    const store = redisStore({ client, prefix });
    const claim = { scope: "default", tool: "send_email", fingerprint: "f", leaseMs: 1_000, ttlMs, now: 0 };
    await store.claim({ ...claim, key: "in-progress", token: "a" });
    await store.claim({ ...claim, key: "unknown", token: "a" });
    const unknown = { scope: "default", key: "unknown", token: "a", result: null, ttlMs, now: 0 };
    await store.settle({ ...unknown, status: "unknown", error: "timeout" });
    const name = (key: string) => recordName(prefix, "default", key);

    for (const key of ["in-progress", "unknown"]) {
      const record = (await store.get({ scope: "default", key }, 0))!;
      expect(await client.pexpiretime(name(key)), key).toBe(record.expiresAt - 1 + DAY);
    }
    // A day past their windows, Redis has deleted them: an owner that comes back later is refused.
    const dayLater = await redisLater(prefix, ttlMs + 1_000 + DAY);
    expect(await client.exists(name("in-progress"), name("unknown"))).toBe(0);
    expect(await dayLater.settle({ ...unknown, status: "completed", error: null })).toBeNull();
  });
});
