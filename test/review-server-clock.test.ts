/**
 * An operator's resolution on a store that judges leases by its server's clock (PostgreSQL, MySQL, Redis),
 * from a resolver whose own clock runs half an hour ahead of it or behind it: whether a lease is live, and
 * how long it has been passed (`minStaleMs`), are the server's to say. The real servers on this machine;
 * without them these cases fail, never skip.
 */
import { afterAll, describe, expect, it } from "vitest";
import { type IdempotencyStore, isIdempotencyError } from "../src/index.js";
import { mysqlStore } from "../src/mysql/index.js";
import { postgresStore } from "../src/postgres/index.js";
import { redisStore } from "../src/redis/index.js";
import { type ResolveOptions, resolveRecord } from "../src/review/index.js";
import { fakeClock } from "../src/testing/index.js";
import { dropMysqlTable, freshMysqlTable, testMysqlPool } from "./fixtures/mysql-helpers.js";
import { dropTable, freshTable, testPool } from "./fixtures/pg-helpers.js";
import { dropPrefix, freshPrefix, reachable, testClient } from "./fixtures/redis-helpers.js";

const MINUTE = 60_000;
const pool = testPool({ max: 4 });
const mysql = testMysqlPool({ connectionLimit: 4 });
const redis = testClient();
const redisReady = reachable(redis);
redisReady.catch(() => {});
const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  await Promise.allSettled(cleanups.map((cleanup) => cleanup()));
  redis.disconnect();
  await pool.end();
  await mysql.end();
});

/** One place for records, through stores whose server clock is moved by `clockOffsetMs` (0: as it is). */
interface Backend {
  readonly name: string;
  open(): Promise<(clockOffsetMs: number) => IdempotencyStore>;
}

const backends: Backend[] = [
  {
    name: "postgres",
    async open() {
      const table = freshTable();
      await postgresStore({ client: pool, table }).migrate();
      cleanups.push(() => dropTable(pool, table));
      return (clockOffsetMs) => postgresStore({ client: pool, table, clockOffsetMs });
    },
  },
  {
    name: "mysql",
    async open() {
      const table = freshMysqlTable();
      await mysqlStore({ client: mysql, table }).migrate();
      cleanups.push(() => dropMysqlTable(mysql, table));
      return (clockOffsetMs) => mysqlStore({ client: mysql, table, clockOffsetMs });
    },
  },
  {
    // Unmoved, the store claims with a plain SET, whose answer carries no clock.
    name: "redis",
    async open() {
      await redisReady;
      const prefix = freshPrefix("review-clock");
      cleanups.push(() => dropPrefix(redis, prefix));
      return (clockOffsetMs) => redisStore({ client: redis, prefix, clockOffsetMs });
    },
  },
];

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return "none";
  } catch (error) {
    return isIdempotencyError(error) ? error.code : String(error);
  }
}

for (const backend of backends) {
  describe(`resolveRecord on ${backend.name}, its server's clock against the resolver's`, () => {
    it("waits minStaleMs past the lease by the server's clock, and lets a lease it says passed be resolved", async () => {
      const storeAt = await backend.open();
      /** A claim whose one-second lease the server's clock passed `agoMs` ago: written by a clock that far back. */
      const claimed = async (key: string, agoMs: number) => {
        const request = { scope: "default", key, tool: "send_email", fingerprint: "f", token: `t-${key}` };
        const now = Date.now();
        const claim = await storeAt(-agoMs - 1_000).claim({
          ...request,
          leaseMs: 1_000,
          ttlMs: 86_400_000,
          now,
        });
        expect(claim.claimed).toBe(true);
      };
      const store = storeAt(0);
      const ahead = fakeClock(Date.now() + 30 * MINUTE);
      const behind = fakeClock(Date.now() - 30 * MINUTE);
      const resolve = (clock: ResolveOptions["clock"], key: string, as: ResolveOptions["as"]) =>
        codeOf(
          resolveRecord({
            store,
            clock,
            scope: "default",
            key,
            as,
            ...(as === "completed" ? { result: { messageId: "m-1" } } : {}),
            evidence: "the provider's log",
            by: "ops",
          }),
        );

      // Passed two minutes ago by the server: a resolver half an hour ahead must still wait for 10 minutes.
      await claimed("recent", 2 * MINUTE);
      expect(await resolve(ahead, "recent", "not_executed")).toBe("record_not_resolvable");
      expect((await store.get({ scope: "default", key: "recent" }, Date.now()))?.token).toBe("t-recent");
      // A resolver half an hour behind sees a live lease by its own clock; the server's says it passed.
      expect(await resolve(behind, "recent", "completed")).toBe("none");
      expect((await store.get({ scope: "default", key: "recent" }, Date.now()))?.status).toBe("completed");

      // Passed 11 minutes ago by the server: freed, even by a resolver half an hour behind.
      await claimed("old", 11 * MINUTE);
      expect(await resolve(behind, "old", "not_executed")).toBe("none");
      expect(await store.get({ scope: "default", key: "old" }, Date.now())).toBeUndefined();

      // Live by the server's clock: not the resolver's, however far ahead its clock runs.
      await claimed("live", -10 * MINUTE);
      expect(await resolve(ahead, "live", "completed")).toBe("record_not_resolvable");
    });
  });
}
