/**
 * The record commands (inspect, purge, reconcile), in this process, against the real PostgreSQL, MySQL
 * (MariaDB here) and Redis servers, named by URL as an operator would.
 */
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { Redis } from "ioredis";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UsageError } from "../src/cli/errors.js";
import { openStore } from "../src/cli/store-url.js";
import type { IdempotencyStore } from "../src/index.js";
import { mysqlStore } from "../src/mysql/index.js";
import { postgresStore } from "../src/postgres/index.js";
import { redisStore } from "../src/redis/index.js";
import { cli } from "./fixtures/cli-binary.js";
import { testMysqlPool } from "./fixtures/mysql-helpers.js";
import { seedRecord } from "./fixtures/reconcile-seed.js";

const DAY = 86_400_000;
const hooks = join(import.meta.dirname, "fixtures", "reconcile-hooks.mjs");
const pool = new pg.Pool({ connectionString: "postgres://postgres@127.0.0.1:5432/test", max: 2 });
const mysql = testMysqlPool({ connectionLimit: 2 });
const redis = new Redis({ host: "127.0.0.1", port: 6379, maxRetriesPerRequest: 1 });
const table = `idempotool_cli_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
const prefix = `idempotool-cli-${randomUUID().slice(0, 8)}:`;

/** Records in every state, written as workers would (judged by the caller's clock, which is the server's here). */
async function seed(store: IdempotencyStore, expired: number): Promise<void> {
  const now = Date.now();
  await seedRecord(store, { key: "turn-1-alice", status: "completed", now });
  await seedRecord(store, { key: "turn-3-carol", status: "unknown", now });
  await seedRecord(store, { key: "turn-4-stale", status: "in_progress", now: now - 120_000, leaseMs: 1_000 });
  await seedRecord(store, {
    key: "order-9",
    tool: "charge_card",
    scope: "tenant-b",
    status: "completed",
    now,
  });
  for (let i = 0; i < expired; i++) {
    await seedRecord(store, { key: `old-${i}`, status: "completed", now: now - 2 * DAY, ttlMs: DAY });
  }
}

beforeAll(async () => {
  await seed(postgresStore({ client: pool, table, clock: "request" }), 5);
  await seed(redisStore({ client: redis, prefix, clock: "request" }), 0);
  await seed(mysqlStore({ client: mysql, table, clock: "request" }), 5);
});

afterAll(async () => {
  await pool.query(`DROP TABLE IF EXISTS ${table}`);
  await pool.end();
  await mysql.query(`DROP TABLE IF EXISTS ${table}`);
  await mysql.end();
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

const stores = () => [
  { name: "PostgreSQL", url: `postgres://postgres@127.0.0.1:5432/test?table=${table}` },
  { name: "Redis", url: `redis://127.0.0.1:6379?prefix=${encodeURIComponent(prefix)}` },
  { name: "MySQL", url: `mysql://root@127.0.0.1:3306/test?table=${table}` },
];

