import { mkdirSync, rmSync } from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import type { IdempotencyStore } from "../../../src/index.js";
import type { Library } from "../library.js";
import { countedTool, type Subject, SubjectName, singleFlight, type ToolArgs } from "../subject.js";
import { BackendName, type BackendSetup, defaultConcurrencies } from "./backend.js";
import { idempotoolSubject } from "./memory.js";

const dayMs = 24 * 60 * 60 * 1000;
const leaseMs = 60_000;

/** A database file like the one `sqliteStore({ path })` opens: WAL, synchronous=NORMAL, a busy timeout. */
export function openBenchDatabase(file: string): Database.Database {
  mkdirSync(path.dirname(file), { recursive: true });
  const db = new Database(file);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma("busy_timeout = 5000");
  return db;
}

export function removeDatabase(file: string): void {
  for (const suffix of ["", "-wal", "-shm"]) rmSync(`${file}${suffix}`, { force: true });
}

/** The floor table: the store's columns, primary key and expiry index, so a row costs the same to write. */
export function createFloorTable(db: Database.Database, table: string): void {
  db.exec(`CREATE TABLE IF NOT EXISTS ${table} (
    scope TEXT NOT NULL, key TEXT NOT NULL, tool TEXT NOT NULL, fingerprint TEXT NOT NULL,
    status TEXT NOT NULL, token TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
    lease_expires_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, attempts INTEGER NOT NULL,
    result TEXT, error TEXT, PRIMARY KEY (scope, key));
    CREATE INDEX IF NOT EXISTS ${table}_expires_at ON ${table} (expires_at);`);
}

/**
 * The floor on the same connection: a first call is one prepared INSERT … ON CONFLICT DO NOTHING (claim) and
 * one UPDATE (settle); a replay is one SELECT by primary key.
 */
export function sqliteFloor(db: Database.Database, table: string, fingerprint: string): Subject {
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
    if (claim.run("default", key, fingerprint, key, now, now, now + leaseMs, now + dayMs).changes !== 1) {
      throw new Error(`sqlite floor: ${key} is already claimed`);
    }
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
    description: `better-sqlite3, same connection: prepared INSERT … ON CONFLICT DO NOTHING + UPDATE; replay: SELECT by primary key`,
    first,
    replay,
    contended: singleFlight(first, replay),
    validatesPayload: false,
    runs: tool.runs,
  };
}

export function sqliteBackends(
  lib: Library,
  file: string,
  fingerprint: string,
  candidate?: Library,
): BackendSetup {
  const db = openBenchDatabase(file);
  const store = lib.sqlite.sqliteStore({ database: db, table: "bench_idempotool" });
  const behind = lib.sqlite.sqliteStore({ database: db, table: "bench_tiered" });
  const tiered = lib.core.tieredStore({ store: behind, maxEntries: 10_000 });
  const candidateStore = candidate?.sqlite.sqliteStore({ database: db, table: "bench_candidate" });
  const candidateTiered = candidate?.core.tieredStore({
    store: candidate.sqlite.sqliteStore({ database: db, table: "bench_candidate_tiered" }),
    maxEntries: 10_000,
  });
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
        name: BackendName.sqlite,
        description: "better-sqlite3, one file, WAL, synchronous=NORMAL",
        concurrencies: defaultConcurrencies,
        subjects: [
          idempotoolSubject(lib, () => store, "sqliteStore({ database })"),
          sqliteFloor(db, "bench_floor", fingerprint),
          ...candidateSubject(candidateStore, "sqliteStore({ database })"),
        ],
      },
      {
        name: BackendName.tieredSqlite,
        description: "tieredStore (LRU 10 000) in front of sqliteStore on the same file",
        concurrencies: defaultConcurrencies,
        subjects: [
          idempotoolSubject(lib, () => tiered, "tieredStore({ store: sqliteStore })"),
          ...candidateSubject(candidateTiered, "tieredStore({ store: sqliteStore })"),
        ],
      },
    ],
    info: { sqlite: version, sqliteFile: file },
    async close() {
      db.close();
      removeDatabase(file);
    },
  };
}
