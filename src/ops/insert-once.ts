/**
 * OP-4, insert-once: a single-row insert that a repeat turns into a read of the row already there.
 * The database's unique constraint makes it atomic (no check-then-insert race). A repeat is the same
 * call only when the row holds the values it asks for; the database compares them, by each column's
 * own type, so a table needs no extra column for it.
 */
import { canonicalJson } from "../core/canonical-json.js";
import { ErrorCode, IdempotencyError, KeyConflictError } from "../core/errors.js";
import { sha256Hex } from "../core/fingerprint.js";
import type { IdempotencyRecord } from "../core/store.js";
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
  /**
   * The columns a repeat must match to be the same call; a row already there under the key with other
   * values in them is an `idempotency_key_conflict`. Default: every column of `values` outside
   * `conflict`. Leave out a value made fresh on each attempt (a timestamp taken at call time), and a
   * column whose type has no equality (PostgreSQL `json`: use `jsonb`).
   */
  readonly compare?: readonly string[] | undefined;
}

/** Whether this call inserted the row, and the row as the table holds it. */
export type InsertOnceResult<Row> =
  | { readonly inserted: true; readonly row: Row }
  | { readonly inserted: false; readonly row: Row };

interface Statement {
  readonly insert: string;
  /** The existing row, plus a flag saying whether it holds the compared values. */
  readonly select: string;
  readonly insertValues: unknown[];
  readonly selectValues: unknown[];
}

// The flag's column in the select's answer; taken off the row before it is handed back.
const sameColumn = "idempotool_same_values";

// A row that conflicts and is then deleted before we read it is rare; a few rounds settle it.
const attempts = 3;

function statement(
  request: InsertOnceRequest,
  placeholder: (index: number) => string,
  dialect: "postgres" | "sqlite",
): Statement {
  const schema = dialect === "postgres";
  const table = sqlIdentifier(request.table, "table", schema);
  const columns = Object.keys(request.values ?? {});
  if (columns.length === 0) invalidRequest("values must name at least one column");
  if (!Array.isArray(request.conflict) || request.conflict.length === 0) {
    invalidRequest("conflict must name the columns of a unique constraint");
  }
  for (const column of request.conflict) {
    if (!Object.hasOwn(request.values, column))
      invalidRequest(`conflict column "${column}" must be in values`);
  }
  const compared = comparedColumns(request);
  const quoted = columns.map((c) => sqlIdentifier(c, "column"));
  const conflict = request.conflict.map((c) => sqlIdentifier(c, "column"));
  // Null-safe equality by the column's type: 12.5 and "12.50" in a numeric column, or true and 1 in
  // SQLite, are the same value, as the insert itself would have stored them.
  const equal = dialect === "postgres" ? "IS NOT DISTINCT FROM" : "IS";
  const same =
    compared.length === 0
      ? "1 = 1"
      : compared.map((c, i) => `${sqlIdentifier(c, "column")} ${equal} ${placeholder(i + 1)}`).join(" AND ");
  return {
    insert:
      `INSERT INTO ${table} (${quoted.join(", ")}) VALUES (${columns.map((_, i) => placeholder(i + 1)).join(", ")}) ` +
      `ON CONFLICT (${conflict.join(", ")}) DO NOTHING RETURNING *`,
    select:
      `SELECT *, (${same}) AS "${sameColumn}" FROM ${table} ` +
      `WHERE ${conflict.map((c, i) => `${c} = ${placeholder(compared.length + i + 1)}`).join(" AND ")}`,
    insertValues: columns.map((c) => request.values[c]),
    // In the order of their placeholders in the text: SQLite binds `?` by position.
    selectValues: [...compared, ...request.conflict].map((c) => request.values[c]),
  };
}

function comparedColumns(request: InsertOnceRequest): readonly string[] {
  if (request.compare === undefined) {
    return Object.keys(request.values).filter((c) => !request.conflict.includes(c));
  }
  if (!Array.isArray(request.compare)) invalidRequest("compare must be a list of columns");
  for (const column of request.compare) {
    if (!Object.hasOwn(request.values, column))
      invalidRequest(`compare column "${column}" must be in values`);
  }
  return request.compare;
}

/**
 * The row already under the key, or a conflict when it holds other values than this call's.
 * `existing` is the select's answer, flag included.
 */
function existingRow<Row>(request: InsertOnceRequest, existing: Record<string, unknown>): Row {
  const { [sameColumn]: same, ...row } = existing;
  // 1, or 1n from a connection that reads integers as BigInt (the caller's default, not a difference).
  if (same === true || same === 1 || same === 1n) return row as Row;
  const compared = comparedColumns(request);
  const pick = (from: Readonly<Record<string, unknown>>) =>
    Object.fromEntries(compared.map((c) => [c, from[c]]));
  throw new KeyConflictError(
    conflictRecord(request, fingerprintOf(pick(row))),
    fingerprintOf(pick(request.values)),
  );
}

