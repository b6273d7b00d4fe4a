/**
 * OP-2 on a transaction that is already open: the dedup row and the business write go through that
 * transaction's connection, inside a savepoint of their own, so they stand or fall together even when
 * the caller catches an error and commits the rest.
 */
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import { iso } from "../core/time.js";
import {
  type DedupRow,
  type ResolvedTransactional,
  replayRow,
  storedResult,
  type TransactionalOutcome,
  toolColumnMissing,
} from "./transactional-once.js";

/** The SQL families the OP-2 statements are written for. */
export type SqlDialect = "postgres" | "sqlite" | "mysql";

/**
 * One open transaction's connection, as the OP-2 steps use it: a statement with `?` placeholders (in
 * order) and the rows it answers (none for a statement without rows).
 */
export interface TransactionStatements {
  readonly dialect: SqlDialect;
  query(sql: string, values: readonly unknown[]): Promise<readonly Row[]>;
}

/** A row by column name, or by position (drivers such as Drizzle's SQLite proxy answer arrays). */
export type Row = Readonly<Record<string, unknown>> | readonly unknown[];

/** Column `index` (named `name`) of `row`. */
function cell(row: Row, index: number, name: string): unknown {
  return Array.isArray(row) ? row[index] : (row as Readonly<Record<string, unknown>>)[name];
}

/** An epoch-ms column: a number, a numeric string or a BigInt, as the driver reads it; anything else fails closed. */
function epochMs(value: unknown): number {
  const ms =
    typeof value === "number" || typeof value === "bigint" || typeof value === "string"
      ? Number(value)
      : Number.NaN;
  if (Number.isSafeInteger(ms)) return ms;
  throw new IdempotencyError(
    ErrorCode.storeUnavailable,
    `transactionalOnce(): the dedup table answered ${String(value)} where a time was expected; nothing ran.`,
  );
}

/** A claimed row (this call runs) or the committed row of another call (it replays or conflicts). */
type Claim = { readonly createdAt: number } | { readonly row: DedupRow };

// A purge or a rolled-back holder can make the row vanish between the conflict and the read; past this
// many rounds something else is wrong, and the call fails closed.
const claimRounds = 5;

// Savepoint names must differ between calls nested in one transaction (MySQL replaces a savepoint of the
// same name instead of stacking it).
let savepoints = 0;

/**
 * Claim the key, run `write`, store its result, all inside the open transaction `tx`. With `savepoint`
 * (a transaction the caller owns), the dedup row and the write are undone together when anything here
 * fails, whatever the caller then does with the transaction; without it, the caller rolls back.
 */
export async function onceInTransaction<R>(
  tx: TransactionStatements,
  o: ResolvedTransactional,
  write: () => R | Promise<R>,
  savepoint: boolean,
): Promise<TransactionalOutcome<Awaited<R>>> {
  const name = savepoint ? `idempotool_op2_${++savepoints}` : undefined;
  if (name !== undefined) await tx.query(`SAVEPOINT ${name}`, []);
  try {
    const claim = await claimKey(tx, o);
    if ("row" in claim) {
      // Nothing of ours to keep: drop the savepoint (an expired row removed on the way comes back).
      if (name !== undefined) await undo(tx, name);
      return replayRow<Awaited<R>>(o, claim.row);
    }
    const result: Awaited<R> = await write();
    const t = tableName(tx.dialect, o);
    await tx.query(`UPDATE ${t} SET result = ? WHERE scope = ? AND ${keyColumn(tx.dialect)} = ?`, [
      bound(tx.dialect, storedResult(o, result)),
      bound(tx.dialect, o.scope),
      bound(tx.dialect, o.key),
    ]);
    if (name !== undefined) await tx.query(`RELEASE SAVEPOINT ${name}`, []);
    return { result, was_replay: false, original_called_at: iso(claim.createdAt), idempotency_key: o.key };
  } catch (error) {
    const retry = mustRetryTransaction(tx.dialect, error);
    if (retry !== undefined) throw retry;
    if (name !== undefined) {
      try {
        await undo(tx, name);
      } catch {
        // The connection is gone or the transaction aborted: its commit fails too, so nothing is kept.
      }
    }
    throw error;
  }
}

async function undo(tx: TransactionStatements, name: string): Promise<void> {
  await tx.query(`ROLLBACK TO SAVEPOINT ${name}`, []);
  await tx.query(`RELEASE SAVEPOINT ${name}`, []);
}

