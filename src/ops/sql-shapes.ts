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

/** The part of a better-sqlite3 `Database` we use; the helpers never import the package. */
export interface SqliteDatabaseLike {
  prepare(source: string): {
    run(...params: unknown[]): { readonly changes: number };
    get(...params: unknown[]): unknown;
  };
  exec(source: string): unknown;
  readonly inTransaction: boolean;
}