describe("the record commands on server stores", () => {
  for (const { name, url } of [
    { name: "PostgreSQL", url: "postgres" },
    { name: "Redis", url: "redis" },
    { name: "MySQL", url: "mysql" },
  ]) {
    it(`inspects ${name}: lists and filters the records as JSON`, async () => {
      const store = stores().find((s) => s.url.startsWith(url))!;
      const list = async (...args: string[]) => {
        const { code, stdout, stderr } = await cli([
          "inspect",
          "list",
          "--store",
          store.url,
          "--json",
          ...args,
        ]);
        expect(code, stderr).toBe(0);
        return (JSON.parse(stdout) as { key: string }[]).map((r) => r.key).sort();
      };
      expect(await list("--scope", "tenant-b")).toEqual(["order-9"]);
      expect(await list("--status", "unknown")).toEqual(["turn-3-carol"]);
      expect(await list("--key-prefix", "turn-")).toEqual(["turn-1-alice", "turn-3-carol", "turn-4-stale"]);
    });

    it(`reconciles ${name} as a dry run without changing a record`, async () => {
      const store = stores().find((s) => s.url.startsWith(url))!;
      const { code, stdout, stderr } = await cli(["reconcile", "--store", store.url, "--hooks", hooks]);
      expect(code, stderr).toBe(0);
      expect(stdout).toContain("dry run, nothing changed");
      expect(stdout).toContain("2 examined");
      const { stdout: after } = await cli([
        "inspect",
        "list",
        "--store",
        store.url,
        "--json",
        "--status",
        "in_progress",
      ]);
      expect((JSON.parse(after) as { key: string }[]).map((r) => r.key)).toEqual(["turn-4-stale"]);
    });
  }

  it("counts the expired PostgreSQL rows in a dry run, and removes none", async () => {
    const store = stores()[0]!;
    const { code, stdout, stderr } = await cli(["purge", "--store", store.url, "--dry-run", "--json"]);
    expect(code, stderr).toBe(0);
    expect(JSON.parse(stdout)).toEqual({ dryRun: true, expired: 5 });
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM ${table}`);
    expect(rows[0]).toEqual({ n: 9 });
  });

  it("purges the expired PostgreSQL rows and keeps the live ones", async () => {
    const store = stores()[0]!;
    const { code, stdout, stderr } = await cli(["purge", "--store", store.url, "--json"]);
    expect(code, stderr).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ deleted: 5 });
    const { stdout: left } = await cli(["inspect", "list", "--store", store.url, "--json"]);
    expect(JSON.parse(left)).toHaveLength(4);
  });

  it("purges the expired MySQL rows and keeps the live ones; a dry run counts them first", async () => {
    const store = stores()[2]!;
    const dry = await cli(["purge", "--store", store.url, "--dry-run", "--json"]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout)).toEqual({ dryRun: true, expired: 5 });
    const { code, stdout, stderr } = await cli(["purge", "--store", store.url, "--json"]);
    expect(code, stderr).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ deleted: 5 });
    const [rows] = await mysql.query(`SELECT COUNT(*) AS n FROM ${table}`);
    expect(rows).toEqual([{ n: 4 }]);
  });

  it("refuses a MySQL table that does not exist instead of creating it", async () => {
    const { code, stderr } = await cli([
      "inspect",
      "list",
      "--store",
      "mysql://root@127.0.0.1:3306/test?table=no_such_records",
    ]);
    expect(code).toBe(2);
    expect(stderr).toContain("has no table no_such_records; check --table");
  });

  it("answers an unreachable server with one line and exit 2, never a stack", async () => {
    for (const url of [
      "postgres://postgres@127.0.0.1:1/test",
      "redis://127.0.0.1:1",
      "mysql://root@127.0.0.1:1/test",
    ]) {
      const { code, stderr } = await cli(["inspect", "list", "--store", url]);
      expect(code, url).toBe(2);
      expect(stderr.trim().split("\n"), url).toHaveLength(1);
      expect(stderr, url).toMatch(/cannot reach the (PostgreSQL|Redis|MySQL) store/);
    }
  });
});

describe("openStore on server stores", () => {
  it("opens PostgreSQL and Redis stores, and turns an unreachable server into one UsageError", async () => {
    // The commands never create a store: make the default table here rather than hope another test did.
    const pool = new pg.Pool({ connectionString: "postgres://postgres@127.0.0.1:5432/test" });
    await postgresStore({ client: pool }).migrate();
    await pool.end();
    for (const url of ["postgres://postgres@127.0.0.1:5432/test", "redis://127.0.0.1:6379"]) {
      const store = await openStore(url);
      expect(await store.get({ scope: "cli-store-url", key: "nothing-here" }, Date.now())).toBeUndefined();
      await store.close();
    }
    await expect(openStore("postgres://postgres@127.0.0.1:1/test")).rejects.toThrow(UsageError);
    await expect(openStore("redis://127.0.0.1:1")).rejects.toThrow(/cannot reach the Redis store/);
  });
});
