/**
 * One connection, either driver: the shapes of better-sqlite3's `Database` and node:sqlite's `DatabaseSync`
 * that the store accepts, and the few operations it asks of either, made the same on both. The store's SQL
 * and its guarantees live in sqlite-store.ts; what differs between the drivers lives here.
 */
import { IdempotencyError } from "../core/errors.js";

/** The SQLite drivers the store runs on: Node's built-in module, or the better-sqlite3 package. */
export type SqliteDriver = "node:sqlite" | "better-sqlite3";

/** The part of a better-sqlite3 statement we use. The store binds by name: one object of `@name`s. */
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
  setAllowBareNamedParameters(enabled: boolean): void;
  /** The store binds a request object whose other fields name no parameter. */
  setAllowUnknownNamedParameters(enabled: boolean): void;
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

/** A database of either driver: a better-sqlite3 `Database` or a node:sqlite `DatabaseSync`. */
export type AnySqliteDatabase = SqliteDatabase | NodeSqliteDatabase;

/** A statement that answers rows as arrays of plain numbers and strings, bound by name. */
export interface RowReader {
  get(params: object): unknown;
  all(params: object): unknown[];
}

/** What the store asks of a connection, the same on both drivers. */
export interface SqliteConnection {
  readonly driver: SqliteDriver;
  /** A statement that answers rows (see {@link RowReader}); a caller's BigInt default does not apply. */
  reader(sql: string): RowReader;
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
  if (typeof db.pragma === "function" && typeof db.transaction === "function") return "better-sqlite3";
  if ("isTransaction" in db) return "node:sqlite";
  return undefined;
}

/** The connection over a database handle of either driver; `invalid_options` for anything else. */
export function sqliteConnection(database: AnySqliteDatabase): SqliteConnection {
  switch (driverOf(database)) {
    case "better-sqlite3":
      return betterSqlite3Connection(database as SqliteDatabase);
    case "node:sqlite":
      return nodeSqliteConnection(database as NodeSqliteDatabase);
    default:
      throw new IdempotencyError(
        "invalid_options",
        "sqliteStore: pass { path }, or as { database } a better-sqlite3 Database or a node:sqlite DatabaseSync.",
      );
  }
}

function betterSqlite3Connection(db: SqliteDatabase): SqliteConnection {
  return {
    driver: "better-sqlite3",
    reader(sql) {
      const statement = db.prepare(sql);
      // A caller's database may default to BigInt integers; records carry plain numbers.
      statement.safeIntegers(false);
      statement.raw(true);
      return statement;
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
  // Each statement is set up alike whatever defaults the caller gave the database: `@name` bound from a
  // plain `name` key, other keys of the request ignored, integers as numbers.
  const prepare = (sql: string) => {
    const statement = db.prepare(sql);
    statement.setAllowBareNamedParameters(true);
    statement.setAllowUnknownNamedParameters(true);
    statement.setReadBigInts(false);
    return statement;
  };
  return {
    driver: "node:sqlite",
    reader(sql) {
      const statement = prepare(sql);
      statement.setReturnArrays(true);
      return statement;
    },
    writer(sql) {
      const statement = prepare(sql);
      return (params) => Number(statement.run(params).changes);
    },
    exec(sql) {
      db.exec(sql);
    },
    // node:sqlite has no transaction helper: this one does what better-sqlite3's does.
    immediate: (fn) => (a) => {
      const nested = db.isTransaction;
      db.exec(nested ? "SAVEPOINT idempotool" : "BEGIN IMMEDIATE");
      try {
        const result = fn(a);
        db.exec(nested ? "RELEASE idempotool" : "COMMIT");
        return result;
      } catch (error) {
        // A COMMIT refused for a lock leaves the transaction open: end it, so the attempt can run again.
        if (nested) db.exec("ROLLBACK TO idempotool; RELEASE idempotool");
        else if (db.isTransaction) db.exec("ROLLBACK");
        throw error;
      }
    },
    close() {
      db.close();
    },
  };
}
