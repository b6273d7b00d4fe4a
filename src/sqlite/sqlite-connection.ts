/**
 * One connection, any driver: the shapes of better-sqlite3's `Database`, node:sqlite's `DatabaseSync`,
 * bun:sqlite's `Database` and libsql's `Database` that the store accepts, and the few operations it asks of
 * each, made the same on all. The store's SQL and its guarantees live in sqlite-store.ts; what differs between the drivers lives here.
 */
import { IdempotencyError } from "../core/errors.js";

/**
 * The SQLite drivers the store runs on: the built-in `node:sqlite` (Node 24, recent Node 22, Deno 2, Bun),
 * Bun's own `bun:sqlite`, the better-sqlite3 package, or the libsql package (libSQL, SQLite's fork behind
 * Turso, on a local file). All write the same file format.
 */
export type SqliteDriver = "node:sqlite" | "better-sqlite3" | "bun:sqlite" | "libsql";

/**
 * The part of a better-sqlite3 statement we use. The store binds by name (one object of `@name`s), and its
 * read of a key by position.
 */
export interface SqliteStatement {
  run(...params: unknown[]): { readonly changes: number };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  safeIntegers(toggle?: boolean): unknown;
  /** Rows as arrays of column values: the store reads columns by position, so no names are built per row. */
  raw(toggle?: boolean): unknown;
}

/** The part of better-sqlite3 we use; a `Database` fits, so the store never imports the package's types. */
export interface SqliteDatabase {
  prepare(source: string): SqliteStatement;
  exec(source: string): unknown;
  pragma(source: string, options?: { simple?: boolean }): unknown;
  transaction<A extends unknown[], R>(fn: (...args: A) => R): { immediate(...args: A): R };
  close(): unknown;
}

/** The part of a node:sqlite `StatementSync` we use (Node 24, or a recent Node 22). */
export interface NodeSqliteStatement {
  run(...params: unknown[]): { readonly changes: number | bigint };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  setReadBigInts(enabled: boolean): void;
  /** Rows as arrays, as better-sqlite3's `raw()`. */
  setReturnArrays(enabled: boolean): void;
}

/**
 * The part of a node:sqlite `DatabaseSync` we use; typed here because Node 20's types have no `node:sqlite`,
 * and so that the store never loads the module unless it opens a file with it.
 */
export interface NodeSqliteDatabase {
  prepare(source: string): NodeSqliteStatement;
  exec(source: string): unknown;
  /** Whether a transaction is open: a failed `COMMIT` leaves it open, and the store then rolls it back. */
  readonly isTransaction: boolean;
  close(): unknown;
}

/** The part of a bun:sqlite `Statement` we use. */
export interface BunSqliteStatement {
  run(...params: unknown[]): { readonly changes: number };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  /** Rows as arrays, as better-sqlite3's `raw()`. */
  values(...params: unknown[]): unknown[][];
  safeIntegers(enabled: boolean): unknown;
}

/**
 * The part of a bun:sqlite `Database` we use. Open it with `{ strict: true }`, so that `@name` binds from a
 * plain `name` key: the store refuses a database that does not bind so.
 */
export interface BunSqliteDatabase {
  prepare(source: string): BunSqliteStatement;
  exec(source: string): unknown;
  /** Whether a transaction is open. */
  readonly inTransaction: boolean;
  transaction(fn: (...args: never[]) => unknown): unknown;
  /** Only Bun's database has it beside `prepare`: how the store tells it from the others. */
  query(source: string): unknown;
  close(): unknown;
}

/**
 * The part of a libsql `Database` we use: better-sqlite3's shape, which libsql follows, and `sync()`, which
 * only libsql's has. The store runs on a local file only: it refuses an embedded replica (`syncUrl`) and a
 * remote database (a `libsql://` or `http(s)://` URL), whose `sync()` tells them apart.
 */
export interface LibsqlDatabase extends SqliteDatabase {
  /** Whether a transaction is open: libsql's `transaction()` does not nest, so the store runs its own. */
  readonly inTransaction: boolean;
  /** False once closed: libsql aborts the process when `inTransaction` is read on a closed database. */
  readonly open: boolean;
  /** Pulls an embedded replica's new frames from its primary; throws on a local file. */
  sync(): unknown;
}

/**
 * A database of any driver: a better-sqlite3 `Database`, a node:sqlite `DatabaseSync`, a bun:sqlite
 * `Database` or a libsql `Database` on a local file.
 */
export type AnySqliteDatabase = SqliteDatabase | NodeSqliteDatabase | BunSqliteDatabase | LibsqlDatabase;

/** A statement that answers rows as arrays of plain numbers and strings, bound by name. */
export interface RowReader {
  get(params: object): unknown;
  all(params: object): unknown[];
}

