/**
 * OP-2 on SQLite: `BEGIN IMMEDIATE` takes the write lock first, so a repeat from another connection
 * waits (busy timeout) until this transaction commits, then sees the committed row and replays.
 */
import { iso } from "../core/time.js";
import { sqlIdentifier } from "./sql-identifier.js";
import { inTransaction, type SqliteDatabaseLike } from "./sql-shapes.js";
import {
  type ResolvedTransactional,
  replayRow,
  resolveTransactional,
  storedResult,
  type TransactionalOnceOptions,
  type TransactionalOutcome,
  toolColumnMissing,
} from "./transactional-once.js";

/**
 * The dedup table {@link sqliteTransactionalOnce} uses: one row per committed (scope, key), with the tool
 * that committed it; times in epoch ms.
 *
 * @example
 * import Database from "better-sqlite3";
 * import { sqliteDedupTableSql } from "idempotool/ops";
 *
 * new Database("app.db").exec(sqliteDedupTableSql("order_dedup"));
 */
export function sqliteDedupTableSql(table: string): string {
  const name = sqlIdentifier(table, "table");
  return (
    `CREATE TABLE IF NOT EXISTS ${name} (` +
    "scope TEXT NOT NULL, key TEXT NOT NULL, tool TEXT NOT NULL, fingerprint TEXT NOT NULL, result TEXT, " +
    "created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, PRIMARY KEY (scope, key)) WITHOUT ROWID"
  );
}

// One connection holds one transaction at a time: calls on the same Database queue behind each other.
const queues = new WeakMap<object, Promise<unknown>>();

/**
 * Run `write` and record the key in ONE SQLite transaction. The first call runs `write(db)` (it may be
 * async; use the same `db` for the business write); if it throws, everything rolls back and the key
 * stays free. A repeat of the same tool with the same key and arguments returns the committed result
 * without running; other arguments, or another tool, under the same key throw `idempotency_key_conflict`.
 *
 * `db` is a better-sqlite3 `Database` or a node:sqlite `DatabaseSync`. While `write` runs, the connection
 * belongs to this transaction: calls through the same database are queued, and other connections wait on
 * SQLite's write lock for as long as their busy timeout allows (the `timeout` option of either driver:
 * better-sqlite3's default is 5 s, node:sqlite's is 0, so give a `DatabaseSync` one).
 *
 * @example
 * import Database from "better-sqlite3";
 * import { sqliteDedupTableSql, sqliteTransactionalOnce } from "idempotool/ops";
 *
 * const db = new Database("app.db");
 * db.exec(sqliteDedupTableSql("order_dedup"));
 * db.exec("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT)");
 * const args = { item: "book" };
 * const outcome = await sqliteTransactionalOnce(db, { table: "order_dedup", tool: "place_order", key: "turn-7-order", args }, (tx) => {
 *   const { lastInsertRowid } = tx.prepare("INSERT INTO orders (item) VALUES (?)").run(args.item) as { lastInsertRowid: number | bigint };
 *   return { orderId: Number(lastInsertRowid) };
 * });
 */
export async function sqliteTransactionalOnce<D extends SqliteDatabaseLike, R>(
  db: D,
  options: TransactionalOnceOptions,
  write: (tx: D) => R | Promise<R>,
): Promise<TransactionalOutcome<Awaited<R>>> {
  const o = resolveTransactional(options, false);
  const previous = queues.get(db) ?? Promise.resolve();
  const run = previous.then(
    () => transact(db, o, write),
    () => transact(db, o, write),
  );
  queues.set(
    db,
    run.catch(() => undefined),
  );
  return run;
}

async function transact<D extends SqliteDatabaseLike, R>(
  db: D,
  o: ResolvedTransactional,
  write: (tx: D) => R | Promise<R>,
): Promise<TransactionalOutcome<Awaited<R>>> {
  db.exec("BEGIN IMMEDIATE");
  try {
    const now = o.clock.now();
    db.prepare(`DELETE FROM ${o.table} WHERE scope = ? AND key = ? AND expires_at <= ?`).run(
      o.scope,
      o.key,
      now,
    );
    const existing = selectRow(db, o).get(o.scope, o.key) as
      | {
          tool: string | null;
          fingerprint: string;
          result: string | null;
          // BigInt where the caller's connection reads integers so.
          created_at: number | bigint;
          expires_at: number | bigint;
        }
      | null
      | undefined;
    // No row: `undefined` on better-sqlite3 and node:sqlite, `null` on bun:sqlite.
    if (existing != null) {
      db.exec("ROLLBACK");
      return replayRow<Awaited<R>>(o, {
        tool: existing.tool,
        fingerprint: existing.fingerprint,
        result: existing.result,
        createdAt: Number(existing.created_at),
        expiresAt: Number(existing.expires_at),
      });
    }
    const result: Awaited<R> = await write(db);
    db.prepare(
      `INSERT INTO ${o.table} (scope, key, tool, fingerprint, result, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
    ).run(o.scope, o.key, o.tool, o.fingerprint, storedResult(o, result), now, now + o.ttlMs);
    db.exec("COMMIT");
    return {
      result,
      was_replay: false,
      original_called_at: iso(now),
      idempotency_key: o.key,
    };
  } catch (error) {
    if (inTransaction(db)) db.exec("ROLLBACK");
    throw error;
  }
}

/** The repeat's read of the row; on a table made before the tool column, the error that says how to add it. */
function selectRow(db: SqliteDatabaseLike, o: ResolvedTransactional) {
  try {
    return db.prepare(
      `SELECT tool, fingerprint, result, created_at, expires_at FROM ${o.table} WHERE scope = ? AND key = ?`,
    );
  } catch (error) {
    // SQLite's messages are not translated: this one names the column it could not find.
    if (error instanceof Error && /\bno such column: tool\b/.test(error.message)) {
      throw toolColumnMissing(o, error);
    }
    throw error;
  }
}
