/**
 * `idempotool/sqlite`: the embedded idempotency store on one SQLite file, safe across processes that share
 * the file. It opens a `path` with Node's built-in `node:sqlite` where the running Node has it (Node 24),
 * else with better-sqlite3 (an optional peer dependency, loaded only then); pass your own better-sqlite3
 * `Database` or node:sqlite `DatabaseSync` as `{ database }` to keep control of the connection.
 * @module
 */
export type {
  AnySqliteDatabase,
  NodeSqliteDatabase,
  NodeSqliteStatement,
  SqliteDatabase,
  SqliteDriver,
  SqliteStatement,
} from "./sqlite-connection.js";
export type { SqliteStore, SqliteStoreOptions } from "./sqlite-store.js";
export { sqliteStore } from "./sqlite-store.js";
