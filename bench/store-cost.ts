/**
 * Where a SQLite or PostgreSQL call's cost goes: the same calls made three ways on one connection, in
 * interleaved rounds, each with this process's CPU per call and calls/s (medians of --reps rounds).
 *
 * - **floor**: the bench's floor (prepared INSERT … ON CONFLICT DO NOTHING + UPDATE; a replay is one SELECT),
 *   with the arguments' fingerprint computed once, not per call;
 * - **floor + fingerprint**: the same, computing the fingerprint (RFC 8785 canonical JSON and SHA-256 of the
 *   arguments) on every call, as anything must that refuses a used key sent with other arguments;
 * - **store alone**: the store's own `claim` and `settle` called directly (a replay is a `claim` that finds
 *   the completed record), with no fingerprint and no core: what the store's statements cost;
 * - **idempotool**: `idempotent()` on that store: the store, plus the core's own work per call;
 * - and, measured alone in a loop, **fingerprint**.
 *
 * On PostgreSQL each row also gives the server's CPU per call: the time the pool's backends spent on a CPU
 * (/proc/<pid>/schedstat), when the server runs on this machine; on two cores shared with the server, the
 * server's share decides as much as the client's.
 *
 *   node --import tsx bench/store-cost.ts [--store node:sqlite,better-sqlite3,postgres] [--workload first,replay]
 *     [--concurrency 1] [--calls 5000] [--reps 5] [--lib dist] [--pg-url postgres://postgres@127.0.0.1:5432/test]
 *
 * Run it with better-sqlite3 built for the Node that runs it (`scripts/node.sh 24 --with-better-sqlite3 …`).
 * Prints Markdown. SQLite files go to bench/tmp/ and are removed; PostgreSQL tables are dropped.
 */
import { randomUUID } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import type { IdempotencyStore } from "../src/index.js";
import { SqliteDriver } from "./lib/backends/backend.js";
import { idempotoolSubject } from "./lib/backends/memory.js";
import { connectPool, dropClaimFunctionsSql, postgresFloor, serverCpuUs } from "./lib/backends/postgres.js";
import { openDriverDatabase, removeDatabase, sqliteFloor } from "./lib/backends/sqlite.js";
import { loadLibrary } from "./lib/library.js";
import { median } from "./lib/measure.js";
import { type Call, countedTool, toolArgs } from "./lib/subject.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({
  options: {
    store: { type: "string", default: "node:sqlite,better-sqlite3,postgres" },
    workload: { type: "string", default: "first,replay" },
    concurrency: { type: "string", default: "1" },
    calls: { type: "string", default: "5000" },
    reps: { type: "string", default: "5" },
    lib: { type: "string", default: "dist" },
    "pg-url": {
      type: "string",
      default: process.env.IDEMPOTOOL_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test",
    },
  },
});
const wholeNumber = (name: string, text: string, min: number): number => {
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < min) throw new Error(`--${name} must be an integer ≥ ${min}`);
  return value;
};
const calls = wholeNumber("calls", values.calls, 100);
const reps = wholeNumber("reps", values.reps, 1);
const concurrency = wholeNumber("concurrency", values.concurrency, 1);
const workloads = values.workload.split(",");
for (const w of workloads) if (w !== "first" && w !== "replay") throw new Error(`--workload: unknown "${w}"`);
const stores = values.store.split(",");
for (const s of stores) {
  if (s !== SqliteDriver.node && s !== SqliteDriver.betterSqlite3 && s !== "postgres")
    throw new Error(`--store: unknown "${s}" (node:sqlite, better-sqlite3 or postgres)`);
}

process.setSourceMapsEnabled(false);
const lib = await loadLibrary(path.resolve(root, values.lib));
const fingerprint = lib.core.sha256Hex(lib.core.canonicalJson(toolArgs));
const dayMs = 24 * 60 * 60 * 1000;
const leaseMs = 60_000;

