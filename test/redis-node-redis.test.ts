// redisStore on a node-redis client (createClient() from the `redis` package, v4, v5 or v6): the same store,
// its commands sent through sendCommand. The conformance suite and the stories run on a client of each
// major (v6, the current one, also speaking RESP3), and each shares records with ioredis stores.

import { createClient as createClientV6, createCluster as createClusterV6 } from "redis";
import { createClient, createCluster } from "redis4";
import { createClient as createClientV5, createCluster as createClusterV5, createSentinel } from "redis5";
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

const DAY = 86_400_000;

/** A node-redis client of either version, as the shared stories drive it. */
interface TestClient extends NodeRedisLike {
  readonly isOpen: boolean;
  connect(): Promise<unknown>;
}

/** How one version of node-redis makes a client, and closes it. */
interface NodeRedisVersion {
  readonly label: string;
  create(options: { url: string; disableOfflineQueue?: boolean }): TestClient;
  close(client: TestClient): Promise<unknown>;
}

const versions: readonly NodeRedisVersion[] = [
  {
    label: "v4",
    create: (options) => createClient(options),
    close: (client) => (client as ReturnType<typeof createClient>).quit(),
  },
  {
    label: "v5",
    create: (options) => createClientV5(options),
    close: (client) => (client as ReturnType<typeof createClientV5>).close(),
  },
  {
    label: "v6",
    create: (options) => createClientV6(options),
    close: (client) => (client as ReturnType<typeof createClientV6>).close(),
  },
  {
    label: "v6, RESP3",
    create: (options) => createClientV6({ ...options, RESP: 3 }),
    close: (client) => (client as ReturnType<typeof createClientV6>).close(),
  },
];

for (const version of versions) nodeRedisStories(version);