/**
 * A statement of `?` parameters that answers its first row as an array, bound in order. Binding by name costs
 * node:sqlite a lookup per key of the object passed: on the store's hottest read, a replay's, it cost more
 * than the read itself.
 */
export type PositionalReader = (...params: readonly (string | number)[]) => unknown;

/** What the store asks of a connection, the same on every driver. */
export interface SqliteConnection {
  readonly driver: SqliteDriver;
  /** A statement that answers rows (see {@link RowReader}); a caller's BigInt default does not apply. */
  reader(sql: string): RowReader;
  /** A statement of `?` parameters answering its first row (see {@link PositionalReader}), as {@link reader}'s. */
  positionalReader(sql: string): PositionalReader;
  /** A statement bound by name that answers how many rows it changed. */
  writer(sql: string): (params: object) => number;
  exec(sql: string): void;
  /**
   * `fn` in a `BEGIN IMMEDIATE` transaction (a savepoint inside one already open), rolled back whole when
   * `fn` or its `COMMIT` throws, so an attempt refused for a lock can simply run again.
   */
  immediate<A, R>(fn: (a: A) => R): (a: A) => R;
  close(): void;
}

/** Which driver a database handle belongs to, by the methods only one of them has. */
export function driverOf(database: unknown): SqliteDriver | undefined {
  const db = database as Partial<Record<string, unknown>> | null | undefined;
  if (typeof db?.prepare !== "function" || typeof db.exec !== "function") return undefined;
  if (typeof db.pragma === "function" && typeof db.transaction === "function") {
    // libsql follows better-sqlite3's shape; only its database can sync with a remote primary.
    return typeof db.sync === "function" && "inTransaction" in db ? "libsql" : "better-sqlite3";
  }
  if ("isTransaction" in db) return "node:sqlite";
  if ("inTransaction" in db && typeof db.query === "function" && typeof db.transaction === "function") {
    return "bun:sqlite";
  }
  return undefined;
}

/** The connection over a database handle of any driver; `invalid_options` for anything else. */
export function sqliteConnection(database: AnySqliteDatabase): SqliteConnection {
  switch (driverOf(database)) {
    case "better-sqlite3":
      return betterSqlite3Connection(database as SqliteDatabase);
    case "node:sqlite":
      return nodeSqliteConnection(database as NodeSqliteDatabase);
    case "bun:sqlite":
      return bunSqliteConnection(database as BunSqliteDatabase);
    case "libsql":
      return libsqlConnection(database as LibsqlDatabase);
    default:
      throw new IdempotencyError(
        "invalid_options",
        "sqliteStore: pass { path }, or as { database } a better-sqlite3 Database, a node:sqlite DatabaseSync, " +
          "a bun:sqlite Database or a libsql Database.",
      );
  }
}

function betterSqlite3Connection(db: SqliteDatabase): SqliteConnection {
  const reader = (sql: string) => {
    const statement = db.prepare(sql);
    // A caller's database may default to BigInt integers; records carry plain numbers.
    statement.safeIntegers(false);
    statement.raw(true);
    return statement;
  };
  return {
    driver: "better-sqlite3",
    reader,
    positionalReader(sql) {
      const statement = reader(sql);
      return (...params) => statement.get(...params);
    },
    writer(sql) {
      const statement = db.prepare(sql);
      return (params) => statement.run(params).changes;
    },
    exec(sql) {
      db.exec(sql);
    },
    // better-sqlite3 rolls the transaction back when fn or its COMMIT throws, and nests as a savepoint.
    immediate: (fn) => db.transaction(fn).immediate,
    close() {
      db.close();
    },
  };
}

function nodeSqliteConnection(db: NodeSqliteDatabase): SqliteConnection {
  // Each statement is set up alike whatever defaults the caller gave the database: integers as numbers.
  const prepare = (sql: string) => {
    const statement = db.prepare(sql);
    statement.setReadBigInts(false);
    return statement;
  };
  const rowsAsArrays = (sql: string) => {
    const statement = prepare(sql);
    statement.setReturnArrays(true);
    return statement;
  };
  return {
    driver: "node:sqlite",
    reader(sql) {
      const { text, names } = inOrder(sql);
      const statement = rowsAsArrays(text);
      return {
        get: (params) => statement.get(...valuesOf(names, params)),
        all: (params) => statement.all(...valuesOf(names, params)),
      };
    },
    positionalReader(sql) {
      const statement = rowsAsArrays(sql);
      return (...params) => {
        // An object first would be taken for a map of names, and shift every value after it.
        if (!bindable(params[0])) throw unbindable(1);
        return statement.get(...params);
      };
    },
    writer(sql) {
      const { text, names } = inOrder(sql);
      const statement = prepare(text);
      return (params) => Number(statement.run(...valuesOf(names, params)).changes);
    },
    exec(sql) {
      db.exec(sql);
    },
    // node:sqlite has no transaction helper.
    immediate: immediateTransactions(db, () => db.isTransaction),
    close() {
      db.close();
    },
  };
}

