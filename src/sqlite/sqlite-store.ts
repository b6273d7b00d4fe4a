import { IdempotencyError } from "../core/errors.js";
import {
  decodeListCursor,
  encodeListCursor,
  keyPrefixUpperBound,
  listLimit,
  purgeLimit,
} from "../core/list-paging.js";
import { loneSurrogateIndex } from "../core/option-checks.js";
import {
  type ClaimRequest,
  type ClaimResult,
  claimedRecord,
  type IdempotencyRecord,
  type IdempotencyStore,
  type ListPage,
  type ListQuery,
  type PurgeRequest,
  type RecordId,
  type RecordStatus,
  type ReleaseRequest,
  type RenewRequest,
  refuseNul,
  type SettleRequest,
  type TakeoverRequest,
} from "../core/store.js";
import { busyWaitPerAttemptMs, lockWaiter } from "./lock-wait.js";
import { openSqliteFile } from "./open-sqlite-file.js";
import {
  type AnySqliteDatabase,
  type RowReader,
  type SqliteConnection,
  type SqliteDriver,
  sqliteConnection,
  writes,
} from "./sqlite-connection.js";

/**
 * Either a file the store opens and owns (WAL mode, `synchronous` NORMAL by default) with the runtime's own
 * SQLite (`node:sqlite` on Node and Deno, `bun:sqlite` on Bun) and better-sqlite3 where it has none, or a
 * database the caller opened with any of those drivers and keeps owning. Share a file across processes only in WAL mode: set it yourself
 * when you pass `database`. See docs/stores.md#sqlite.
 */
export type SqliteStoreOptions<D extends AnySqliteDatabase = AnySqliteDatabase> = LockWaitOptions &
  (
    | {
        readonly path: string;
        /**
         * The driver that opens the file. Default: on Bun `"bun:sqlite"`; elsewhere `"node:sqlite"` where the
         * runtime has it (Node 24, recent Node 22, Deno 2); else `"better-sqlite3"` (the optional peer
         * dependency, e.g. on Node 20). `"libsql"` opens it with the libsql package (an optional peer
         * dependency). All write the same file format, so processes on different drivers can share one file.
         */
        readonly driver?: SqliteDriver | undefined;
        /** Table name; default `idempotool_records`. */
        readonly table?: string | undefined;
        /** `FULL` also survives power loss; `NORMAL` (default) survives process crashes. */
        readonly synchronous?: "NORMAL" | "FULL" | undefined;
      }
    | {
        /**
         * Your database: a better-sqlite3 `Database`, a node:sqlite `DatabaseSync`, a bun:sqlite
         * `Database` opened with `{ strict: true }`, or a libsql `Database` on a local file (an embedded
         * replica or a remote database is refused: see docs/stores.md#libsql). The store configures nothing
         * on it and never closes it.
         * Its busy timeout (better-sqlite3's default is 5 s, node:sqlite's, bun:sqlite's and libsql's 0) is how long
         * each of the store's attempts may block the process waiting for a lock: open it with a few
         * milliseconds (`new Database(file, { timeout: 2 })`, `new DatabaseSync(file, { timeout: 2 })`, or
         * `PRAGMA busy_timeout = 2` on bun:sqlite) and the store waits on timers instead.
         */
        readonly database: D;
        /** Table name; default `idempotool_records`. */
        readonly table?: string | undefined;
      }
  );

interface LockWaitOptions {
  /**
   * The longest an operation waits for another connection (another process, or another store on the
   * same file) to release its lock before it fails; the core then fails closed with `store_unavailable`
   * and the tool does not run. Default 5000 ms. The wait does not block the process: each attempt gives
   * up after a few milliseconds and the next one runs on a timer (backoff with jitter), so timers, I/O
   * and the lease renewals of other calls keep running. An attempt that found the lock taken changed
   * nothing, so trying again never applies a write twice. See docs/stores.md#locks-and-timeouts.
   */
  readonly busyTimeoutMs?: number | undefined;
}

/** An idempotency store on one SQLite file. */
export interface SqliteStore<D extends AnySqliteDatabase = AnySqliteDatabase> extends IdempotencyStore {
  /** The connection the store uses: yours, or the one it opened (`driver` says which kind). */
  readonly database: D;
  /** The driver under the connection. */
  readonly driver: SqliteDriver;
  /** Create the table and indexes if missing. Runs on first use anyway; call it to fail early. */
  migrate(): void;
  /** Closes the database if the store opened it (`path`); a caller's `database` stays open. */
  close(): Promise<void>;
}

