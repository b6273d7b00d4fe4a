/**
 * On every Redis row of test/fixtures/stores.ts (one per client the store drives), what the claim wrote is
 * read back from Redis itself: the key expires (PTTL > 0, within the record's lease and window and the day
 * an open record's key is kept past it), and a second claim on it changes neither its value nor its expiry. A client that drops the store's NX or PX (as
 * a GLIDE client drops an options object shaped for another client: a SET meant to be conditional and
 * expiring becomes neither) would pass a suite that only reads records back through the store, and fails
 * here: by both claim paths, the plain `SET … NX GET` and the claim script.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseStoreUrl } from "../src/cli/store-url.js";
import { recordName } from "../src/redis/record-key.js";
import { openRecordKeptMs } from "../src/redis/record-value.js";
import { claimRequest, settleRequest } from "./fixtures/claim-request.js";
import { reachable, testClient } from "./fixtures/redis-helpers.js";
import { openStoreUrl, type StoreService, URL_STORES } from "./fixtures/stores.js";

/** Every client the Redis rows reach Redis through, when IDEMPOTOOL_STORES picks none out. */
const everyRedisRow = ["redis-ioredis", "redis-node-redis", "redis-upstash", "redis-glide"];
const redisRows = URL_STORES.filter((row) => row.name.startsWith("redis-"));

describe("the Redis rows", () => {
  it("cover every client the store drives, unless IDEMPOTOOL_STORES picks some", () => {
    if (process.env.IDEMPOTOOL_STORES?.trim()) return;
    expect(redisRows.map((row) => row.name).sort()).toEqual([...everyRedisRow].sort());
  });
});

const admin = testClient();
beforeAll(() => reachable(admin));
afterAll(() => {
  admin.disconnect();
});

for (const row of redisRows) {
  describe(`${row.name}: a claim's key in Redis expires, and a second claim leaves it as it was`, () => {
    let service: StoreService;
    beforeAll(async () => {
      service = await row.start();
    }, 60_000);
    afterAll(() => service?.close());

    // A clock offset sends every claim through the script; without one, a claim is a plain SET … NX GET
    // where the client has one.
    for (const [path, clockOffsetMs] of [
      ["plain claim", undefined],
      ["claim script", "1"],
    ] as const) {
      it(`by the ${path}`, async () => {
        const url = new URL((await service.fresh("claim-expiry"))[0]!);
        if (clockOffsetMs !== undefined) url.searchParams.set("clockOffsetMs", clockOffsetMs);
        const parsed = parseStoreUrl(url.toString());
        if (parsed.kind !== "redis" || parsed.prefix === undefined)
          throw new Error(`${row.name} has no Redis prefix: ${url.toString()}`);
        const store = await openStoreUrl(url.toString());
        try {
          const request = claimRequest({ key: `expiry-${path}` });
          const name = recordName(parsed.prefix, request.scope, request.key);
          // An open record's key outlives its window by a day, so a call that outlives it can still settle.
          const life = request.leaseMs + request.ttlMs + openRecordKeptMs;

          expect((await store.claim(request)).claimed).toBe(true);
          const claimedValue = await admin.get(name);
          const claimedTtl = await admin.pttl(name);
          expect(claimedValue).not.toBeNull();
          expect(claimedTtl).toBeGreaterThan(0);
          expect(claimedTtl).toBeLessThanOrEqual(life);

          const second = await store.claim(claimRequest({ key: request.key, token: "token-b" }));
          expect(second.claimed).toBe(false);
          expect(second.record.token).toBe(request.token);
          expect(await admin.get(name)).toBe(claimedValue);
          const afterTtl = await admin.pttl(name);
          expect(afterTtl).toBeGreaterThan(0);
          expect(afterTtl).toBeLessThanOrEqual(claimedTtl);

          // The settled record keeps an expiry too: its window, from the settle.
          expect(await store.settle(settleRequest({ key: request.key }))).not.toBeNull();
          const settledTtl = await admin.pttl(name);
          expect(settledTtl).toBeGreaterThan(0);
          expect(settledTtl).toBeLessThanOrEqual(request.ttlMs);
        } finally {
          await store.close();
        }
      });
    }
  });
}
