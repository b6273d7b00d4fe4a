/**
 * OP-2 on MySQL and MariaDB: the dedup row is inserted in the transaction first, so a concurrent repeat
 * waits on the primary key until this transaction commits (then replays) or rolls back (then runs).
 */
import { onceInTransaction, type Row, type TransactionStatements } from "./in-transaction.js";
import { sqlIdentifier } from "./sql-identifier.js";
import type { MysqlPoolLike, MysqlTransactionConnection } from "./sql-shapes.js";
import {
  resolveTransactional,
  type TransactionalOnceOptions,
  type TransactionalOutcome,
} from "./transactional-once.js";

/**
 * The dedup table {@link mysqlTransactionalOnce} (and `transactionalOnce` on MySQL) uses: one row per
 * committed (scope, key), with the tool that committed it. Text is kept as UTF-8 bytes (`VARBINARY`,
 * `LONGBLOB`), so keys compare exactly, whatever the collation; times are the server's clock in epoch
 * ms. Run it once in a migration.
 *
 * @example
 * import mysql from "mysql2/promise";
 * import { mysqlDedupTableSql } from "idempotool/ops";
 *
 * const pool = mysql.createPool({ uri: process.env.MYSQL_URL ?? "mysql://root@127.0.0.1:3306/test" });
 * await pool.query(mysqlDedupTableSql("order_dedup"));
 */
export function mysqlDedupTableSql(table: string): string {
  const name = sqlIdentifier(table, "table", true).replaceAll('"', "`");
  return (
    `CREATE TABLE IF NOT EXISTS ${name} (` +
    "scope VARBINARY(1020) NOT NULL, `key` VARBINARY(1020) NOT NULL, tool VARBINARY(1020) NOT NULL, " +
    "fingerprint VARBINARY(1020) NOT NULL, result LONGBLOB NULL, created_at BIGINT NOT NULL, " +
    "expires_at BIGINT NOT NULL, PRIMARY KEY (scope, `key`)) ENGINE = InnoDB"
  );
}

/**
 * Run `write` and record the key in ONE transaction on one pooled connection (mysql2's promise API).
 * The first call runs `write(tx)` (use `tx` for every statement of the business write); if it throws,
 * everything rolls back and the key stays free. A repeat of the same tool with the same key and
 * arguments returns the committed result without running; the same key with other arguments, or
 * committed by another tool, throws `idempotency_key_conflict`. A repeat that arrives while the first is
 * still open waits for it (InnoDB's lock on the key, up to `innodb_lock_wait_timeout`), then replays or
 * runs. If InnoDB picks the transaction as a deadlock victim, it rolled everything back and the call
 * throws `store_unavailable`: call again.
 *
 * @example
 * import mysql from "mysql2/promise";
 * import { mysqlTransactionalOnce } from "idempotool/ops";
 *
 * const pool = mysql.createPool({ uri: process.env.MYSQL_URL ?? "mysql://root@127.0.0.1:3306/test" });
 * const args = { customer: "c_1", item: "book" };
 * const outcome = await mysqlTransactionalOnce(pool, { table: "order_dedup", tool: "place_order", key: "turn-7-order", args }, async (tx) => {
 *   const [inserted] = await tx.query("INSERT INTO orders (customer, item) VALUES (?, ?)", [args.customer, args.item]);
 *   return { orderId: (inserted as { insertId: number }).insertId };
 * });
 * // outcome.was_replay is true on every repeat, and one order exists.
 */
export async function mysqlTransactionalOnce<C extends MysqlTransactionConnection, R>(
  pool: MysqlPoolLike<C>,
  options: TransactionalOnceOptions,
  write: (tx: C) => Promise<R>,
): Promise<TransactionalOutcome<Awaited<R>>> {
  const o = resolveTransactional(options, true);
  const tx = await pool.getConnection();
  let broken = false;
  try {
    await tx.query("START TRANSACTION");
    try {
      const outcome = await onceInTransaction(mysqlStatements(tx), o, () => write(tx), false);
      // A replay has nothing to keep.
      await tx.query(outcome.was_replay ? "ROLLBACK" : "COMMIT");
      return outcome;
    } catch (error) {
      try {
        await tx.query("ROLLBACK");
      } catch {
        // The connection is in an unknown state: it must not go back to the pool.
        broken = true;
      }
      throw error;
    }
  } finally {
    if (broken) tx.destroy();
    else tx.release();
  }
}

/** A mysql2 connection (promise API) as the OP-2 steps use it. */
export function mysqlStatements(connection: MysqlTransactionConnection): TransactionStatements {
  return {
    dialect: "mysql",
    query: async (sql, values) => {
      const [rows] = await connection.query(sql, [...values]);
      return Array.isArray(rows) ? (rows as Row[]) : [];
    },
  };
}