const tableNamePattern = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
const defaultBusyTimeoutMs = 5000;
/** setTimeout's limit. */
const maxTimerMs = 2_147_483_647;

// Read back as raw rows (arrays) and shaped by `toRecord`, the one place that knows the columns' order:
// better-sqlite3 builds a named row by interning every column name and setting each property through V8's
// slow path, which costs a replay more than SQLite's own lookup does; an array and one object literal cost a
// fraction of that. A settle reads back every column but its outcome, which its request holds: a large
// result is not copied back out of SQLite.
const settledColumns =
  "scope, key, tool, fingerprint, status, token, created_at, updated_at, lease_expires_at, expires_at, attempts";
const recordColumns = `${settledColumns}, result, error`;

/** A row of `settledColumns`, in that order. */
type SettledRow = readonly [
  scope: string,
  key: string,
  tool: string,
  fingerprint: string,
  status: RecordStatus,
  token: string,
  createdAt: number,
  updatedAt: number,
  leaseExpiresAt: number,
  expiresAt: number,
  attempts: number,
];

/** A row of `recordColumns`, in that order. */
type RecordRow = readonly [...SettledRow, result: string | null, error: string | null];

/** What a settle stored beside the columns it read back. */
interface Outcome {
  readonly result: string | null;
  readonly error: string | null;
}

/** The record a row holds; a settle's row ends before the outcome, which comes from its request. */
function toRecord(row: RecordRow): IdempotencyRecord;
function toRecord(row: SettledRow, outcome: Outcome): IdempotencyRecord;
function toRecord(row: SettledRow | RecordRow, outcome?: Outcome): IdempotencyRecord {
  return {
    scope: row[0],
    key: row[1],
    tool: row[2],
    fingerprint: row[3],
    status: row[4],
    token: row[5],
    createdAt: row[6],
    updatedAt: row[7],
    leaseExpiresAt: row[8],
    expiresAt: row[9],
    attempts: row[10],
    result: outcome === undefined ? (row as RecordRow)[11] : outcome.result,
    error: outcome === undefined ? (row as RecordRow)[12] : outcome.error,
  };
}

/**
 * Whether SQLite keeps `text` exactly, so a record can be built from the request instead of read back.
 * UTF-8 cannot carry a lone UTF-16 surrogate: better-sqlite3 writes its 3-byte form, which reads back as
 * U+FFFD characters, and the record a store returns must be the one it keeps.
 */
/**
 * Whether the driver reads back a text holding NUL whole. Deno's `node:sqlite` reads text only up to the
 * first NUL: a key "k\u0000one" would come back as "k", the key of another record.
 */
function readsNulWhole(db: SqliteConnection): boolean {
  const probe = "a\u0000b";
  const row = db.positionalReader("SELECT ?")(probe) as readonly unknown[] | undefined;
  return row?.[0] === probe;
}

function storedExactly(text: string | null): boolean {
  return text === null || loneSurrogateIndex(text) === -1;
}

/**
 * A store on SQLite: the embedded default, safe across processes sharing one file. With `{ path }` it opens
 * the file with the runtime's own SQLite (`node:sqlite` on Node 24 and Deno, `bun:sqlite` on Bun), else
 * with better-sqlite3; pass `{ database }` to bring a connection of any of those drivers.
 * @example
 * import { idempotent } from "idempotool";
 * import { sqliteStore } from "idempotool/sqlite";
 *
 * const store = sqliteStore({ path: "./idempotency.db" });
 * const sendEmail = idempotent(async (args: { to: string }) => ({ sentTo: args.to }), {
 *   name: "send_email",
 *   store,
 * });
 * await sendEmail({ to: "alice@example.com" }, { key: "turn-7-email-alice" });
 * await store.close(); // at shutdown
 */