/** The store's own claim and settle, called as the core would, without the core. */
function storeAlone(store: IdempotencyStore): { first: Call; replay: Call } {
  const tool = countedTool();
  const request = (key: string) => ({
    scope: "default",
    key,
    tool: "send_email",
    fingerprint,
    token: randomUUID(),
    leaseMs,
    ttlMs: dayMs,
    now: Date.now(),
  });
  return {
    async first(key, args) {
      const claim = request(key);
      const answer = await store.claim(claim);
      if (!answer.claimed) throw new Error(`store alone: ${key} is already claimed`);
      const result = await tool.fn(args);
      const settled = await store.settle({
        scope: claim.scope,
        key,
        token: claim.token,
        status: "completed",
        result: JSON.stringify(result),
        error: null,
        ttlMs: dayMs,
        now: Date.now(),
      });
      if (settled === null) throw new Error(`store alone: the settle of ${key} was refused`);
      return result;
    },
    async replay(key) {
      const { claimed, record } = await store.claim(request(key));
      if (claimed || record.status !== "completed" || record.result === null) {
        throw new Error(`store alone: ${key} holds no completed record`);
      }
      return JSON.parse(record.result) as unknown;
    },
  };
}

interface Way {
  readonly name: string;
  readonly first: Call;
  readonly replay: Call;
}

/** `floor` with the arguments' fingerprint computed on every call. */
function fingerprinted(floor: Way): Way {
  const { canonicalJson, sha256Hex } = lib.core;
  const check = (args: typeof toolArgs) => {
    if (sha256Hex(canonicalJson(args)) !== fingerprint)
      throw new Error("floor + fingerprint: other arguments");
  };
  return {
    name: "floor + fingerprint",
    first: (key, args) => {
      check(args);
      return floor.first(key, args);
    },
    replay: (key, args) => {
      check(args);
      return floor.replay(key, args);
    },
  };
}

interface Round {
  readonly cpuUs: number;
  /** The server's CPU per call, where `serverCpu` can read it. */
  readonly serverUs: number | undefined;
  readonly perSecond: number;
}

/** The server's CPU time so far (µs), for a store whose server it can see; undefined otherwise. */
let serverCpu: () => Promise<number | undefined> = async () => undefined;

const run = `${process.pid}-${Date.now().toString(36)}`;
/** The ways whose replayed keys hold a completed record already. */
const replayable = new Set<Way>();

/** `calls` calls of `workload`, `concurrency` at a time: CPU per call and calls/s. */
async function round(way: Way, workload: string, tag: string): Promise<Round> {
  const call = workload === "first" ? way.first : way.replay;
  const keyOf = (lane: number, i: number) =>
    workload === "first" ? `${run}-${way.name}-${tag}-${lane}-${i}` : `${run}-${way.name}-replayed-${lane}`;
  if (workload === "replay" && !replayable.has(way)) {
    replayable.add(way);
    await Promise.all(Array.from({ length: concurrency }, (_, lane) => way.first(keyOf(lane, 0), toolArgs)));
  }
  const perLane = Math.ceil(calls / concurrency);
  const serverBefore = await serverCpu();
  const cpu = process.cpuUsage();
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, lane) => {
      for (let i = 0; i < perLane; i++) await call(keyOf(lane, i), toolArgs);
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  const used = process.cpuUsage(cpu);
  const serverAfter = await serverCpu();
  const done = perLane * concurrency;
  const serverUs =
    serverBefore === undefined || serverAfter === undefined ? undefined : (serverAfter - serverBefore) / done;
  return { cpuUs: (used.user + used.system) / done, serverUs, perSecond: done / seconds };
}

/** The fingerprint alone, in a tight loop: CPU per call. */
function fingerprintCost(): number {
  const count = 50_000;
  let sink = 0;
  const cpu = process.cpuUsage();
  for (let i = 0; i < count; i++) sink += lib.core.sha256Hex(lib.core.canonicalJson(toolArgs)).length;
  const used = process.cpuUsage(cpu);
  if (sink !== 64 * count) throw new Error("fingerprint: unexpected digest length");
  return (used.user + used.system) / count;
}

