/** The part of a `pg.PoolClient` we use: `query(text, values)` answering rows, and `release`. */
export interface PgTransactionClient {
  query(text: string, values?: unknown[]): Promise<{ readonly rows: readonly unknown[] }>;
  release(error?: Error | boolean): void;
}

/** The part of a `pg.Pool` we use: one connection per transaction; the callback gets your client type. */
export interface PgPoolLike<C extends PgTransactionClient = PgTransactionClient> {
  connect(): Promise<C>;
}

/** The part of any PostgreSQL client we use for single statements; `pg.Pool`, `pg.Client` and `pg.PoolClient` fit. */
export interface PgQueryableText {
  query(text: string, values?: unknown[]): Promise<{ readonly rows: readonly unknown[] }>;
}

/**
 * The part of a SQLite database we use: a better-sqlite3 `Database`, a node:sqlite `DatabaseSync` or a
 * bun:sqlite `Database` fits (they name "a transaction is open" differently, and bun:sqlite answers `null`
 * for no row where the others answer `undefined`); the helpers never import any of them.
 */
export type SqliteDatabaseLike = SqliteStatements &
  ({ readonly inTransaction: boolean } | { readonly isTransaction: boolean });

/** What both drivers' databases have alike: statements bound by position, and `exec`. */
export interface SqliteStatements {
  prepare(source: string): {
    run(...params: unknown[]): { readonly changes: number | bigint };
    get(...params: unknown[]): unknown;
  };
  exec(source: string): unknown;
}

/** Whether a transaction is open on `db`, on either driver. */
export function inTransaction(db: SqliteDatabaseLike): boolean {
  return "inTransaction" in db ? db.inTransaction : db.isTransaction;
}

/**
 * The part of a mysql2 pool connection (promise API) we use: `query(sql, values)` answering
 * `[rows, fields]`, `release` back to the pool, and `destroy` when its state is unknown.
 */
export interface MysqlTransactionConnection {
  query(sql: string, values?: unknown[]): Promise<readonly [unknown, unknown?]>;
  release(): void;
  destroy(): void;
}

/** The part of a mysql2 pool (promise API) we use: one connection per transaction. */
export interface MysqlPoolLike<C extends MysqlTransactionConnection = MysqlTransactionConnection> {
  getConnection(): Promise<C>;
}