export function sqliteStore<D extends AnySqliteDatabase = AnySqliteDatabase>(
  options: SqliteStoreOptions<D>,
): SqliteStore<D> {
  const table = options.table ?? "idempotool_records";
  if (typeof table !== "string" || !tableNamePattern.test(table)) {
    throw new IdempotencyError(
      "invalid_options",
      `sqliteStore: table must be a plain SQL identifier (letters, digits, _; at most 63), got ${JSON.stringify(table)}.`,
    );
  }
  const busyTimeoutMs = options.busyTimeoutMs ?? defaultBusyTimeoutMs;
  if (
    typeof busyTimeoutMs !== "number" ||
    !Number.isFinite(busyTimeoutMs) ||
    busyTimeoutMs <= 0 ||
    busyTimeoutMs > maxTimerMs
  ) {
    throw new IdempotencyError(
      "invalid_options",
      `sqliteStore: busyTimeoutMs must be a positive number of milliseconds, at most ${maxTimerMs}, ` +
        `got ${String(busyTimeoutMs)}.`,
    );
  }
  const ownsDatabase = "path" in options;
  const database = ownsDatabase ? openDatabase(options, busyTimeoutMs) : options.database;
  const db = sqliteConnection(database);

  let prepared: ReturnType<typeof prepareStatements> | undefined;
  const statements = () => {
    prepared ??= prepareStatements(db, table);
    return prepared;
  };
  // One synchronous attempt per operation; the store runs each through waitForLock below. Statements bind
  // by name, most straight from the request: its fields are the statements' parameters.
  /** Refuses a NUL in these where the driver would read it back cut (see readsNulWhole). */
  const noNul = (...values: string[]) => {
    if (!statements().cutsNul) return;
    const why =
      `on ${db.driver} here: this runtime's driver reads text only up to it, ` +
      "so the record would come back as another key's.";
    refuseNul("sqliteStore", why, ...values);
  };
  const attempts = {
    claim: (request: ClaimRequest) => {
      noNul(request.scope, request.key, request.tool);
      const s = statements();
      return s.claimOnce(request) ?? s.claimLocked(request);
    },

    takeover: (request: TakeoverRequest) => {
      noNul(request.scope, request.key);
      const row = statements().takeover.get(request);
      return row === undefined ? null : toRecord(row as RecordRow);
    },

    settle: (request: SettleRequest) => {
      noNul(request.scope, request.key);
      const s = statements();
      if (!storedExactly(request.result) || !storedExactly(request.error)) {
        const row = s.settleReadBack.get(request);
        return row === undefined ? null : toRecord(row as RecordRow);
      }
      // The outcome is stored as the request holds it: read back everything but it, never the result.
      const row = s.settle.get(request);
      return row === undefined ? null : toRecord(row as SettledRow, request);
    },

    renew: (request: RenewRequest) => {
      noNul(request.scope, request.key);
      return statements().renew(request) === 1;
    },

    release: (request: ReleaseRequest) => {
      noNul(request.scope, request.key);
      return statements().release(request) === 1;
    },

    get: ({ scope, key }: RecordId, now: number) => {
      noNul(scope, key);
      const row = statements().get(scope, key, now);
      return row === undefined ? undefined : toRecord(row as RecordRow);
    },

    delete: ({ scope, key }: RecordId) => {
      noNul(scope, key);
      return statements().delete({ scope, key }) === 1;
    },

    list: (query: ListQuery) => {
      return statements().list(query);
    },

    purge: ({ now, limit }: PurgeRequest) => {
      const max = purgeLimit("sqliteStore", limit);
      return { deleted: statements().purge({ now, limit: max }) };
    },
  };
  // Every operation, reads included (a reader can meet a lock too, e.g. while another connection
  // recovers the WAL), is tried again later while another connection holds the lock.
  const waitForLock = lockWaiter(busyTimeoutMs);

  return {
    database: database as D,
    driver: db.driver,
    migrate() {
      if (!ownsDatabase) {
        statements();
        return;
      }
      // Synchronous by its signature, so it may block on the lock; a setup step, not a call in flight.
      db.exec(`PRAGMA busy_timeout = ${Math.ceil(busyTimeoutMs)}`);
      try {
        statements();
      } finally {
        db.exec(`PRAGMA busy_timeout = ${busyWaitPerAttemptMs}`);
      }
    },
    claim: waitForLock(attempts.claim),
    takeover: waitForLock(attempts.takeover),
    settle: waitForLock(attempts.settle),
    renew: waitForLock(attempts.renew),
    release: waitForLock(attempts.release),
    get: waitForLock(attempts.get),
    delete: waitForLock(attempts.delete),
    list: waitForLock(attempts.list),
    purge: waitForLock(attempts.purge),
    async close() {
      if (!ownsDatabase) return;
      db.close();
      // libsql keeps a closed connection open while statements prepared on it live: without them, a later
      // call fails as it does on the other drivers, instead of running on a database thought closed.
      prepared = undefined;
    },
  };
}