/** The conformance suite and the stories, on a client of one node-redis version. */
function nodeRedisStories({ label, create, close }: NodeRedisVersion): void {
  const nodeRedis = create({ url: redisUrl, disableOfflineQueue: true });
  const connected = nodeRedis.connect();
  connected.catch(() => {});
  afterAll(async () => {
    if (nodeRedis.isOpen) await close(nodeRedis);
  });

  /** A fresh prefix once both clients are connected. */
  async function prefixed(prefixLabel?: string): Promise<string> {
    await connected;
    return fresh(prefixLabel);
  }

  describe(`redisStore on a node-redis ${label} client: conformance (clock: request)`, () => {
    for (const c of storeConformanceCases({
      name: `redis (node-redis ${label})`,
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

  describe(`redisStore on a node-redis ${label} client`, () => {
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

    it("fences a settle by the owner token, and replays a record an ioredis store settled", async () => {
      const prefix = await prefixed();
      const store = redisStore({ client: nodeRedis, prefix });
      const viaIoredis = redisStore({ client: ioredis, prefix });
      const now = Date.now();
      const mine = await store.claim(claimRequest({ key: "fenced", now }));
      expect(mine.claimed).toBe(true);
      // Another token settles nothing; the owner's settles, once.
      const foreign = {
        scope: "tenant-a",
        key: "fenced",
        token: "token-b",
        status: "completed" as const,
        result: JSON.stringify({ sent: "bob" }),
        error: null,
        ttlMs: DAY,
        now,
      };
      expect(await store.settle(foreign)).toBeNull();
      const settled = await store.settle({ ...foreign, token: "token-a" });
      expect(settled?.status).toBe("completed");
      expect(await store.settle({ ...foreign, token: "token-a" })).toBeNull();
      // A claim by another worker on either client replays it.
      for (const s of [store, viaIoredis]) {
        const again = await s.claim(claimRequest({ key: "fenced", token: "token-c", now: Date.now() }));
        expect(again.claimed).toBe(false);
        expect(again.record).toEqual(settled);
      }
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

    it("fails closed, as store_unavailable, while the client is not connected", async () => {
      const prefix = await prefixed();
      const closed = create({ url: redisUrl });
      const store = redisStore({ client: closed, prefix });
      const tool = idempotent(async () => "ran", { name: "send_email", store });
      const error = await tool({}, { key: "k" }).catch((e: unknown) => e);
      expect(isIdempotencyError(error) && error.code).toBe("store_unavailable");
    });
  });
}

describe("redisStore's client type, on node-redis", () => {
  it("takes a v4 client as it is, and refuses a v4 cluster, naming the option", () => {
    const nodeRedis = createClient({ url: redisUrl });
    expectTypeOf(nodeRedis).toExtend<RedisStoreOptions["client"]>();
    // The store's client is typed as given, so code that reads store.client keeps compiling.
    expectTypeOf(redisStore({ client: nodeRedis }).client).toEqualTypeOf<typeof nodeRedis>();
    expectTypeOf(redisStore({ client: ioredis }).client).toEqualTypeOf<typeof ioredis>();
    expectTypeOf<RedisStore["client"]>().toEqualTypeOf<RedisLike>();
    const cluster = createCluster({ rootNodes: [{ url: redisUrl }] });
    // Its type is refused too; this is what a JavaScript caller gets.
    expectTypeOf(cluster).not.toExtend<RedisStoreOptions["client"]>();
    expect(() => redisStore({ client: cluster as unknown as NodeRedisLike })).toThrow(
      expect.objectContaining({ code: "invalid_options", message: expect.stringContaining("`client`") }),
    );
  });

  it("takes a v5 client as it is (RESP2 or RESP3), and refuses a v5 cluster, sentinel or legacy() client", () => {
    const v5 = createClientV5({ url: redisUrl });
    const resp3 = createClientV5({ url: redisUrl, RESP: 3 });
    expectTypeOf(v5).toExtend<RedisStoreOptions["client"]>();
    expectTypeOf(resp3).toExtend<RedisStoreOptions["client"]>();
    expectTypeOf(redisStore({ client: v5 }).client).toEqualTypeOf<typeof v5>();
    expectTypeOf(redisStore({ client: resp3, prefix: "app:" }).client).toEqualTypeOf<typeof resp3>();
    // The shapes whose sendCommand takes something before its arguments, or answers by callback, are
    // refused by type; a JavaScript caller gets invalid_options naming the option.
    const cluster = createClusterV5({ rootNodes: [{ url: redisUrl }] });
    const sentinel = createSentinel({
      name: "mymaster",
      sentinelRootNodes: [{ host: "127.0.0.1", port: 1 }],
    });
    const legacy = v5.legacy();
    expectTypeOf(cluster).not.toExtend<RedisStoreOptions["client"]>();
    expectTypeOf(sentinel).not.toExtend<RedisStoreOptions["client"]>();
    expectTypeOf(legacy).not.toExtend<RedisStoreOptions["client"]>();
    for (const client of [cluster, sentinel, legacy]) {
      expect(() => redisStore({ client: client as unknown as NodeRedisLike })).toThrow(
        expect.objectContaining({ code: "invalid_options", message: expect.stringContaining("`client`") }),
      );
    }
  });

  it("takes a v6 client as it is (RESP2 or RESP3), and refuses a v6 cluster or legacy() client", () => {
    const v6 = createClientV6({ url: redisUrl });
    const resp3 = createClientV6({ url: redisUrl, RESP: 3 });
    expectTypeOf(v6).toExtend<RedisStoreOptions["client"]>();
    expectTypeOf(resp3).toExtend<RedisStoreOptions["client"]>();
    expectTypeOf(redisStore({ client: v6 }).client).toEqualTypeOf<typeof v6>();
    expectTypeOf(redisStore({ client: resp3, prefix: "app:" }).client).toEqualTypeOf<typeof resp3>();
    const cluster = createClusterV6({ rootNodes: [{ url: redisUrl }] });
    const legacy = v6.legacy();
    expectTypeOf(cluster).not.toExtend<RedisStoreOptions["client"]>();
    expectTypeOf(legacy).not.toExtend<RedisStoreOptions["client"]>();
    for (const client of [cluster, legacy]) {
      expect(() => redisStore({ client: client as unknown as NodeRedisLike })).toThrow(
        expect.objectContaining({ code: "invalid_options", message: expect.stringContaining("`client`") }),
      );
    }
  });
});
