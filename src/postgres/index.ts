/**
 * `idempotool/postgres`: the idempotency store a fleet of workers shares, on a PostgreSQL table.
 * It takes the client you already have (a `pg.Pool` or `pg.Client`, a postgres.js `sql`, or a PGlite
 * instance), typed by the few methods it uses, so this entry imports no driver; each is an optional peer
 * dependency. Leases are judged by the server's clock.
 *
 * @example
 * import pg from "pg";
 * import { postgresStore } from "idempotool/postgres";
 *
 * const store = postgresStore({ client: new pg.Pool({ connectionString: process.env.DATABASE_URL }) });
 * await store.migrate(); // optional: the table is created on first use anyway
 *
 * @module
 */

export { lockPGliteDirectory } from "./pglite-lock.js";
export type {
  PGliteClient,
  PostgresClient,
  PostgresJsClient,
  PostgresJsQuery,
  StatementValue,
} from "./postgres-clients.js";
export type { PgQueryable, PgQueryConfig, PostgresStoreOptions } from "./postgres-options.js";
export type { PostgresStore } from "./postgres-store.js";
export { postgresStore } from "./postgres-store.js";