/**
 * A statement's `@name` parameters made `?`, with the names in the order they now bind. node:sqlite binds an
 * object by looking every key of it up among the statement's names, each under `@`, `:` and `$`: a claim's
 * insert spent 6 µs of CPU (15%) binding its record that way.
 */
function inOrder(sql: string): { readonly text: string; readonly names: readonly string[] } {
  const names: string[] = [];
  const text = sql.replace(/@([A-Za-z_][A-Za-z0-9_]*)/g, (_, name: string) => {
    names.push(name);
    return "?";
  });
  return { text, names };
}

/**
 * The values of `names` in `params`, in order, bound as node:sqlite binds them by name: a key `params` lacks
 * binds NULL, as a parameter left unbound; `undefined` and what `canBind` refuses (objects other than bytes)
 * are refused.
 */
function valuesOf(names: readonly string[], params: object, canBind = bindable): unknown[] {
  const values = new Array<unknown>(names.length);
  for (let i = 0; i < names.length; i++) {
    const name = names[i]!;
    const value = (params as Record<string, unknown>)[name];
    if (value === undefined ? name in params : !canBind(value)) throw unbindable(i + 1);
    values[i] = value ?? null;
  }
  return values;
}

/** Whether node:sqlite binds `value` as a value, positionally as by name: not an object other than bytes. */
function bindable(value: unknown): boolean {
  return typeof value !== "object" || value === null || ArrayBuffer.isView(value);
}

function unbindable(position: number): TypeError {
  return new TypeError(`sqliteStore: the value of parameter ${position} cannot be bound to SQLite.`);
}

function libsqlConnection(db: LibsqlDatabase): SqliteConnection {
  refuseUnlessLocal(db);
  // Each statement reads integers as numbers whatever the database's defaultSafeIntegers.
  const prepare = (sql: string) => {
    const statement = db.prepare(sql);
    statement.safeIntegers(false);
    return statement;
  };
  const rowsAsArrays = (sql: string) => {
    const statement = prepare(sql);
    statement.raw(true);
    return statement;
  };
  // libsql's transaction() runs BEGIN even inside an open transaction (which fails), and ROLLBACK even
  // where SQLite already rolled back, whose error would then hide the lock error the store waits on.
  const transaction = immediateTransactions(db, () => {
    // Statements prepared before close() still run (libsql keeps their connection), but reading
    // inTransaction of a closed database aborts the process.
    if (!db.open) throw new TypeError("The database connection is not open");
    return db.inTransaction;
  });
  // libsql does not reset a statement that failed (SQLITE_BUSY on another connection's lock, most often):
  // it stays in progress until its next run. A write left so keeps every other write on the connection
  // from committing, and when it is finally reset, SQLite rolls all of them back: writes reported done
  // would be lost. So every write runs in a transaction begun by exec() (which finishes its statements
  // even when it fails), where it holds the lock before its statement runs; and every read runs through
  // all(), which resets the statement before it binds (get() would step a statement left in progress on
  // its old values, and answer another key's row).
  // Bound in order, as one array (libsql takes an array as the values of `?`s): its binding by name looks
  // each of the statement's names up in the object, and binds NULL for one it does not find.
  return {
    driver: "libsql",
    reader(sql) {
      const { text, names } = inOrder(sql);
      const statement = rowsAsArrays(text);
      const read = (params: object) => statement.all(valuesOf(names, params, libsqlBindable));
      const all = writes(sql) ? transaction(read) : read;
      return { get: (params) => all(params)[0], all };
    },
    positionalReader(sql) {
      const statement = rowsAsArrays(sql);
      return (...params) => {
        for (let i = 0; i < params.length; i++) if (!libsqlBindable(params[i])) throw unbindable(i + 1);
        return statement.all(params)[0];
      };
    },
    writer(sql) {
      const { text, names } = inOrder(sql);
      const statement = prepare(text);
      return transaction((params: object) => statement.run(valuesOf(names, params, libsqlBindable)).changes);
    },
    exec(sql) {
      db.exec(sql);
    },
    immediate: transaction,
    close() {
      db.close();
    },
  };
}

/** Whether a statement writes (an INSERT, UPDATE or DELETE, with or without RETURNING). */
export function writes(sql: string): boolean {
  return /^\s*(?:INSERT|UPDATE|DELETE)\b/i.test(sql);
}

/**
 * Whether libsql binds `value` as a value. It stops the whole process on a boolean (its native binding
 * aborts there), so a boolean is refused before it reaches the driver, as better-sqlite3 refuses it.
 */