/** Insert this call's row first: a concurrent repeat then waits on the key until this transaction ends. */
async function claimKey(tx: TransactionStatements, o: ResolvedTransactional): Promise<Claim> {
  const claimOnce =
    tx.dialect === "mysql" ? claimOnMysql : tx.dialect === "postgres" ? claimOnPostgres : claimOnSqlite;
  for (let round = 1; round <= claimRounds; round++) {
    const claim = await claimOnce(tx, o);
    if (claim !== "gone") return claim;
  }
  throw new IdempotencyError(
    ErrorCode.storeUnavailable,
    `transactionalOnce(): the dedup row of key "${o.key}" in ${o.table} kept vanishing between the ` +
      `conflict and the read (${claimRounds} rounds); nothing ran.`,
  );
}

// Column aliases carry no underscore: an ORM plugin that renames snake_case columns leaves them alone.
const rowColumns: Record<SqlDialect, string> = {
  postgres:
    "tool, fingerprint, result, (extract(epoch from created_at) * 1000)::bigint AS createdms, " +
    "(extract(epoch from expires_at) * 1000)::bigint AS expiresms",
  sqlite: "tool, fingerprint, result, created_at AS createdms, expires_at AS expiresms",
  mysql: "tool, fingerprint, result, created_at AS createdms, expires_at AS expiresms",
};

async function claimOnPostgres(tx: TransactionStatements, o: ResolvedTransactional): Promise<Claim | "gone"> {
  const t = o.table;
  // An expired row no longer absorbs repeats; removing it here keeps the unique key meaningful. Times are
  // the statement's, not now(): that is when the caller's transaction began, which may be long before.
  await tx.query(`DELETE FROM ${t} WHERE scope = ? AND key = ? AND expires_at <= statement_timestamp()`, [
    o.scope,
    o.key,
  ]);
  const claimed = await tx
    .query(
      `INSERT INTO ${t} (scope, key, tool, fingerprint, created_at, expires_at) ` +
        "VALUES (?, ?, ?, ?, statement_timestamp(), " +
        "statement_timestamp() + CAST(? AS double precision) * interval '1 millisecond') " +
        "ON CONFLICT (scope, key) DO NOTHING RETURNING (extract(epoch from created_at) * 1000)::bigint AS createdms",
      [o.scope, o.key, o.tool, o.fingerprint, o.ttlMs],
    )
    .catch((error: unknown) => {
      throw databaseCode(error) === "42703" ? toolColumnMissing(o, error) : error;
    });
  if (claimed[0] !== undefined) return { createdAt: epochMs(cell(claimed[0], 0, "createdms")) };
  // Committed by someone else (the INSERT waited for them if they were still open): replay, never run.
  return committedRow(tx, o, "");
}

async function claimOnSqlite(tx: TransactionStatements, o: ResolvedTransactional): Promise<Claim | "gone"> {
  const t = o.table;
  const now = o.clock.now();
  await tx.query(`DELETE FROM ${t} WHERE scope = ? AND key = ? AND expires_at <= ?`, [o.scope, o.key, now]);
  const claimed = await tx
    .query(
      `INSERT INTO ${t} (scope, key, tool, fingerprint, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?) ` +
        "ON CONFLICT (scope, key) DO NOTHING RETURNING created_at AS createdms",
      [o.scope, o.key, o.tool, o.fingerprint, now, now + o.ttlMs],
    )
    .catch((error: unknown) => {
      // SQLite's messages are not translated: this one names the column it could not find.
      throw error instanceof Error && /\bno such column: tool\b/.test(error.message)
        ? toolColumnMissing(o, error)
        : error;
    });
  if (claimed[0] !== undefined) return { createdAt: epochMs(cell(claimed[0], 0, "createdms")) };
  return committedRow(tx, o, "");
}

// The server's clock in epoch ms, as the MySQL store reads it.
const mysqlNowMs = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(3)) DIV 1000)";
/** ER_DUP_ENTRY. */
const duplicateKey = 1062;