function openDatabase(
  options: {
    readonly path: string;
    readonly driver?: SqliteDriver | undefined;
    readonly synchronous?: "NORMAL" | "FULL" | undefined;
  },
  busyTimeoutMs: number,
): AnySqliteDatabase {
  const synchronous = options.synchronous ?? "NORMAL";
  if (typeof options.path !== "string" || options.path === "") {
    throw new IdempotencyError("invalid_options", "sqliteStore: path must be a non-empty file path.");
  }
  if (synchronous !== "NORMAL" && synchronous !== "FULL") {
    throw new IdempotencyError("invalid_options", `sqliteStore: synchronous must be "NORMAL" or "FULL".`);
  }
  // Setup may wait for the lock, blocking, as migrate() does (switching to WAL takes it); calls then wait on
  // timers (see lock-wait.ts).
  const { database } = openSqliteFile(options.path, {
    driver: options.driver,
    busyTimeoutMs,
    caller: "sqliteStore({ path })",
  });
  const db = sqliteConnection(database);
  try {
    db.exec("PRAGMA journal_mode = WAL");
    db.exec(`PRAGMA synchronous = ${synchronous}`);
    db.exec(`PRAGMA busy_timeout = ${busyWaitPerAttemptMs}`);
  } catch (error) {
    db.close();
    throw error;
  }
  return database;
}