// What a conflict error reports about the row: the key is the conflict columns' values, the "tool" the
// table. The row's insert time is not known, so the error names none.
function conflictRecord(request: InsertOnceRequest, fingerprint: string): IdempotencyRecord {
  const keyValues = request.conflict.map((c) => request.values[c]);
  return {
    scope: "",
    key: keyValues.length === 1 ? String(keyValues[0]) : fingerprintText(keyValues),
    tool: request.table,
    fingerprint,
    status: "completed",
    token: "",
    createdAt: Number.NaN,
    updatedAt: Number.NaN,
    leaseExpiresAt: Number.NaN,
    expiresAt: Number.NaN,
    attempts: 1,
    result: null,
    error: null,
  };
}

// The fingerprints on the error are for reading, not for deciding (the database decided): values
// JSON has no exact form for (a Buffer, a BigInt) are written as best they can be.
function fingerprintOf(values: Readonly<Record<string, unknown>>): string {
  return sha256Hex(fingerprintText(values));
}

function fingerprintText(value: unknown): string {
  try {
    return canonicalJson(value, { bigint: "string" });
  } catch {
    return String(value);
  }
}

/** The columns are the arguments of one insert, not options of a factory: `invalid_arguments`. */
function invalidRequest(problem: string): never {
  throw new IdempotencyError(ErrorCode.invalidArguments, `insertOnce(): ${problem}.`);
}

/**
 * Insert a row unless one with the same `conflict` columns exists; say which happened.
 * Runs `INSERT … ON CONFLICT (…) DO NOTHING RETURNING *`, then reads the existing row when nothing came
 * back. A concurrent insert of the same key that is not yet committed makes this call wait for it.
 * Inside your own transaction, pass the transaction's client.
 *
 * A repeat is the same call only if the row holds its values (the `compare` columns, compared by the
 * database by each column's type): the same key with other values throws a {@link KeyConflictError}
 * (`idempotency_key_conflict`) and changes nothing. See docs/operation-models.md.
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
 * // inserted is false on every repeat, and row is the order the first call created; the same key with
 * // another item throws idempotency_key_conflict.
 */
export async function postgresInsertOnce<Row = Record<string, unknown>>(
  db: PgQueryableText,
  request: InsertOnceRequest,
): Promise<InsertOnceResult<Row>> {
  const s = statement(request, (i) => `$${i}`, "postgres");
  for (let attempt = 0; attempt < attempts; attempt++) {
    const inserted = await db.query(s.insert, s.insertValues);
    if (inserted.rows[0] !== undefined) return { inserted: true, row: inserted.rows[0] as Row };
    const existing = await db.query(s.select, s.selectValues);
    const found = existing.rows[0] as Record<string, unknown> | undefined;
    if (found !== undefined) return { inserted: false, row: existingRow<Row>(request, found) };
  }
  throw new IdempotencyError(
    ErrorCode.invalidArguments,
    `insertOnce(): a row conflicting on (${request.conflict.join(", ")}) keeps disappearing before it can be read.`,
  );
}

/**
 * The SQLite form of {@link postgresInsertOnce} (SQLite ≥ 3.35 for `RETURNING`; better-sqlite3 12 and
 * node:sqlite bundle a newer one). Takes a better-sqlite3 `Database` or a node:sqlite `DatabaseSync`.
 * Synchronous, since both drivers are: one statement decides, so it is atomic across connections too.
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
  const s = statement(request, () => "?", "sqlite");
  const insert = db.prepare(s.insert);
  const select = db.prepare(s.select);
  for (let attempt = 0; attempt < attempts; attempt++) {
    // No row is `undefined` on better-sqlite3 and node:sqlite, `null` on bun:sqlite: a conflict must never
    // read as an insert, or the caller runs its effect again.
    const inserted = insert.get(...s.insertValues.map(sqliteValue));
    // A plain object on every driver (node:sqlite answers rows without a prototype).
    if (inserted != null) return { inserted: true, row: { ...(inserted as object) } as Row };
    const existing = select.get(...s.selectValues.map(sqliteValue)) as
      | Record<string, unknown>
      | null
      | undefined;
    if (existing != null) return { inserted: false, row: existingRow<Row>(request, existing) };
  }
  throw new IdempotencyError(
    ErrorCode.invalidArguments,
    `insertOnce(): a row conflicting on (${request.conflict.join(", ")}) keeps disappearing before it can be read.`,
  );
}

// better-sqlite3 binds no booleans (node:sqlite does, as 0/1); store them as 0/1 like SQLite itself does.
function sqliteValue(value: unknown): unknown {
  return typeof value === "boolean" ? (value ? 1 : 0) : value;
}
