// The Redis store on a real three-master Redis Cluster: every script names one key, so the cluster
// client routes it to the key's slot; list and purge scan every master. On an ioredis Cluster, and on a
// Valkey GLIDE GlideClusterClient.
import { GlideClusterClient } from "@valkey/valkey-glide";
import { afterAll, describe, expect, it } from "vitest";
import { idempotent } from "../src/index.js";
import { redisStore } from "../src/redis/index.js";
import { fakeClock, storeConformanceCases } from "../src/testing/index.js";
import "./fixtures/glide-helpers.js";
import { claimRequest } from "./fixtures/claim-request.js";
import { type LocalCluster, startLocalCluster } from "./fixtures/redis-cluster.js";
import { freshPrefix } from "./fixtures/redis-helpers.js";

const started = startLocalCluster();
// Every case awaits it: a cluster that cannot start fails each case with the reason, never skips.
started.catch(() => {});
afterAll(async () => {
  await (await started.catch(() => undefined))?.stop();
}, 30_000);

async function cluster(): Promise<LocalCluster> {
  return started;
}

// A GLIDE cluster client on the same cluster, made once it is up.
const glideStarted = started.then(({ ports }) =>
  GlideClusterClient.createClient({
    addresses: [{ host: "127.0.0.1", port: ports[0]! }],
    requestTimeout: 10_000,
  }),
);
glideStarted.catch(() => {});
afterAll(async () => {
  (await glideStarted.catch(() => undefined))?.close();
});

describe("redisStore conformance on Redis Cluster, on a GLIDE cluster client (clock: request)", () => {
  for (const c of storeConformanceCases({
    name: "redis cluster (glide)",
    create: async () => {
      const { drop } = await cluster();
      const prefix = freshPrefix("cluster-glide");
      return {
        store: redisStore({ client: await glideStarted, prefix, clock: "request" }),
        clock: fakeClock(Date.now() + 30 * 86_400_000),
        cleanup: () => drop(prefix),
      };
    },
  })) {
    it(c.name, c.run, 60_000);
  }
});

describe("redisStore on Redis Cluster, on a GLIDE cluster client", () => {
  it("shares records with an ioredis Cluster store, and lists records over many SCAN pages of each master", async () => {
    const { client, drop } = await cluster();
    const glide = await glideStarted;
    const prefix = freshPrefix("cluster-glide");
    try {
      const store = redisStore({ client: glide, prefix, clock: "request" });
      const viaIoredis = redisStore({ client, prefix, clock: "request" });
      // More records than one SCAN page (COUNT 1000) holds on any master.
      const keys = Array.from({ length: 3_600 }, (_, n) => `key-${String(n).padStart(4, "0")}`);
      const now = Date.now();
      for (let next = 0; next < keys.length; next += 400) {
        const claims = await Promise.all(
          keys.slice(next, next + 400).map((key) => store.claim(claimRequest({ key, now }))),
        );
        expect(claims.every((claim) => claim.claimed)).toBe(true);
      }
      const again = await viaIoredis.claim(claimRequest({ key: keys[7]!, token: "token-b", now }));
      expect(again).toMatchObject({ claimed: false, record: { token: "token-a" } });

      const listed: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await store.list({ limit: 1_000, ...(cursor === undefined ? {} : { cursor }) });
        listed.push(...page.records.map((r) => r.key));
        cursor = page.nextCursor;
      } while (cursor !== undefined);
      expect(listed).toEqual(keys);
      // Past their window by the request's clock: every one is found on its master and removed.
      expect((await store.purge!({ now: now + 2 * 86_400_000, limit: 10_000 })).deleted).toBe(keys.length);
      expect((await viaIoredis.list({})).records).toEqual([]);
    } finally {
      await drop(prefix);
    }
  }, 120_000);
});

describe("redisStore conformance on Redis Cluster (clock: request)", () => {
  for (const c of storeConformanceCases({
    name: "redis cluster",
    create: async () => {
      const { client, drop } = await cluster();
      const prefix = freshPrefix("cluster");
      return {
        store: redisStore({ client, prefix, clock: "request" }),
        clock: fakeClock(Date.now() + 30 * 86_400_000),
        cleanup: () => drop(prefix),
      };
    },
  })) {
    it(c.name, c.run, 60_000);
  }
});

describe("redisStore on Redis Cluster", () => {
  it("spreads records over every master and still lists each once", async () => {
    const { client, drop } = await cluster();
    const prefix = freshPrefix("cluster");
    try {
      const store = redisStore({ client, prefix });
      let runs = 0;
      const tool = idempotent(async (args: { n: number }) => ({ n: args.n, run: ++runs }), {
        name: "create_record",
        store,
      });
      for (let n = 0; n < 60; n++) await tool({ n }, { key: `key-${n}`, scope: `tenant-${n % 3}` });
      for (let n = 0; n < 60; n++) {
        expect(await tool({ n }, { key: `key-${n}`, scope: `tenant-${n % 3}` })).toMatchObject({
          was_replay: true,
        });
      }
      expect(runs).toBe(60);
      const perNode = await Promise.all(
        client
          .nodes("master")
          .map(async (node) => (await node.scan("0", "MATCH", `${prefix}*`, "COUNT", 1000))[1]),
      );
      expect(perNode).toHaveLength(3);
      for (const names of perNode) expect(names.length).toBeGreaterThan(0);
      const ids: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await store.list({ limit: 7, ...(cursor === undefined ? {} : { cursor }) });
        ids.push(...page.records.map((r) => `${r.scope}/${r.key}`));
        cursor = page.nextCursor;
      } while (cursor !== undefined);
      expect(ids).toHaveLength(60);
      expect(new Set(ids).size).toBe(60);
    } finally {
      await drop(prefix);
    }
  }, 60_000);
});
