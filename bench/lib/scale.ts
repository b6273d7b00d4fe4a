/**
 * The scale part: claim and replay latency at ~10 k and at 1 M records (it must not grow with the store),
 * and the cost of purging 100 k expired records among 1 M live ones against 100 k alone (it must follow what
 * expired, not the table). SQLite and PostgreSQL; rows are bulk-loaded in one statement each.
 */
import { performance } from "node:perf_hooks";
import type { IdempotencyStore } from "../../src/index.js";
import { BackendName, Skip } from "./backends/backend.js";
import { connectPool, dropClaimFunctionsSql } from "./backends/postgres.js";
import { openBenchDatabase, removeDatabase } from "./backends/sqlite.js";
import type { Library } from "./library.js";
import { measure, median, timed, type UnitOutcome } from "./measure.js";
import type { Progress } from "./progress.js";
import { formatOps, formatRatio, formatUs, table } from "./report.js";
import { countedTool, toolArgs } from "./subject.js";

const dayMs = 24 * 60 * 60 * 1000;
const smallRows = 10_000;
const resultText = JSON.stringify({ queued: true, to: toolArgs.to, messageId: "m-1" });

export interface LatencyAtSize {
  readonly opsPerSec: number;
  readonly p50Us: number;
  readonly p99Us: number;
}

export interface ScaleBackendResult {
  readonly rows: { readonly small: number; readonly large: number };
  readonly loadSeconds: number;
  readonly first: { readonly small: LatencyAtSize; readonly large: LatencyAtSize; readonly p50Ratio: number };
  readonly replay: {
    readonly small: LatencyAtSize;
    readonly large: LatencyAtSize;
    readonly p50Ratio: number;
  };
  /**
   * The same reads without idempotool: one prepared SELECT of a random record by primary key. What it
   * gains from 10 k to `rows.large` is the database's (B-tree depth, page cache), not the store's.
   */
  readonly read: { readonly small: LatencyAtSize; readonly large: LatencyAtSize; readonly p50Ratio: number };
  readonly purge: {
    readonly expired: number;
    /** Milliseconds per repetition to purge `expired` records from a table holding only them. */
    readonly aloneMs: number[];
    /** … from a table that also holds `rows.large` live records. */
    readonly amongLiveMs: number[];
    readonly ratio: number;
  };
}

export interface ScaleResult {
  readonly sqlite?: ScaleBackendResult;
  readonly postgres?: ScaleBackendResult;
  readonly skipped: Record<string, string>;
}

/** The few things the scale part does to a table, per database. */
interface ScaleDriver {
  readonly name: string;
  /** A store on a fresh table, created. */
  store(table: string): Promise<IdempotencyStore>;
  /** Insert `count` completed records keyed s00000000…, live for a day, or expired when `expired`. */
  load(table: string, count: number, options: { expired: boolean; keyPrefix: string }): Promise<void>;
  /** The floor of a replay: one prepared SELECT of the record by primary key, straight to the database. */
  read(table: string, key: string): Promise<void>;
  close(): Promise<void>;
}