function libsqlBindable(value: unknown): boolean {
  return typeof value !== "boolean" && bindable(value);
}

/**
 * Refuses a libsql database that is not a local file. An embedded replica (`syncUrl`) answers reads from
 * its local copy, which lags what other replicas wrote to the primary until it syncs; a remote database
 * sends every statement over the network; and both are shared by processes on other machines, whose
 * clocks the store would judge leases by (SQLite has no clock of its own). `sync()` tells them apart: on a
 * local file or `:memory:` libsql refuses it, naming the kind ("File", "Memory"); a replica pulls from its
 * primary (or fails to reach it), and a remote database names itself "Remote".
 */
function refuseUnlessLocal(db: LibsqlDatabase): void {
  let what: string;
  try {
    db.sync();
    what = "an embedded replica (opened with syncUrl)";
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    if (/^SyncNotSupported\("(?:File|Memory)"\)$/.test(message)) return;
    what = /^SyncNotSupported\("Remote"\)$/.test(message)
      ? "a remote database (a libsql:// or http(s):// URL)"
      : `not a local file, as far as sync() says (${JSON.stringify(message.slice(0, 200))})`;
  }
  throw new IdempotencyError(
    "invalid_options",
    `sqliteStore: this libsql Database is ${what}. The store runs on a local file only: a replica answers ` +
      "reads from a copy that lags its primary, and processes on other machines would judge leases by " +
      "their own clocks, so a repeat could run twice. Open the file itself (new Database(path)), or share " +
      "records between machines with postgresStore, mysqlStore or redisStore.",
  );
}

function bunSqliteConnection(db: BunSqliteDatabase): SqliteConnection {
  // A database opened without { strict: true } binds NULL for a parameter it finds no key for (and older
  // Bun binds `@name` only from an `@name` key): a WHERE clause would then match nothing, silently.
  if (!bindsStrictly(db)) {
    throw new IdempotencyError(
      "invalid_options",
      "sqliteStore: open the bun:sqlite Database with { strict: true } (new Database(file, { strict: true })), " +
        "so that it binds @name from a plain name key and refuses a statement missing one.",
    );
  }
  // Each statement reads integers as numbers whatever the database's safeIntegers default.
  const prepare = (sql: string) => {
    const statement = db.prepare(sql);
    statement.safeIntegers(false);
    return statement;
  };
  return {
    driver: "bun:sqlite",
    reader(sql) {
      const statement = prepare(sql);
      return { get: (params) => statement.values(params)[0], all: (params) => statement.values(params) };
    },
    positionalReader(sql) {
      const statement = prepare(sql);
      return (...params) => statement.values(...params)[0];
    },
    writer(sql) {
      const statement = prepare(sql);
      return (params) => statement.run(params).changes;
    },
    exec(sql) {
      db.exec(sql);
    },
    // The same helper as node:sqlite's, so both drivers without better-sqlite3's end a failed COMMIT alike.
    immediate: immediateTransactions(db, () => db.inTransaction),
    close() {
      db.close();
    },
  };
}

/** Whether a bun:sqlite database binds `@name` from a plain `name` key, and throws when the key is missing. */
function bindsStrictly(db: BunSqliteDatabase): boolean {
  const probe = db.prepare("SELECT @idempotool_probe");
  // A database opened with { safeIntegers: true } would answer 1n: its BigInt default says nothing of binding.
  probe.safeIntegers(false);
  try {
    if (probe.values({ idempotool_probe: 1 })[0]?.[0] !== 1) return false;
  } catch {
    return false;
  }
  try {
    probe.values({});
    return false;
  } catch {
    return true;
  }
}

/**
 * What better-sqlite3's `transaction(fn).immediate` does, for a driver that has no such helper: `BEGIN
 * IMMEDIATE`, or a savepoint inside a transaction already open; rolled back whole when `fn` or its
 * `COMMIT` throws.
 */
function immediateTransactions(
  db: { exec(sql: string): unknown },
  inTransaction: () => boolean,
): SqliteConnection["immediate"] {
  return (fn) => (a) => {
    const nested = inTransaction();
    db.exec(nested ? "SAVEPOINT idempotool" : "BEGIN IMMEDIATE");
    try {
      const result = fn(a);
      db.exec(nested ? "RELEASE idempotool" : "COMMIT");
      return result;
    } catch (error) {
      // A COMMIT refused for a lock leaves the transaction open: end it, so the attempt can run again.
      if (nested) {
        db.exec("ROLLBACK TO idempotool");
        db.exec("RELEASE idempotool");
      } else if (inTransaction()) db.exec("ROLLBACK");
      throw error;
    }
  };
}
