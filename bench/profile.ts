/**
 * A CPU profile of idempotool's memory path, summarised: where a first call and a replay spend their time
 * (canonical JSON, hashing, result serialization, the lease's AbortControllers and timers, the async call
 * flow, the store, GC). It measures the BUILT library, like the bench, and profiles only the timed loops
 * (the V8 profiler is started and stopped around them, so module loading stays out).
 *
 *   node --import tsx bench/profile.ts [--seconds 3] [--lib dist] [--interval-us 50]
 *     [--store memory|redis|node-redis|postgres|node:sqlite|better-sqlite3] [--redis redis://127.0.0.1:6379]
 *     [--postgres postgres://postgres@127.0.0.1:5432/test] [--floor] [--in-flight 1]
 *
 * --in-flight N keeps N calls running at once (a fresh key each on first calls; one key on replays).
 * --floor profiles the bench's floor on the same store instead of idempotool (PostgreSQL and SQLite), to
 * compare the client's work per call: at 1 in flight on PostgreSQL the time is mostly spent waiting, so the
 * self-time shares there are of the client's CPU and idle time together. The SQLite stores work on a file
 * of their own under bench/tmp/profile/, removed at the end (run it with `scripts/node.sh 24
 * --with-better-sqlite3` for better-sqlite3).
 *
 * Prints Markdown: self time by category and the top functions, per workload. The raw .cpuprofile files go
 * to bench/tmp/profile/ (git-ignored); open them in Chrome DevTools or speedscope.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Redis } from "ioredis";
import { createClient } from "redis4";
import type { IdempotencyStore } from "../src/index.js";
import { SqliteDriver } from "./lib/backends/backend.js";
import { connectPool, dropClaimFunctionsSql, postgresFloor } from "./lib/backends/postgres.js";
import { openDriverDatabase, removeDatabase, sqliteFloor } from "./lib/backends/sqlite.js";
import { loadLibrary } from "./lib/library.js";
import { type CpuProfile, categoryOf, summarizeProfile } from "./lib/profile-summary.js";
import { countedTool, type Subject, toolArgs } from "./lib/subject.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "3" },
    lib: { type: "string", default: "dist" },
    "interval-us": { type: "string", default: "50" },
    store: { type: "string", default: "memory" },
    redis: { type: "string", default: "redis://127.0.0.1:6379" },
    postgres: {
      type: "string",
      default: process.env.IDEMPOTOOL_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test",
    },
    floor: { type: "boolean", default: false },
    "in-flight": { type: "string", default: "1" },
  },
});

process.setSourceMapsEnabled(false);
const lib = await loadLibrary(path.resolve(root, values.lib));
// node-redis: the Redis store on a node-redis 4 client (the version @node-idempotency's adapter uses).
const onNodeRedis = values.store === "node-redis";
const onRedis = values.store === "redis" || onNodeRedis;
const onPostgres = values.store === "postgres";
const sqliteDriver = [SqliteDriver.node, SqliteDriver.betterSqlite3].find(
  (driver) => driver === values.store,
);
if (!onRedis && !onPostgres && !sqliteDriver && values.store !== "memory")
  throw new Error(`--store: unknown "${values.store}"`);
if (values.floor && !onPostgres && !sqliteDriver) {
  throw new Error("--floor: only with --store postgres, node:sqlite or better-sqlite3");
}
const inFlight = Number(values["in-flight"]);
if (!Number.isInteger(inFlight) || inFlight < 1 || inFlight > 1000) {
  throw new Error(`--in-flight: a whole number from 1 to 1000, got "${values["in-flight"]}"`);
}
const redis = onRedis ? new Redis(values.redis, { maxRetriesPerRequest: 1 }) : undefined;
const nodeRedis = onNodeRedis ? createClient({ url: values.redis }) : undefined;
await nodeRedis?.connect();
const pool = onPostgres ? connectPool(values.postgres) : undefined;
const pgTables: string[] = [];
const redisPrefix = `idempotool-profile:${process.pid}:`;
const session = new Session();
session.connect();
await session.post("Profiler.enable");
await session.post("Profiler.setSamplingInterval", { interval: Number(values["interval-us"]) });
const dir = path.join(root, "bench", "tmp", "profile");
mkdirSync(dir, { recursive: true });
const sqliteFile = path.join(dir, `profile-${process.pid}.sqlite`);
const sqlite = sqliteDriver ? openDriverDatabase(sqliteDriver, sqliteFile) : undefined;

/** Calls back to back for `ms`, in batches so the clock reads stay out of the profile; returns calls/s. */
async function loop(
  call: (i: number) => Promise<unknown>,
  ms: number,
): Promise<{ calls: number; perSecond: number }> {
  let calls = 0;
  const started = performance.now();
  while (performance.now() - started < ms) {
    await Promise.all(
      Array.from({ length: inFlight }, async (_, lane) => {
        for (let i = lane; i < 1000; i += inFlight) await call(calls + i);
      }),
    );
    calls += 1000;
  }
  return { calls, perSecond: calls / ((performance.now() - started) / 1000) };
}