function prepareStatements(db: SqliteConnection, table: string) {
  const t = `"${table}"`;
  db.immediate(() =>
    db.exec(
      `CREATE TABLE IF NOT EXISTS ${t} (
        scope TEXT NOT NULL, key TEXT NOT NULL, tool TEXT NOT NULL, fingerprint TEXT NOT NULL,
        status TEXT NOT NULL, token TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
        lease_expires_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, attempts INTEGER NOT NULL,
        result TEXT, error TEXT,
        PRIMARY KEY (scope, key)
      );
      CREATE INDEX IF NOT EXISTS "${table}_expires_at" ON ${t} (expires_at);`,
    ),
  )(undefined);

  // Rows come back as arrays of plain numbers and strings (see recordColumns).
  const reader = (sql: string): RowReader => {
    const statement = db.reader(sql);
    if (!writes(sql)) return statement;
    // A write's RETURNING row comes before its COMMIT: get() stops at the row and the driver drops what
    // the COMMIT then says, so a write refused there (a reader's lock in rollback-journal mode, a full
    // disk) would be rolled back yet reported done. all() runs the statement to its end, and throws.
    return { get: (params) => statement.all(params)[0], all: (params) => statement.all(params) };
  };

  // One statement writes the claimed record (bound by its field names): it inserts, or replaces an expired
  // record; a live record (in progress, stale or settled) fails the WHERE and is left alone, so two
  // claimants can never both change a row.
  const claimSql = `INSERT INTO ${t} (scope, key, tool, fingerprint, status, token, created_at, updated_at,
       lease_expires_at, expires_at, attempts, result, error)
     VALUES (@scope, @key, @tool, @fingerprint, @status, @token, @createdAt, @updatedAt,
       @leaseExpiresAt, @expiresAt, @attempts, @result, @error)
     ON CONFLICT (scope, key) DO UPDATE SET tool = excluded.tool, fingerprint = excluded.fingerprint,
       status = excluded.status, token = excluded.token, created_at = excluded.created_at,
       updated_at = excluded.updated_at, lease_expires_at = excluded.lease_expires_at,
       expires_at = excluded.expires_at, attempts = excluded.attempts, result = excluded.result,
       error = excluded.error
     WHERE expires_at <= excluded.created_at`;
  const claim = db.writer(claimSql);
  // The same claim for a request SQLite cannot store exactly (see storedExactly): the record comes back as stored.
  const claimReadBack = reader(`${claimSql} RETURNING ${recordColumns}`);
  // Bound in order: a replay's read is the store's hottest statement (see PositionalReader).
  const get = db.positionalReader(
    `SELECT ${recordColumns} FROM ${t} WHERE scope = ? AND key = ? AND expires_at > ?`,
  );

  // Read first: a repeat (the common case for an idempotency store) finds its holder without taking
  // the write lock, and a live record seen by that read is a correct answer at that instant.
  // Returns undefined only when another claimant wrote between the read and the insert.
  const claimOnce = (request: ClaimRequest): ClaimResult | undefined => {
    const { now } = request;
    const holder = get(request.scope, request.key, now);
    if (holder !== undefined) return { claimed: false, record: toRecord(holder as RecordRow), now };
    const record = claimedRecord(request, now);
    if (
      !storedExactly(record.scope) ||
      !storedExactly(record.key) ||
      !storedExactly(record.tool) ||
      !storedExactly(record.fingerprint) ||
      !storedExactly(record.token)
    ) {
      const row = claimReadBack.get(record);
      return row === undefined ? undefined : { claimed: true, record: toRecord(row as RecordRow), now };
    }
    if (claim(record) !== 1) return undefined;
    return { claimed: true, record, now };
  };
  // Lost a race: answer again under the write lock (BEGIN IMMEDIATE), where no other connection can move the row.
  const claimLocked = db.immediate((request: ClaimRequest): ClaimResult => {
    const result = claimOnce(request);
    if (!result) throw new Error("sqliteStore: claim found neither a live record nor room to insert one");
    return result;
  });

  const listStatements = new Map<string, RowReader>();
  const list = (query: ListQuery): ListPage => {
    const limit = listLimit("sqliteStore", query.limit);
    const where: string[] = [];
    // One extra row tells whether another page exists, so the last page carries no cursor.
    const params: Record<string, unknown> = { limit: limit + 1 };
    const filter = (condition: string, values: Record<string, unknown>) => {
      where.push(condition);
      Object.assign(params, values);
    };
    if (query.scope !== undefined) filter("scope = @scope", { scope: query.scope });
    if (query.tool !== undefined) filter("tool = @tool", { tool: query.tool });
    if (query.status !== undefined) filter("status = @status", { status: query.status });
    if (query.keyPrefix) {
      // A range, not LIKE: % and _ in a prefix are plain characters, and the primary key serves the range.
      filter("key >= @keyPrefix", { keyPrefix: query.keyPrefix });
      const upper = keyPrefixUpperBound(query.keyPrefix);
      if (upper !== undefined) filter("key < @keyUpperBound", { keyUpperBound: upper });
    }
    if (query.createdBefore !== undefined) {
      filter("created_at < @createdBefore", { createdBefore: query.createdBefore });
    }
    if (query.createdAfter !== undefined)
      filter("created_at >= @createdAfter", { createdAfter: query.createdAfter });
    if (query.cursor !== undefined) {
      const after = decodeListCursor("sqliteStore", query.cursor);
      filter("(scope, key) > (@afterScope, @afterKey)", { afterScope: after.scope, afterKey: after.key });
    }
    const sql =
      `SELECT ${recordColumns} FROM ${t}${where.length > 0 ? ` WHERE ${where.join(" AND ")}` : ""}` +
      " ORDER BY scope, key LIMIT @limit";
    let statement = listStatements.get(sql);
    if (!statement) {
      statement = reader(sql);
      listStatements.set(sql, statement);
    }
    const records = (statement.all(params) as RecordRow[]).map((row) => toRecord(row));
    if (records.length <= limit) return { records };
    records.length = limit;
    const last = records[limit - 1]!;
    return { records, nextCursor: encodeListCursor(last) };
  };

  const settleSql = `UPDATE ${t} SET status = @status, result = @result, error = @error, updated_at = @now,
       lease_expires_at = @now, expires_at = @now + @ttlMs
     WHERE scope = @scope AND key = @key AND token = @token AND status IN ('in_progress', 'unknown')`;

  const cutsNul = !readsNulWhole(db);
  return {
    cutsNul,
    claimOnce,
    claimLocked,
    get,
    list,
    takeover: reader(
      `UPDATE ${t} SET token = @token, status = 'in_progress', lease_expires_at = @now + @leaseMs,
         expires_at = MAX(expires_at, @now + @leaseMs + @ttlMs), attempts = attempts + 1, updated_at = @now,
         result = NULL
       WHERE scope = @scope AND key = @key AND token = @fromToken AND expires_at > @now
         AND (status = 'unknown' OR (status = 'in_progress' AND lease_expires_at <= @now))
       RETURNING ${recordColumns}`,
    ),
    settle: reader(`${settleSql} RETURNING ${settledColumns}`),
    settleReadBack: reader(`${settleSql} RETURNING ${recordColumns}`),
    renew: db.writer(
      `UPDATE ${t} SET lease_expires_at = @now + @leaseMs,
         expires_at = MAX(expires_at, @now + @leaseMs + @ttlMs), updated_at = @now
       WHERE scope = @scope AND key = @key AND token = @token AND status = 'in_progress'`,
    ),
    release: db.writer(
      `DELETE FROM ${t}
       WHERE scope = @scope AND key = @key AND token = @token AND status IN ('in_progress', 'unknown')`,
    ),
    delete: db.writer(`DELETE FROM ${t} WHERE scope = @scope AND key = @key`),
    // Walks the expires_at index from the oldest, so the cost follows what expired, not the table size.
    purge: db.writer(
      `DELETE FROM ${t} WHERE rowid IN
         (SELECT rowid FROM ${t} WHERE expires_at <= @now ORDER BY expires_at LIMIT @limit)`,
    ),
  };
}
