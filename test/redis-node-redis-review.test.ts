// Review of redisStore on node-redis clients (v4, v5 and v6): shapes the detection in src/redis/node-redis.ts must
// not miss.
import { createClient } from "redis4";
import { createClientPool, createClient as createClientV5, RESP_TYPES } from "redis5";
import { afterAll, describe, expect, it } from "vitest";
import { type IdempotencyStore, idempotent } from "../src/index.js";
import { type NodeRedisLike, redisStore } from "../src/redis/index.js";
import { redisUrl } from "./fixtures/redis-helpers.js";
import { redisTestFile } from "./fixtures/redis-test-file.js";

const { client: ioredis, fresh } = redisTestFile("node-redis-review");

describe("redisStore on a node-redis client in legacyMode", () => {
  // legacyMode defines callback-style commands, lowercase `evalsha` among them, which return undefined
  // and still send the command: driven as ioredis, every claim lands and then fails on `.then`.
  const legacy = createClient({ url: redisUrl, legacyMode: true, disableOfflineQueue: true });
  const errors: unknown[] = [];
  legacy.on("error", (error: unknown) => errors.push(error));
  const connected = legacy.connect();
  connected.catch(() => {});
  afterAll(async () => {
    if (legacy.isOpen) await legacy.v4.quit();
  });

  it("runs the tool once and replays its outcome (through the client's v4 commands)", async () => {
    await connected;
    const prefix = await fresh();
    const store = redisStore({ client: legacy, prefix });
    expect(store.client).toBe(legacy);
    let runs = 0;
    const tool = idempotent(
      async (args: { to: string }) => {
        runs++;
        return { sent: args.to };
      },
      { name: "send_email", store },
    );
    const first = await tool({ to: "bob" }, { key: "turn-1" });
    const again = await tool({ to: "bob" }, { key: "turn-1" });
    expect(runs).toBe(1);
    expect(first.was_replay).toBe(false);
    expect(again.was_replay).toBe(true);
    expect(again.result).toEqual({ sent: "bob" });
    // The scripts' path too (request clock: every claim is a script), and list through SCAN.
    const scripted = redisStore({ client: legacy, prefix, clock: "request" });
    expect((await scripted.list({})).records.map((r) => r.key)).toEqual(["turn-1"]);
    // Its v4 commands, given as the client, are a node-redis client as they are.
    const viaV4 = redisStore({ client: legacy.v4 as NodeRedisLike, prefix });
    expect((await viaV4.get({ scope: "default", key: "turn-1" }, Date.now()))?.status).toBe("completed");
    expect(errors).toEqual([]);
    expect(await ioredis.exists(`${prefix}default:turn-1`)).toBe(1);
  });
});

describe("redisStore on node-redis v5 shapes", () => {
  const v5 = createClientV5({ url: redisUrl, disableOfflineQueue: true });
  const connected = v5.connect();
  connected.catch(() => {});
  afterAll(async () => {
    if (v5.isOpen) await v5.close();
  });

  /** A tool on `store`, and how many times it ran. */
  const counted = (store: IdempotencyStore) => {
    let runs = 0;
    const tool = idempotent(
      async (args: { to: string }) => {
        runs++;
        return { sent: args.to };
      },
      { name: "send_email", store },
    );
    return { tool, runs: () => runs };
  };

  it("refuses client.legacy() before sending anything (its sendCommand answers by callback, not a promise)", async () => {
    await connected;
    const prefix = await fresh();
    // Driven as a client, each claim would land on Redis and then fail on reading its reply.
    const legacy = v5.legacy();
    expect(() => redisStore({ client: legacy as unknown as NodeRedisLike, prefix })).toThrow(
      expect.objectContaining({ code: "invalid_options", message: expect.stringContaining("legacy()") }),
    );
    expect(await ioredis.keys(`${prefix}*`)).toEqual([]);
  });

  it("refuses any other client whose sendCommand takes something before the command (as a cluster's does)", () => {
    // The shape of a v5 sentinel's client lease (RedisSentinelClient), which only a live sentinel hands out.
    const lease = {
      sendCommand: (_isReadonly: boolean | undefined, _args: string[], _options?: object) =>
        Promise.reject(new Error("never sent")),
    };
    expect(() => redisStore({ client: lease as unknown as NodeRedisLike })).toThrow(
      expect.objectContaining({
        code: "invalid_options",
        message: expect.stringContaining("(args, options)"),
      }),
    );
  });

  it("reads its own replies as strings on a client whose typeMapping turns strings into Buffers", async () => {
    await connected;
    const prefix = await fresh();
    const buffers = createClientV5({
      url: redisUrl,
      disableOfflineQueue: true,
      commandOptions: { typeMapping: { [RESP_TYPES.BLOB_STRING]: Buffer } },
    });
    await buffers.connect();
    try {
      expect(await buffers.get("idempotool-test:none")).toBeNull();
      for (const clock of ["server", "request"] as const) {
        const { tool, runs } = counted(redisStore({ client: buffers, prefix, clock }));
        const first = await tool({ to: "bob" }, { key: `turn-${clock}` });
        const again = await tool({ to: "bob" }, { key: `turn-${clock}` });
        expect([runs(), first.was_replay, again.was_replay]).toEqual([1, false, true]);
        expect(again.result).toEqual({ sent: "bob" });
      }
      const listed = await redisStore({ client: buffers, prefix, clock: "request" }).list({});
      expect(listed.records.map((r) => r.key)).toEqual(["turn-request", "turn-server"]);
    } finally {
      await buffers.close();
    }
  });

  it("drives a v5 client given legacyMode: true (an option v5 ignores) as the client it is", async () => {
    await connected;
    const prefix = await fresh();
    const options = { url: redisUrl, disableOfflineQueue: true, legacyMode: true };
    const client = createClientV5(options as Parameters<typeof createClientV5>[0]);
    await client.connect();
    try {
      const { tool, runs } = counted(redisStore({ client, prefix }));
      await tool({ to: "bob" }, { key: "turn-1" });
      expect((await tool({ to: "bob" }, { key: "turn-1" })).was_replay).toBe(true);
      expect(runs()).toBe(1);
    } finally {
      await client.close();
    }
  });

  it("takes a v5 client pool (createClientPool()): each of the store's commands is one command", async () => {
    await connected;
    const prefix = await fresh();
    const pool = createClientPool({ url: redisUrl, disableOfflineQueue: true }, { maximum: 4 });
    await pool.connect();
    try {
      const { tool, runs } = counted(redisStore({ client: pool, prefix }));
      const outcomes = await Promise.all(
        Array.from({ length: 16 }, () => tool({ to: "bob" }, { key: "turn-1" })),
      );
      expect(runs()).toBe(1);
      expect(outcomes.filter((o) => !o.was_replay)).toHaveLength(1);
    } finally {
      await pool.close();
    }
  });
});