function randomKey(): string {
  return `n-${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;
}

const padded = (i: number) => `s${String(i).padStart(8, "0")}`;

type ScaleWorkload = "first" | "replay" | "read";

async function latencyAt(
  lib: Library,
  target: { readonly store: IdempotencyStore; readonly read: (key: string) => Promise<void> },
  rows: number,
  workload: ScaleWorkload,
  durationMs: number,
): Promise<LatencyAtSize> {
  const tool = countedTool();
  const wrapped = lib.core.idempotent(tool.fn, { name: "send_email", store: target.store });
  const one: UnitOutcome = { calls: 1, rejected: 0 };
  const sample = await measure(
    async (latencies) => {
      // New keys land at random places in the key index, as caller-chosen keys do; replays read random records.
      const key = workload === "first" ? randomKey() : padded(Math.floor(Math.random() * rows));
      await timed(latencies, () => (workload === "read" ? target.read(key) : wrapped(toolArgs, { key })));
      return one;
    },
    1,
    durationMs,
  );
  if (workload === "replay" && tool.runs() !== 0) throw new Error("scale: a replay ran the tool");
  return { opsPerSec: sample.opsPerSec, p50Us: sample.p50Us, p99Us: sample.p99Us };
}

async function scaleOne(
  lib: Library,
  driver: ScaleDriver,
  settings: { rows: number; reps: number; durationMs: number; tag: string; progress: Progress },
): Promise<ScaleBackendResult> {
  const { rows, reps, durationMs, progress: p } = settings;
  const expired = Math.min(100_000, Math.max(1_000, Math.floor(rows / 10)));
  const smallTable = `bench_${settings.tag}_s_small`;
  const largeTable = `bench_${settings.tag}_s_large`;
  const purgeTable = `bench_${settings.tag}_s_purge`;
  const small = {
    store: await driver.store(smallTable),
    read: (key: string) => driver.read(smallTable, key),
  };
  const large = {
    store: await driver.store(largeTable),
    read: (key: string) => driver.read(largeTable, key),
  };
  const alone = await driver.store(purgeTable);
  p.note(
    `scale ${driver.name}: loading ${smallRows.toLocaleString("en-US")} and ${rows.toLocaleString("en-US")} records…`,
  );
  await driver.load(smallTable, smallRows, { expired: false, keyPrefix: "s" });
  const loadStarted = performance.now();
  await driver.load(largeTable, rows, { expired: false, keyPrefix: "s" });
  const loadSeconds = (performance.now() - loadStarted) / 1000;
  p.note(
    `scale ${driver.name}: ${rows.toLocaleString("en-US")} records loaded in ${loadSeconds.toFixed(1)} s`,
  );

  const measured: Record<ScaleWorkload, Record<"small" | "large", LatencyAtSize[]>> = {
    first: { small: [], large: [] },
    replay: { small: [], large: [] },
    read: { small: [], large: [] },
  };
  for (const workload of ["first", "replay", "read"] as const) {
    // Warm both, then alternate small and large (ABBA…) so drift hits both alike.
    await latencyAt(lib, small, smallRows, workload, durationMs / 2);
    await latencyAt(lib, large, rows, workload, durationMs / 2);
    for (let rep = 0; rep < reps; rep++) {
      const order = rep % 2 === 0 ? (["small", "large"] as const) : (["large", "small"] as const);
      for (const size of order) {
        const result = await latencyAt(
          lib,
          size === "small" ? small : large,
          size === "small" ? smallRows : rows,
          workload,
          durationMs,
        );
        measured[workload][size].push(result);
        p.note(
          `scale ${driver.name} ${workload} at ${size === "small" ? "10 k" : rows.toLocaleString("en-US")} rep ${rep + 1}: p50 ${formatUs(result.p50Us)} µs`,
        );
      }
    }
  }
  const med = (xs: LatencyAtSize[]): LatencyAtSize => ({
    opsPerSec: median(xs.map((x) => x.opsPerSec)),
    p50Us: median(xs.map((x) => x.p50Us)),
    p99Us: median(xs.map((x) => x.p99Us)),
  });
  const summary = (w: ScaleWorkload) => {
    const s = med(measured[w].small);
    const l = med(measured[w].large);
    return { small: s, large: l, p50Ratio: l.p50Us / s.p50Us };
  };

  // Purge: the same number of expired records, once among `rows` live ones and once alone.
  const purgeAll = async (store: IdempotencyStore) => {
    const started = performance.now();
    let total = 0;
    for (;;) {
      const { deleted } = await store.purge({ now: Date.now() });
      total += deleted;
      if (deleted === 0) break;
    }
    if (total !== expired)
      throw new Error(`scale ${driver.name}: purge removed ${total}, expected ${expired}`);
    return performance.now() - started;
  };
  const aloneMs: number[] = [];
  const amongLiveMs: number[] = [];
  for (let rep = 0; rep < reps; rep++) {
    for (const target of rep % 2 === 0 ? (["alone", "among"] as const) : (["among", "alone"] as const)) {
      const tableName = target === "alone" ? purgeTable : largeTable;
      await driver.load(tableName, expired, { expired: true, keyPrefix: `x${rep}-` });
      const ms = await purgeAll(target === "alone" ? alone : large.store);
      (target === "alone" ? aloneMs : amongLiveMs).push(ms);
      p.note(
        `scale ${driver.name} purge ${expired.toLocaleString("en-US")} expired ${target === "alone" ? "alone" : `among ${rows.toLocaleString("en-US")} live`} rep ${rep + 1}: ${ms.toFixed(0)} ms`,
      );
    }
  }
  return {
    rows: { small: smallRows, large: rows },
    loadSeconds,
    first: summary("first"),
    replay: summary("replay"),
    read: summary("read"),
    purge: { expired, aloneMs, amongLiveMs, ratio: median(amongLiveMs) / median(aloneMs) },
  };
}

function sqliteDriver(lib: Library, file: string): ScaleDriver {
  const db = openBenchDatabase(file);
  const reads = new Map<string, ReturnType<typeof db.prepare>>();
  return {
    name: "sqlite",
    async store(table) {
      const store = lib.sqlite.sqliteStore({ database: db, table });
      store.migrate();
      return store;
    },
    async load(table, count, { expired, keyPrefix }) {
      const now = Date.now();
      // One statement in one transaction: SQLite generates the rows itself.
      db.prepare(
        `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ? - 1)
         INSERT INTO "${table}" (scope, key, tool, fingerprint, status, token, created_at, updated_at,
           lease_expires_at, expires_at, attempts, result, error)
         SELECT 'default', ? || printf('%08d', i), 'send_email', ?, 'completed', 't' || i, ?, ?, ?, ?, 1, ?, NULL FROM n`,
      ).run(
        count,
        keyPrefix,
        lib.core.fingerprint(toolArgs),
        now - dayMs,
        now - dayMs,
        now - dayMs,
        expired ? now - 1000 : now + dayMs,
        resultText,
      );
      db.exec(`ANALYZE "${table}"`);
    },
    async read(table, key) {
      let statement = reads.get(table);
      if (!statement) {
        statement = db.prepare(`SELECT * FROM "${table}" WHERE scope = 'default' AND key = ?`);
        reads.set(table, statement);
      }
      if (statement.get(key) === undefined) throw new Error(`scale sqlite: no record ${key} in ${table}`);
    },
    async close() {
      db.close();
      removeDatabase(file);
    },
  };
}

async function postgresDriver(lib: Library, url: string): Promise<ScaleDriver> {
  const postgres = lib.postgres;
  if (!postgres) throw new Skip("idempotool/postgres is not built");
  const pool = connectPool(url);
  try {
    await pool.query("SELECT 1");
  } catch (error) {
    await pool.end();
    throw new Skip(`PostgreSQL is not reachable: ${(error as Error).message}`);
  }
  const tables: string[] = [];
  return {
    name: "postgres",
    async store(table) {
      tables.push(table);
      const store = postgres.postgresStore({ client: pool, table });
      await store.migrate();
      return store;
    },
    async load(table, count, { expired, keyPrefix }) {
      const now = Date.now();
      await pool.query(
        `INSERT INTO "${table}" (scope, key, tool, fingerprint, status, token, created_at, updated_at,
           lease_expires_at, expires_at, attempts, result, error)
         SELECT 'default', $1 || lpad(i::text, 8, '0'), 'send_email', $2, 'completed', 't' || i, $3, $3, $3, $4, 1, $5, NULL
         FROM generate_series(0, $6::int - 1) AS i`,
        [
          keyPrefix,
          lib.core.fingerprint(toolArgs),
          now - dayMs,
          expired ? now - 1000 : now + dayMs,
          resultText,
          count,
        ],
      );
      await pool.query(`VACUUM ANALYZE "${table}"`);
    },
    async read(table, key) {
      const { rowCount } = await pool.query({
        name: `bench-scale-read-${table}`,
        text: `SELECT * FROM "${table}" WHERE scope = 'default' AND key = $1`,
        values: [key],
      });
      if (rowCount !== 1) throw new Error(`scale postgres: no record ${key} in ${table}`);
    },
    async close() {
      if (tables.length > 0)
        await pool.query(`DROP TABLE IF EXISTS ${tables.map((t) => `"${t}"`).join(", ")}`);
      await pool.query(dropClaimFunctionsSql(tables));
      await pool.end();
    },
  };
}

export async function runScale(
  lib: Library,
  options: { rows: number; quick: boolean; file: string; pgUrl: string; tag: string; progress: Progress },
): Promise<ScaleResult> {
  const settings = {
    rows: options.rows,
    reps: 3,
    durationMs: options.quick ? 200 : 1_000,
    tag: options.tag,
    progress: options.progress,
  };
  const skipped: Record<string, string> = {};
  let sqlite: ScaleBackendResult | undefined;
  let postgres: ScaleBackendResult | undefined;
  const sqliteRun = sqliteDriver(lib, options.file);
  try {
    sqlite = await scaleOne(lib, sqliteRun, settings);
  } finally {
    await sqliteRun.close();
  }
  try {
    const driver = await postgresDriver(lib, options.pgUrl);
    try {
      postgres = await scaleOne(lib, driver, settings);
    } finally {
      await driver.close();
    }
  } catch (error) {
    if (!(error instanceof Skip)) throw error;
    skipped[BackendName.postgres] = error.message;
    options.progress.note(`scale postgres skipped: ${error.message}`);
  }
  return { ...(sqlite ? { sqlite } : {}), ...(postgres ? { postgres } : {}), skipped };
}

export function scaleTable(result: ScaleResult): string {
  const rows: string[][] = [];
  for (const [name, r] of [
    ["sqlite", result.sqlite],
    ["postgres", result.postgres],
  ] as const) {
    if (!r) {
      rows.push([name, "—", "—", "—", "—", `skipped: ${result.skipped[name] ?? "not run"}`]);
      continue;
    }
    const large = r.rows.large.toLocaleString("en-US");
    for (const w of ["first", "replay"] as const) {
      const label = w === "first" ? "first call (claim + settle)" : "replay";
      rows.push([
        name,
        `${label} p50 µs`,
        formatUs(r[w].small.p50Us),
        formatUs(r[w].large.p50Us),
        formatRatio(r[w].p50Ratio),
        `records: 10 k vs ${large}`,
      ]);
      rows.push([
        name,
        `${label} p99 µs`,
        formatUs(r[w].small.p99Us),
        formatUs(r[w].large.p99Us),
        formatRatio(r[w].large.p99Us / r[w].small.p99Us),
        "",
      ]);
      rows.push([
        name,
        `${label} ops/s`,
        formatOps(r[w].small.opsPerSec),
        formatOps(r[w].large.opsPerSec),
        formatRatio(r[w].large.opsPerSec / r[w].small.opsPerSec),
        "",
      ]);
      if (w === "replay") {
        rows.push([
          name,
          "the same read without idempotool: SELECT by key, p50 µs",
          formatUs(r.read.small.p50Us),
          formatUs(r.read.large.p50Us),
          formatRatio(r.read.p50Ratio),
          "the database's own growth",
        ]);
      }
    }
    rows.push([
      name,
      `purge ${r.purge.expired.toLocaleString("en-US")} expired, ms`,
      formatOps(median(r.purge.aloneMs)),
      formatOps(median(r.purge.amongLiveMs)),
      formatRatio(r.purge.ratio),
      `alone vs among ${large} live; load of ${large}: ${r.loadSeconds.toFixed(1)} s`,
    ]);
  }
  return table(
    ["store", "measure (c1, idempotent())", "small", "large", "large ÷ small", "notes"],
    rows,
    [2, 3, 4],
  );
}
