/**
 * `idempotool/sqlite`: the embedded idempotency store on one SQLite file (better-sqlite3), safe across
 * processes that share the file. better-sqlite3 is an optional peer dependency, loaded only when a store
 * opens a `path`; pass your own `Database` as `{ database }` to keep control of the connection.
 * @module
 */
export type { SqliteDatabase, SqliteStatement, SqliteStore, SqliteStoreOptions } from "./sqlite-store.js";
export { sqliteStore } from "./sqlite-store.js";
