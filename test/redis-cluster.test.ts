// The Redis store on a real three-master Redis Cluster: every script names one key, so the cluster
// client routes it to the key's slot; list and purge scan every master.
import { afterAll, describe, expect, it } from "vitest";
import { idempotent } from "../src/index.js";
import { redisStore } from "../src/redis/index.js";
import { fakeClock, storeConformanceCases } from "../src/testing/index.js";
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
