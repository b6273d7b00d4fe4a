/**
 * `idempotool/redis`: an idempotency store on Redis, for a fleet of agent workers that share one dedup
 * state. It takes the ioredis `Redis` or `Cluster`, the node-redis client, the Valkey GLIDE client,
 * or the `@upstash/redis` client (over HTTPS, for Workers and edge functions) you already have, typed by
 * the few methods it uses (all are optional peer dependencies, never imported here). Every operation is one
 * command on one key: one round trip, atomic, and fine on Redis Cluster (on an Upstash client, claim,
 * takeover and release also read the key's released tokens). Leases are judged by the server's clock.
 *
 * @example
 * import { Redis } from "ioredis";
 * import { idempotent } from "idempotool";
 * import { redisStore } from "idempotool/redis";
 *
 * // maxRetriesPerRequest: in an outage the caller soon gets store_unavailable, not a long queue.
 * const client = new Redis("redis://127.0.0.1:6379", { maxRetriesPerRequest: 1 });
 * const store = redisStore({ client, prefix: "agents:idem:" });
 * const sendSms = idempotent(async (args: { to: string }) => ({ queued: args.to }), { name: "send_sms", store });
 * await sendSms({ to: "+15550100" }, { key: "turn-3-sms" });
 * await sendSms({ to: "+15550100" }, { key: "turn-3-sms" }); // was_replay: true, and one SMS queued
 *
 * @module
 */
export type { GlideClientLike } from "./glide.js";
export type { NodeRedisLike } from "./node-redis.js";
export type {
  RedisClientLike,
  RedisLike,
  RedisScanner,
  RedisStore,
  RedisStoreOptions,
} from "./redis-store.js";
export { redisStore } from "./redis-store.js";
export type { RedisPipelineLike, ScriptClient } from "./script-runner.js";
export type { UpstashRedisLike } from "./upstash.js";
