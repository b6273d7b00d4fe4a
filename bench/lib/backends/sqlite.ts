import { mkdirSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import Database from "better-sqlite3";
import type { IdempotencyStore } from "../../../src/index.js";
import type { AnySqliteDatabase, NodeSqliteDatabase } from "../../../src/sqlite/index.js";
import type { Library } from "../library.js";
import { countedTool, type Subject, SubjectName, singleFlight, type ToolArgs } from "../subject.js";
import {
  type BackendSetup,
  defaultConcurrencies,
  Skip,
  SqliteDriver,
  sqliteBackendNames,
} from "./backend.js";
import { idempotoolSubject } from "./memory.js";

const require = createRequire(import.meta.url);
const dayMs = 24 * 60 * 60 * 1000;
const leaseMs = 60_000;
const busyTimeoutMs = 5000;

/** The few methods the floor calls, which a better-sqlite3 `Database` and a node:sqlite `DatabaseSync` share. */
interface FloorDatabase {
  prepare(sql: string): {
    run(...params: unknown[]): { readonly changes: number | bigint };
    get(...params: unknown[]): unknown;
  };
  exec(sql: string): unknown;
}

/** A database file like the one `sqliteStore({ path })` opens: WAL, synchronous=NORMAL, a busy timeout. */
function configure<D extends FloorDatabase>(db: D): D {
  db.exec("PRAGMA journal_mode = WAL");
  db.exec("PRAGMA synchronous = NORMAL");
  db.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
  return db;
}

/** A better-sqlite3 connection to `file`, set up as {@link configure} says. */
export function openBenchDatabase(file: string): Database.Database {
  mkdirSync(path.dirname(file), { recursive: true });
  return configure(new Database(file));
}

type NodeSqlite = { DatabaseSync: new (location: string) => NodeSqliteDatabase & FloorDatabase };

/**
 * A node:sqlite connection to `file`, set up as {@link configure} says. Node 22 warns that the module is
 * experimental when it first loads: the warning is the bench's choice, not news, so that one is dropped.
 */
function openNodeBenchDatabase(file: string): NodeSqliteDatabase & FloorDatabase {
  let module: NodeSqlite;
  const emitWarning = process.emitWarning;
  process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
    if (String(warning).includes("SQLite is an experimental feature")) return;
    (emitWarning as (...args: unknown[]) => void).call(process, warning, ...rest);
  }) as typeof process.emitWarning;
  try {
    module = require("node:sqlite") as NodeSqlite;
  } catch (error) {
    throw new Skip(`node:sqlite cannot be loaded on Node ${process.version}: ${(error as Error).message}`);
  } finally {
    process.emitWarning = emitWarning;
  }
  mkdirSync(path.dirname(file), { recursive: true });
  return configure(new module.DatabaseSync(file));
}

/** A connection on `driver`, or a Skip saying why this Node cannot have one. */
export function openDriverDatabase(driver: SqliteDriver, file: string): AnySqliteDatabase & FloorDatabase {
  if (driver === SqliteDriver.node) return openNodeBenchDatabase(file);
  try {
    return openBenchDatabase(file);
  } catch (error) {
    // Its native addon is built per Node ABI: scripts/node.sh --with-better-sqlite3 builds the one needed.
    throw new Skip(`better-sqlite3 cannot be opened on Node ${process.version}: ${(error as Error).message}`);
  }
}

export function removeDatabase(file: string): void {
  for (const suffix of ["", "-wal", "-shm"]) rmSync(`${file}${suffix}`, { force: true });
}

/** The floor table: the store's columns, primary key and expiry index, so a row costs the same to write. */
export function createFloorTable(db: FloorDatabase, table: string): void {
  db.exec(`CREATE TABLE IF NOT EXISTS ${table} (
    scope TEXT NOT NULL, key TEXT NOT NULL, tool TEXT NOT NULL, fingerprint TEXT NOT NULL,
    status TEXT NOT NULL, token TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
    lease_expires_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, attempts INTEGER NOT NULL,
    result TEXT, error TEXT, PRIMARY KEY (scope, key));
    CREATE INDEX IF NOT EXISTS ${table}_expires_at ON ${table} (expires_at);`);
}

/**
 * The floor on the same connection: a first call is one prepared INSERT … ON CONFLICT DO NOTHING (claim) and
 * one UPDATE (settle); a replay is one SELECT by primary key. The same code on either driver.
 */
