/**
 * OP-4, insert-once: a single-row insert that a repeat turns into a read of the row already there.
 * The database's unique constraint makes it atomic (no check-then-insert race).
 */
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import { sqlIdentifier } from "./sql-identifier.js";
import type { PgQueryableText, SqliteDatabaseLike } from "./sql-shapes.js";

/** What to insert, and which unique columns decide that a row is already there. */
export interface InsertOnceRequest {
  /** The table, optionally schema-qualified on PostgreSQL. Checked, then quoted. */
  readonly table: string;
  /** Column → value. Values are always bound parameters. */
  readonly values: Readonly<Record<string, unknown>>;
  /**
   * The columns of a unique constraint or primary key (e.g. `["idempotency_key"]`); each must be in
   * `values`. The existing row is looked up by them.
   */
  readonly conflict: readonly string[];
}

/** Whether this call inserted the row, and the row as the table holds it. */
export type InsertOnceResult<Row> =
  | { readonly inserted: true; readonly row: Row }
  | { readonly inserted: false; readonly row: Row };

interface Statement {
  readonly insert: string;
  readonly select: string;
  readonly insertValues: unknown[];
  readonly selectValues: unknown[];
}

// A row that conflicts and is then deleted before we read it is rare; a few rounds settle it.
const attempts = 3;

function statement(
  request: InsertOnceRequest,
  placeholder: (index: number) => string,
  schema: boolean,
): Statement {
  const table = sqlIdentifier(request.table, "table", schema);
  const columns = Object.keys(request.values ?? {});
  if (columns.length === 0) invalid("values must name at least one column");
  if (!Array.isArray(request.conflict) || request.conflict.length === 0) {
    invalid("conflict must name the columns of a unique constraint");
  }
  for (const column of request.conflict) {
    if (!Object.hasOwn(request.values, column)) invalid(`conflict column "${column}" must be in values`);
  }
  const quoted = columns.map((c) => sqlIdentifier(c, "column"));
  const conflict = request.conflict.map((c) => sqlIdentifier(c, "column"));
  return {
    insert:
      `INSERT INTO ${table} (${quoted.join(", ")}) VALUES (${columns.map((_, i) => placeholder(i + 1)).join(", ")}) ` +
      `ON CONFLICT (${conflict.join(", ")}) DO NOTHING RETURNING *`,
    select: `SELECT * FROM ${table} WHERE ${conflict.map((c, i) => `${c} = ${placeholder(i + 1)}`).join(" AND ")}`,
    insertValues: columns.map((c) => request.values[c]),
    selectValues: request.conflict.map((c) => request.values[c]),
  };
}

function invalid(problem: string): never {
  throw new IdempotencyError(ErrorCode.invalidArguments, `insertOnce(): ${problem}.`);
}

/**
 * Insert a row unless one with the same `conflict` columns exists; say which happened.
 * Runs `INSERT … ON CONFLICT (…) DO NOTHING RETURNING *`, then reads the existing row when nothing came
 * back. A concurrent insert of the same key that is not yet committed makes this call wait for it.
 * Inside your own transaction, pass the transaction's client.
 *
 * @example
 * import pg from "pg";
 * import { postgresInsertOnce } from "idempotool/ops";
 *
 * const pool = new pg.Pool();
 * const { inserted, row } = await postgresInsertOnce<{ id: number; idempotency_key: string }>(pool, {
 *   table: "orders",
 *   values: { idempotency_key: "turn-7-order", item: "book" },
 *   conflict: ["idempotency_key"],
 * });
 * // inserted is false on every repeat, and row is the order the first call created.
 */
export async function postgresInsertOnce<Row = Record<string, unknown>>(
  db: PgQueryableText,
  request: InsertOnceRequest,
): Promise<InsertOnceResult<Row>> {
  const s = statement(request, (i) => `$${i}`, true);
  for (let attempt = 0; attempt < attempts; attempt++) {
    const inserted = await db.query(s.insert, s.insertValues);
    if (inserted.rows[0] !== undefined) return { inserted: true, row: inserted.rows[0] as Row };
    const existing = await db.query(s.select, s.selectValues);
    if (existing.rows[0] !== undefined) return { inserted: false, row: existing.rows[0] as Row };
  }
  throw new IdempotencyError(
    ErrorCode.invalidArguments,
    `insertOnce(): a row conflicting on (${request.conflict.join(", ")}) keeps disappearing before it can be read.`,
  );
}

/**
 * The SQLite form of {@link postgresInsertOnce} (SQLite ≥ 3.35 for `RETURNING`; better-sqlite3 12 bundles it).
 * Synchronous, since better-sqlite3 is: one statement decides, so it is atomic across connections too.
 *
 * @example
 * import Database from "better-sqlite3";
 * import { sqliteInsertOnce } from "idempotool/ops";
 *
 * const db = new Database("app.db");
 * db.exec("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, idempotency_key TEXT UNIQUE, item TEXT)");
 * const { inserted, row } = sqliteInsertOnce<{ id: number }>(db, {
 *   table: "orders",
 *   values: { idempotency_key: "turn-7-order", item: "book" },
 *   conflict: ["idempotency_key"],
 * });
 */
export function sqliteInsertOnce<Row = Record<string, unknown>>(
  db: SqliteDatabaseLike,
  request: InsertOnceRequest,
): InsertOnceResult<Row> {
  const s = statement(request, () => "?", false);
  const insert = db.prepare(s.insert);
  const select = db.prepare(s.select);
  for (let attempt = 0; attempt < attempts; attempt++) {
    const inserted = insert.get(...s.insertValues.map(sqliteValue));
    if (inserted !== undefined) return { inserted: true, row: inserted as Row };
    const existing = select.get(...s.selectValues.map(sqliteValue));
    if (existing !== undefined) return { inserted: false, row: existing as Row };
  }
  throw new IdempotencyError(
    ErrorCode.invalidArguments,
    `insertOnce(): a row conflicting on (${request.conflict.join(", ")}) keeps disappearing before it can be read.`,
  );
}

// better-sqlite3 binds no booleans; store them as 0/1 like SQLite itself does.
function sqliteValue(value: unknown): unknown {
  return typeof value === "boolean" ? (value ? 1 : 0) : value;
}