async function measure(label: string, ways: readonly Way[]): Promise<void> {
  for (const workload of workloads) {
    const rounds = new Map<string, Round[]>(ways.map((w) => [w.name, []]));
    // Warm every way up, then alternate the order of the timed rounds (A B C, C B A, …).
    for (const way of ways) await round(way, workload, "warm");
    for (let rep = 0; rep < reps; rep++) {
      const order = rep % 2 === 0 ? ways : [...ways].reverse();
      for (const way of order) rounds.get(way.name)!.push(await round(way, workload, `r${rep}`));
      process.stderr.write(`${label} ${workload}: round ${rep + 1} of ${reps}\n`);
    }
    const floorRate = median(rounds.get("floor")!.map((r) => r.perSecond));
    for (const way of ways) {
      const cpu = median(rounds.get(way.name)!.map((r) => r.cpuUs));
      const rate = median(rounds.get(way.name)!.map((r) => r.perSecond));
      const server = rounds.get(way.name)!.map((r) => r.serverUs);
      const serverText = server.every((us) => us !== undefined) ? median(server).toFixed(1) : "—";
      console.log(
        `| ${label} | ${workload} | ${way.name} | ${Math.round(rate).toLocaleString("en-US")} | ${cpu.toFixed(1)} | ${serverText} | ${(rate / floorRate).toFixed(2)} |`,
      );
    }
  }
}

console.log(
  `Library: ${path.relative(root, lib.dir) || "."} · node ${process.version} · ${calls} calls per round, ` +
    `${concurrency} in flight, median of ${reps} rounds`,
);
console.log(
  `\nFingerprint of the bench's arguments (canonical JSON + SHA-256), alone: ${fingerprintCost().toFixed(2)} µs CPU per call`,
);
console.log("\n| store | workload | way | calls/s | CPU µs/call | server CPU µs/call | ÷ floor (calls/s) |");
console.log("|---|---|---|--:|--:|--:|--:|");

for (const name of stores) {
  if (name === "postgres") {
    const tag = `storecost_${process.pid}`;
    const pool = connectPool(values["pg-url"], tag);
    try {
      serverCpu = () => serverCpuUs(pool, tag);
      const store = lib.postgres!.postgresStore({ client: pool, table: `${tag}_idem` });
      await store.migrate();
      const floor: Way = { ...(await postgresFloor(pool, `${tag}_floor`, fingerprint)), name: "floor" };
      await measure("postgres", [
        floor,
        fingerprinted(floor),
        { ...storeAlone(store), name: "store alone" },
        { ...idempotoolSubject(lib, () => store, "postgresStore"), name: "idempotool" },
      ]);
    } finally {
      await pool.query(`DROP TABLE IF EXISTS ${tag}_idem, ${tag}_floor`);
      await pool.query(dropClaimFunctionsSql([`${tag}_idem`]));
      await pool.end();
      serverCpu = async () => undefined;
    }
    continue;
  }
  const driver = name as SqliteDriver;
  const file = path.join(root, "bench", "tmp", `store-cost-${process.pid}-${driver.replace(":", "-")}.db`);
  const db = openDriverDatabase(driver, file);
  try {
    const store = lib.sqlite.sqliteStore({ database: db, table: "idem" });
    const floor: Way = { ...sqliteFloor(db, driver, "floor", fingerprint), name: "floor" };
    await measure(`sqlite (${driver})`, [
      floor,
      fingerprinted(floor),
      { ...storeAlone(store), name: "store alone" },
      { ...idempotoolSubject(lib, () => store, "sqliteStore"), name: "idempotool" },
    ]);
  } finally {
    (db as { close(): void }).close();
    removeDatabase(file);
  }
}
