/**
 * `idempotool/sqlite`: the embedded idempotency store on one SQLite file, safe across processes that share
 * the file. It opens a `path` with the runtime's own SQLite (`node:sqlite` on Node 24 and Deno, `bun:sqlite`
 * on Bun), else with better-sqlite3 (an optional peer dependency, loaded only then), or with libsql when
 * asked (`driver: "libsql"`); pass your own better-sqlite3 `Database`, node:sqlite `DatabaseSync`,
 * bun:sqlite `Database` or libsql `Database` (on a local file) as `{ database }` to keep control of the
 * connection.
 * @module
 */
export type {
  AnySqliteDatabase,
  BunSqliteDatabase,
  BunSqliteStatement,
  LibsqlDatabase,
  NodeSqliteDatabase,
  NodeSqliteStatement,
  SqliteDatabase,
  SqliteDriver,
  SqliteStatement,
} from "./sqlite-connection.js";
export type { SqliteStore, SqliteStoreOptions } from "./sqlite-store.js";
export { sqliteStore } from "./sqlite-store.js";
