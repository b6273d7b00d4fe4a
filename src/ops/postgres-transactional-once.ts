/**
 * OP-2 on PostgreSQL: the dedup row is inserted in the caller's transaction, first, so a concurrent
 * repeat blocks on the unique key until this transaction commits (then replays) or rolls back (then runs).
 */
import { numbered, onceInTransaction, type Row, type TransactionStatements } from "./in-transaction.js";
import { sqlIdentifier } from "./sql-identifier.js";
import type { PgPoolLike, PgTransactionClient } from "./sql-shapes.js";
import {
  resolveTransactional,
  type TransactionalOnceOptions,
  type TransactionalOutcome,
} from "./transactional-once.js";

/**
 * The dedup table {@link postgresTransactionalOnce} uses: one row per committed (scope, key), with the
 * tool that committed it. Run it once in a migration. Times are the server's, taken when each statement starts.
 *
 * @example
 * import pg from "pg";
 * import { postgresDedupTableSql } from "idempotool/ops";
 *
 * await new pg.Pool().query(postgresDedupTableSql("order_dedup"));
 */
export function postgresDedupTableSql(table: string): string {
  const name = sqlIdentifier(table, "table", true);
  return (
    `CREATE TABLE IF NOT EXISTS ${name} (` +
    "scope text NOT NULL, key text NOT NULL, tool text NOT NULL, fingerprint text NOT NULL, result text, " +
    "created_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL, " +
    "PRIMARY KEY (scope, key))"
  );
}

/**
 * Run `write` and record the key in ONE transaction on one pooled connection. The first call runs
 * `write(tx)` (use `tx` for every statement of the business write); if it throws, everything rolls
 * back and the key stays free. A repeat of the same tool with the same key and arguments returns the
 * committed result without running; the same key with other arguments, or committed by another tool,
 * throws `idempotency_key_conflict`. A repeat that arrives while the first is still open waits for it
 * (the unique key), then replays or runs.
 *
 * @example
 * import pg from "pg";
 * import { postgresTransactionalOnce } from "idempotool/ops";
 *
 * const pool = new pg.Pool();
 * const args = { customer: "c_1", item: "book" };
 * const outcome = await postgresTransactionalOnce(pool, { table: "order_dedup", tool: "place_order", key: "turn-7-order", args }, async (tx) => {
 *   const { rows } = await tx.query("INSERT INTO orders (customer, item) VALUES ($1, $2) RETURNING id", [args.customer, args.item]);
 *   return { orderId: (rows[0] as { id: number }).id };
 * });
 * // outcome.was_replay is true on every repeat, and one order exists.
 */
export async function postgresTransactionalOnce<C extends PgTransactionClient, R>(
  pool: PgPoolLike<C>,
  options: TransactionalOnceOptions,
  write: (tx: C) => Promise<R>,
): Promise<TransactionalOutcome<Awaited<R>>> {
  const o = resolveTransactional(options, true);
  const tx = await pool.connect();
  let broken: Error | undefined;
  try {
    await tx.query("BEGIN");
    try {
      const outcome = await onceInTransaction(postgresStatements(tx), o, () => write(tx), false);
      // A replay has nothing to keep.
      await tx.query(outcome.was_replay ? "ROLLBACK" : "COMMIT");
      return outcome;
    } catch (error) {
      try {
        await tx.query("ROLLBACK");
      } catch (rollbackError) {
        // The connection is in an unknown state: the pool must discard it, not hand it out again.
        broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
      }
      throw error;
    }
  } finally {
    tx.release(broken ?? false);
  }
}

/** A pg client in a transaction, as the OP-2 steps use it. */
function postgresStatements(client: PgTransactionClient): TransactionStatements {
  return {
    dialect: "postgres",
    query: async (sql, values) => (await client.query(numbered(sql), [...values])).rows as Row[],
  };
}
