// Review of redisStore on node-redis clients: shapes the detection in src/redis/node-redis.ts must not miss.
import { createClient } from "redis";
import { afterAll, describe, expect, it } from "vitest";
import { idempotent } from "../src/index.js";
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