async function claimOnMysql(tx: TransactionStatements, o: ResolvedTransactional): Promise<Claim | "gone"> {
  const t = tableName("mysql", o);
  const [clock] = await tx.query(`SELECT ${mysqlNowMs} AS nowms`, []);
  const now = epochMs(clock === undefined ? undefined : cell(clock, 0, "nowms"));
  const scope = bound("mysql", o.scope);
  const key = bound("mysql", o.key);
  const tool = bound("mysql", o.tool);
  const fingerprint = bound("mysql", o.fingerprint);
  try {
    // A plain INSERT, not INSERT IGNORE (which would store a cut value) nor a locking read first (whose gap
    // locks make two repeats of a new key deadlock): a repeat waits on the key, then fails as a duplicate.
    await tx.query(
      `INSERT INTO ${t} (scope, \`key\`, tool, fingerprint, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
      [scope, key, tool, fingerprint, now, now + o.ttlMs],
    );
    return { createdAt: now };
  } catch (error) {
    if (databaseCode(error) !== duplicateKey) throw error;
  }
  // A locking read, as under REPEATABLE READ a plain one answers from a snapshot older than the commit.
  // Shared, as the duplicate already left: repeats waiting together all read, none waits for another.
  const seen = await committedRow(tx, o, " LOCK IN SHARE MODE");
  if (seen === "gone" || seen.row.expiresAt > now) return seen;
  // Expired: take the row over in place (two repeats doing so at once deadlock, and one retries).
  await tx.query(
    `UPDATE ${t} SET tool = ?, fingerprint = ?, result = NULL, created_at = ?, expires_at = ? ` +
      "WHERE scope = ? AND `key` = ?",
    [tool, fingerprint, now, now + o.ttlMs, scope, key],
  );
  return { createdAt: now };
}

async function committedRow(
  tx: TransactionStatements,
  o: ResolvedTransactional,
  lock: string,
): Promise<{ readonly row: DedupRow } | "gone"> {
  const [row] = await tx.query(
    `SELECT ${rowColumns[tx.dialect]} FROM ${tableName(tx.dialect, o)} WHERE scope = ? AND ${keyColumn(tx.dialect)} = ?${lock}`,
    [bound(tx.dialect, o.scope), bound(tx.dialect, o.key)],
  );
  // Gone between the conflict and the read (rolled back or purged): claim afresh.
  if (row === undefined) return "gone";
  return {
    row: {
      tool: text(cell(row, 0, "tool")),
      fingerprint: text(cell(row, 1, "fingerprint")) ?? "",
      result: text(cell(row, 2, "result")),
      createdAt: epochMs(cell(row, 3, "createdms")),
      expiresAt: epochMs(cell(row, 4, "expiresms")),
    },
  };
}

function tableName(dialect: SqlDialect, o: ResolvedTransactional): string {
  // The name was checked (letters, digits, _) and double-quoted; MySQL quotes with backticks.
  return dialect === "mysql" ? o.table.replaceAll('"', "`") : o.table;
}

function keyColumn(dialect: SqlDialect): string {
  return dialect === "mysql" ? "`key`" : "key";
}

/**
 * A text value as it is bound. MySQL's columns are bytes, and the text goes as its UTF-8 bytes: no
 * connection character set can turn two keys into one, nor alter a stored result.
 */
function bound(dialect: SqlDialect, value: string | null): unknown {
  return dialect === "mysql" && value !== null ? Buffer.from(value, "utf8") : value;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** A text column as read back: a string, or bytes (MySQL's binary columns) decoded as UTF-8. */
function text(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === "string") return value;
  if (value instanceof Uint8Array) return utf8.decode(value);
  throw new IdempotencyError(
    ErrorCode.storeUnavailable,
    `transactionalOnce(): the dedup table answered a ${typeof value} where text was expected.`,
  );
}

/** `?` placeholders as PostgreSQL's `$1, $2, …` (the OP-2 statements have no `?` of their own). */
export function numbered(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

/** The database's own code for an error: SQLSTATE (PostgreSQL), errno (MySQL), through wrapping errors. */
export function databaseCode(error: unknown): string | number | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && typeof current === "object" && current !== null; depth++) {
    const { errno, code, cause } = current as { errno?: unknown; code?: unknown; cause?: unknown };
    if (typeof errno === "number") return errno;
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) return code;
    current = cause;
  }
  return undefined;
}

// The database ended the whole transaction, the caller's writes in it included: only a new one helps.
const wholeTransactionLost: Record<SqlDialect, Record<string, string>> = {
  postgres: {
    "40001": "PostgreSQL could not serialize this transaction with a concurrent one",
    "40P01": "PostgreSQL chose this transaction as a deadlock victim",
  },
  mysql: { "1213": "MySQL chose this transaction as a deadlock victim and rolled all of it back" },
  sqlite: {},
};

function mustRetryTransaction(dialect: SqlDialect, error: unknown): IdempotencyError | undefined {
  const reason = wholeTransactionLost[dialect][String(databaseCode(error))];
  if (reason === undefined) return undefined;
  return new IdempotencyError(
    ErrorCode.storeUnavailable,
    `transactionalOnce(): ${reason}. Nothing of the transaction is kept, this call's write and dedup row ` +
      "included: roll it back if it is still open, and retry the whole transaction (a repeat then replays " +
      "or runs).",
    { cause: error },
  );
}