/** One call of `workload`: a fresh key each time, or one completed key; each workload on an empty store. */
async function caller(workload: "first" | "replay"): Promise<() => Promise<unknown>> {
  let n = 0;
  const keyOf = workload === "first" ? () => `k${n++}` : () => "replayed";
  if (values.floor) {
    const print = lib.core.fingerprint(toolArgs);
    let floor: Subject;
    if (pool) {
      const table = `profile_${process.pid}_${workload}_floor`;
      pgTables.push(table);
      floor = await postgresFloor(pool, table, print);
    } else floor = sqliteFloor(sqlite!, sqliteDriver!, `floor_${workload}`, print);
    if (workload === "first") return () => floor.first(keyOf(), toolArgs);
    await floor.first("replayed", toolArgs);
    return () => floor.replay("replayed", toolArgs);
  }
  const tool = countedTool();
  let store: IdempotencyStore;
  if (redis) {
    const client = nodeRedis ?? redis;
    store = lib.redis!.redisStore({ client, prefix: `${redisPrefix}${workload}:` });
  } else if (pool) {
    const table = `profile_${process.pid}_${workload}`;
    pgTables.push(table);
    const postgres = lib.postgres!.postgresStore({ client: pool, table });
    await postgres.migrate();
    store = postgres;
  } else if (sqlite) store = lib.sqlite.sqliteStore({ database: sqlite, table: `profile_${workload}` });
  else store = lib.core.memoryStore({ maxRecords: 50_000_000 });
  const wrapped = lib.core.idempotent(tool.fn, { name: "send_email", store });
  return () => wrapped(toolArgs, { key: keyOf() });
}

const sections: string[] = [
  `Library: ${path.relative(root, lib.dir) || "."} · node ${process.version} · sampling every ${values["interval-us"]} µs`,
  "",
];
for (const workload of ["first", "replay"] as const) {
  const call = await caller(workload);
  await loop(call, 1000);
  await session.post("Profiler.start");
  const { calls, perSecond } = await loop(call, Number(values.seconds) * 1000);
  const { profile } = (await session.post("Profiler.stop")) as unknown as { profile: CpuProfile };
  const file = path.join(
    dir,
    `${values.store.replace(":", "-")}-${workload}${values.floor ? "-floor" : ""}.cpuprofile`,
  );
  writeFileSync(file, JSON.stringify(profile));
  sections.push(
    `### ${values.store} ${workload === "first" ? "first call" : "replay"}: ${Math.round(perSecond).toLocaleString("en-US")} calls/s under the profiler (${calls.toLocaleString("en-US")} calls)`,
    "",
    summarizeProfile(profile, categoryOf),
    "",
    `profile: ${path.relative(root, file)}`,
    "",
  );
}
session.disconnect();
if (redis) {
  let cursor = "0";
  do {
    const [next, names] = await redis.scan(cursor, "MATCH", `${redisPrefix}*`, "COUNT", 1000);
    cursor = next;
    if (names.length > 0) await redis.unlink(...names);
  } while (cursor !== "0");
  redis.disconnect();
  await nodeRedis?.quit();
}
if (pool) {
  for (const table of pgTables) await pool.query(`DROP TABLE IF EXISTS ${table}`);
  await pool.query(dropClaimFunctionsSql(pgTables));
  await pool.end();
}
if (sqlite) {
  sqlite.close();
  removeDatabase(sqliteFile);
}
process.stdout.write(`${sections.join("\n")}\n`);