export function sqliteFloor(
  db: FloorDatabase,
  driver: SqliteDriver,
  table: string,
  fingerprint: string,
): Subject {
  createFloorTable(db, table);
  const tool = countedTool();
  const claim = db.prepare(
    `INSERT INTO ${table} (scope, key, tool, fingerprint, status, token, created_at, updated_at,
       lease_expires_at, expires_at, attempts) VALUES (?, ?, 'send_email', ?, 'in_progress', ?, ?, ?, ?, ?, 1)
     ON CONFLICT DO NOTHING`,
  );
  const settle = db.prepare(
    `UPDATE ${table} SET status = 'completed', result = ?, updated_at = ?, lease_expires_at = ?, expires_at = ?
     WHERE scope = ? AND key = ? AND token = ?`,
  );
  const read = db.prepare(
    `SELECT status, fingerprint, result FROM ${table} WHERE scope = ? AND key = ? AND expires_at > ?`,
  );
  const first = async (key: string, args: ToolArgs) => {
    const now = Date.now();
    const { changes } = claim.run("default", key, fingerprint, key, now, now, now + leaseMs, now + dayMs);
    if (Number(changes) !== 1) throw new Error(`sqlite floor: ${key} is already claimed`);
    const result = await tool.fn(args);
    const at = Date.now();
    settle.run(JSON.stringify(result), at, at, at + dayMs, "default", key, key);
    return result;
  };
  const replay = async (key: string) => {
    const row = read.get("default", key, Date.now()) as
      | { status: string; fingerprint: string; result: string | null }
      | undefined;
    if (row?.status !== "completed" || row.fingerprint !== fingerprint || row.result === null) {
      throw new Error(`sqlite floor: ${key} holds no completed record`);
    }
    return JSON.parse(row.result) as unknown;
  };
  return {
    name: SubjectName.floor,
    description: `${driver}, same connection: prepared INSERT … ON CONFLICT DO NOTHING + UPDATE; replay: SELECT by primary key`,
    first,
    replay,
    contended: singleFlight(first, replay),
    validatesPayload: false,
    runs: tool.runs,
  };
}

/**
 * sqliteStore, and tieredStore in front of it, on one driver's connection to its own file (the floor on the
 * same connection). A driver this Node cannot load is skipped with the reason; the other still runs.
 */
export function sqliteBackends(
  lib: Library,
  driver: SqliteDriver,
  file: string,
  fingerprint: string,
  candidate?: Library,
): BackendSetup {
  const db = openDriverDatabase(driver, file);
  const names = sqliteBackendNames[driver];
  const open = (library: Library, table: string) => {
    try {
      return library.sqlite.sqliteStore({ database: db, table });
    } catch (error) {
      throw new Skip(
        `${library.dir}: sqliteStore does not take a ${driver} database: ${(error as Error).message}`,
      );
    }
  };
  try {
    const store = open(lib, "bench_idempotool");
    const tiered = lib.core.tieredStore({ store: open(lib, "bench_tiered"), maxEntries: 10_000 });
    const candidateStore = candidate ? open(candidate, "bench_candidate") : undefined;
    const candidateTiered = candidate
      ? candidate.core.tieredStore({ store: open(candidate, "bench_candidate_tiered"), maxEntries: 10_000 })
      : undefined;
    const candidateSubject = (store: IdempotencyStore | undefined, what: string) =>
      candidate && store
        ? [
            idempotoolSubject(
              candidate,
              () => store,
              `${what} from ${candidate.dir}`,
              false,
              SubjectName.candidate,
            ),
          ]
        : [];
    const version = (db.prepare("SELECT sqlite_version() AS v").get() as { v: string }).v;
    return {
      backends: [
        {
          name: names.store,
          family: "sqlite",
          description: `${driver}, one file, WAL, synchronous=NORMAL`,
          concurrencies: defaultConcurrencies,
          subjects: [
            idempotoolSubject(lib, () => store, `sqliteStore({ database: <${driver}> })`),
            sqliteFloor(db, driver, "bench_floor", fingerprint),
            ...candidateSubject(candidateStore, `sqliteStore({ database: <${driver}> })`),
          ],
        },
        {
          name: names.tiered,
          family: "tiered-sqlite",
          description: `tieredStore (LRU 10 000) in front of sqliteStore on the same ${driver} file`,
          concurrencies: defaultConcurrencies,
          subjects: [
            idempotoolSubject(lib, () => tiered, "tieredStore({ store: sqliteStore })"),
            ...candidateSubject(candidateTiered, "tieredStore({ store: sqliteStore })"),
          ],
        },
      ],
      info: { [names.store]: `SQLite ${version}` },
      async close() {
        db.close();
        removeDatabase(file);
      },
    };
  } catch (error) {
    db.close();
    removeDatabase(file);
    throw error;
  }
}
