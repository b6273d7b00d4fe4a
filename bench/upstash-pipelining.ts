/**
 * What the Upstash client's automatic pipelining saves the Redis store: first calls (claim, settle) and
 * replays from 1 and from 32 callers at once, with `enableAutoPipelining` on (the client's default) and
 * off, through a local server that speaks Upstash's REST protocol in front of the Redis at REDIS_URL.
 * On loopback an HTTP round trip costs little, so the requests per call matter more than the times here:
 * over the internet each request is a round trip of tens of milliseconds.
 *
 * Run: scripts/node.sh 24 --import tsx bench/upstash-pipelining.ts
 */
import { randomUUID } from "node:crypto";
import { Redis as IoRedis } from "ioredis";
import { idempotent } from "../src/index.js";
import { redisStore } from "../src/redis/index.js";
import { dropPrefix } from "../test/fixtures/redis-helpers.js";
import { upstashClient } from "../test/fixtures/stores.js";
import { upstashRestServer } from "../test/fixtures/upstash-rest-server.js";

const redis = new IoRedis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", { maxRetriesPerRequest: 1 });
const server = await upstashRestServer(redis);
const rounds = 20;

try {
  console.log(
    "pipelining  callers  requests/first call  requests/replay  ms/round (first)  ms/round (replay)",
  );
  for (const enableAutoPipelining of [true, false]) {
    for (const callers of [1, 32]) {
      const prefix = `idempotool-bench:upstash:${randomUUID()}:`;
      const client = await upstashClient(server.url, server.token, { enableAutoPipelining });
      const send = idempotent(async (args: { to: string }) => ({ sent: args.to }), {
        name: "send_email",
        store: redisStore({ client, prefix }),
      });
      await send({ to: "warm-up" }, { key: "warm-up" });
      const round = (tag: string) =>
        Promise.all(Array.from({ length: callers }, (_, i) => send({ to: `${i}` }, { key: `${tag}-${i}` })));
      let requests = server.requests;
      let started = performance.now();
      for (let r = 0; r < rounds; r++) await round(`first-${r}`);
      const firstMs = (performance.now() - started) / rounds;
      const firstRequests = (server.requests - requests) / (rounds * callers);
      requests = server.requests;
      started = performance.now();
      for (let r = 0; r < rounds; r++) await round(`first-${r}`);
      const replayMs = (performance.now() - started) / rounds;
      const replayRequests = (server.requests - requests) / (rounds * callers);
      console.log(
        `${String(enableAutoPipelining).padEnd(11)} ${String(callers).padStart(7)}  ${firstRequests.toFixed(2).padStart(19)}  ${replayRequests.toFixed(2).padStart(15)}  ${firstMs.toFixed(1).padStart(16)}  ${replayMs.toFixed(1).padStart(17)}`,
      );
      await dropPrefix(redis, prefix);
    }
  }
} finally {
  await server.close();
  redis.disconnect();
}
