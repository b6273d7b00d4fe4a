// redisStore on a node-redis client (createClient() from the `redis` package): the same store, its commands
// sent through sendCommand. The conformance suite runs on it, and it shares records with ioredis stores.
import { createClient, createCluster } from "redis";
import { afterAll, describe, expect, expectTypeOf, it } from "vitest";
import { idempotent, isIdempotencyError } from "../src/index.js";
import {
  type NodeRedisLike,
  type RedisLike,
  type RedisStore,
  type RedisStoreOptions,
  redisStore,
} from "../src/redis/index.js";
import { fakeClock, storeConformanceCases } from "../src/testing/index.js";
import { claimRequest } from "./fixtures/claim-request.js";
import { dropPrefix, redisUrl } from "./fixtures/redis-helpers.js";
import { redisTestFile } from "./fixtures/redis-test-file.js";

const { client: ioredis, fresh } = redisTestFile("node-redis");
const nodeRedis = createClient({ url: redisUrl, disableOfflineQueue: true });
const connected = nodeRedis.connect();
connected.catch(() => {});
afterAll(async () => {
  if (nodeRedis.isOpen) await nodeRedis.quit();
});

/** A fresh prefix once both clients are connected. */
async function prefixed(label?: string): Promise<string> {
  await connected;
  return fresh(label);
}

const DAY = 86_400_000;

describe("redisStore on a node-redis client: conformance (clock: request)", () => {
  for (const c of storeConformanceCases({
    name: "redis (node-redis)",
    create: async () => {
      const prefix = await prefixed("conformance");
      return {
        store: redisStore({ client: nodeRedis, prefix, clock: "request" }),
        clock: fakeClock(Date.now() + 30 * DAY),
        cleanup: () => dropPrefix(ioredis, prefix),
      };
    },
  })) {
    it(c.name, c.run);
  }
});

describe("redisStore on a node-redis client", () => {
  it("claims with one plain command on the server's clock and shares records with an ioredis store", async () => {
    const prefix = await prefixed();
    const viaNodeRedis = redisStore({ client: nodeRedis, prefix });
    const viaIoredis = redisStore({ client: ioredis, prefix });
    expect(viaNodeRedis.client).toBe(nodeRedis);

    let runs = 0;
    const tool = async (args: { to: string }) => {
      runs++;
      return { sent: args.to };
    };
    const a = idempotent(tool, { name: "send_email", store: viaNodeRedis });
    const b = idempotent(tool, { name: "send_email", store: viaIoredis });
    // Callers on both clients at once, on one key: one runs, every other gets its outcome.
    const outcomes = await Promise.all(
      Array.from({ length: 16 }, (_, i) => (i % 2 === 0 ? a : b)({ to: "bob" }, { key: "turn-1" })),
    );
    expect(runs).toBe(1);
    expect(outcomes.filter((o) => !o.was_replay)).toHaveLength(1);
    for (const o of outcomes) expect(o.result).toEqual({ sent: "bob" });
    // The record is the same one, read through either client; the key is a plain string with an expiry.
    expect(await viaNodeRedis.get({ scope: "default", key: "turn-1" }, Date.now())).toEqual(
      await viaIoredis.get({ scope: "default", key: "turn-1" }, Date.now()),
    );
  });

  it("sends a script whole again after Redis forgot it (SCRIPT FLUSH)", async () => {
    const prefix = await prefixed();
    const store = redisStore({ client: nodeRedis, prefix, clock: "request" });
    expect((await store.claim(claimRequest({ key: "before" }))).claimed).toBe(true);
    await nodeRedis.sendCommand(["SCRIPT", "FLUSH"]);
    expect((await store.claim(claimRequest({ key: "after" }))).claimed).toBe(true);
    expect((await store.claim(claimRequest({ key: "after", token: "token-b" }))).claimed).toBe(false);
  });

  it("lists and purges through SCAN on it", async () => {
    const prefix = await prefixed();
    const store = redisStore({ client: nodeRedis, prefix, clock: "request" });
    const now = Date.now();
    for (const key of ["k1", "k2", "k3"]) await store.claim(claimRequest({ key, now, ttlMs: 1_000 }));
    const page = await store.list({});
    expect(page.records.map((r) => r.key)).toEqual(["k1", "k2", "k3"]);
    // Past their window by the request's clock (the script judges by it), and so removed.
    expect((await store.purge!({ now: now + 120_000 })).deleted).toBe(3);
    expect((await store.list({})).records).toEqual([]);
  });

  it("fails closed, as store_unavailable, once the client is closed", async () => {
    const prefix = await prefixed();
    const closed = createClient({ url: redisUrl });
    const store = redisStore({ client: closed, prefix });
    const tool = idempotent(async () => "ran", { name: "send_email", store });
    const error = await tool({}, { key: "k" }).catch((e: unknown) => e);
    expect(isIdempotencyError(error) && error.code).toBe("store_unavailable");
  });

  it("takes a node-redis client as it is, and refuses a node-redis cluster, naming the option", () => {
    expectTypeOf(nodeRedis).toExtend<RedisStoreOptions["client"]>();
    // The store's client is typed as given, so code that reads store.client keeps compiling.
    expectTypeOf(redisStore({ client: nodeRedis }).client).toEqualTypeOf<typeof nodeRedis>();
    expectTypeOf(redisStore({ client: ioredis }).client).toEqualTypeOf<typeof ioredis>();
    expectTypeOf<RedisStore["client"]>().toEqualTypeOf<RedisLike>();
    const cluster = createCluster({ rootNodes: [{ url: redisUrl }] });
    // Its type is refused too; this is what a JavaScript caller gets.
    expect(() => redisStore({ client: cluster as unknown as NodeRedisLike })).toThrow(
      expect.objectContaining({ code: "invalid_options", message: expect.stringContaining("`client`") }),
    );
  });
});
