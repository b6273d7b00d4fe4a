/**
 * `idempotool/ops`: the operation models that live beside the core (docs/operation-models.md).
 * OP-2 a dedup row and the business write in one transaction (your own, or your Kysely, knex or Drizzle
 * transaction); OP-3 content-addressed writes; OP-4 insert-once; OP-8 a pre-call checkpoint for plain
 * loops. Database helpers take the client you already have (a `pg.Pool`, a mysql2 pool, a better-sqlite3
 * `Database`, a node:sqlite `DatabaseSync`, an ORM's transaction), typed by the methods they use.
 *
 * @example
 * import { fileSystemTarget, writeContentOnce } from "idempotool/ops";
 *
 * const { key, created } = await writeContentOnce(fileSystemTarget({ directory: "./artifacts" }), "report");
 *
 * @module
 */
export type { Checkpoint, CheckpointOptions } from "./checkpoint.js";
export { checkpoint } from "./checkpoint.js";
export type {
  ContentTarget,
  ContentWrite,
  FileSystemTarget,
  FileSystemTargetOptions,
  S3ClientLike,
  S3ConditionalTargetOptions,
} from "./content-addressed.js";
export {
  contentBytes,
  contentKey,
  fileSystemTarget,
  s3ConditionalTarget,
  writeContentOnce,
} from "./content-addressed.js";
export type { InsertOnceRequest, InsertOnceResult } from "./insert-once.js";
export { postgresInsertOnce, sqliteInsertOnce } from "./insert-once.js";
export { mysqlDedupTableSql, mysqlTransactionalOnce } from "./mysql-transactional-once.js";
export { transactionalOnce } from "./orm-transactional-once.js";
export { postgresDedupTableSql, postgresTransactionalOnce } from "./postgres-transactional-once.js";
export type {
  MysqlPoolLike,
  MysqlTransactionConnection,
  PgPoolLike,
  PgQueryableText,
  PgTransactionClient,
  SqliteDatabaseLike,
} from "./sql-shapes.js";
export { sqliteDedupTableSql, sqliteTransactionalOnce } from "./sqlite-transactional-once.js";
export type { TransactionalOnceOptions, TransactionalOutcome } from "./transactional-once.js";
