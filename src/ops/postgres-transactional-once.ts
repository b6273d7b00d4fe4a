/**
 * OP-2 on PostgreSQL: the dedup row is inserted in the caller's transaction, first, so a concurrent
 * repeat blocks on the unique key until this transaction commits (then replays) or rolls back (then runs).
 */
import { iso } from "../core/time.js";
import { sqlIdentifier } from "./sql-identifier.js";
import type { PgPoolLike, PgTransactionClient } from "./sql-shapes.js";
import {
  type ResolvedTransactional,
  replayRow,
  resolveTransactional,
  storedResult,
  type TransactionalOnceOptions,
  type TransactionalOutcome,
  toolColumnMissing,
} from "./transactional-once.js";

/**
 * The dedup table {@link postgresTransactionalOnce} uses: one row per committed (scope, key), with the
 * tool that committed it. Run it once in a migration. Times are the server's `now()`.
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

interface StoredRow {
  tool: string | null;
  fingerprint: string;
  result: string | null;
  created_ms: string | number;
  expires_ms: string | number;
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
  for (;;) {
    const outcome = await attempt(pool, o, write);
    if (outcome !== "gone") return outcome;
  }
}

// SQLSTATE 42703: the dedup table has no column the INSERT names (a table made before the tool column).
const undefinedColumn = "42703";

async function attempt<C extends PgTransactionClient, R>(
  pool: PgPoolLike<C>,
  o: ResolvedTransactional,
  write: (tx: C) => Promise<R>,
): Promise<TransactionalOutcome<Awaited<R>> | "gone"> {
  const tx = await pool.connect();
  let broken: Error | undefined;
  try {
    await tx.query("BEGIN");
    try {
      // An expired row no longer absorbs repeats; removing it here keeps the unique key meaningful.
      await tx.query(`DELETE FROM ${o.table} WHERE scope = $1 AND key = $2 AND expires_at <= now()`, [
        o.scope,
        o.key,
      ]);
      const claimed = await tx
        .query(
          `INSERT INTO ${o.table} (scope, key, tool, fingerprint, expires_at) ` +
            "VALUES ($1, $2, $3, $4, now() + $5 * interval '1 millisecond') ON CONFLICT (scope, key) DO NOTHING " +
            "RETURNING (extract(epoch from created_at) * 1000)::bigint AS created_ms",
          [o.scope, o.key, o.tool, o.fingerprint, o.ttlMs],
        )
        .catch((error: unknown) => {
          throw (error as { code?: unknown } | null)?.code === undefinedColumn
            ? toolColumnMissing(o, error)
            : error;
        });
      const created = claimed.rows[0] as { created_ms: string | number } | undefined;
      if (created === undefined) {
        // Committed by someone else (we waited for them if they were still open): replay, never run.
        const { rows } = await tx.query(
          "SELECT tool, fingerprint, result, (extract(epoch from created_at) * 1000)::bigint AS created_ms, " +
            `(extract(epoch from expires_at) * 1000)::bigint AS expires_ms FROM ${o.table} WHERE scope = $1 AND key = $2`,
          [o.scope, o.key],
        );
        await tx.query("ROLLBACK");
        const row = rows[0] as StoredRow | undefined;
        if (row === undefined) {
          // Gone between the conflict and the read (rolled back or purged): a new attempt claims it afresh.
          return "gone";
        }
        return replayRow<Awaited<R>>(o, {
          tool: row.tool,
          fingerprint: row.fingerprint,
          result: row.result,
          createdAt: Number(row.created_ms),
          expiresAt: Number(row.expires_ms),
        });
      }
      const result: Awaited<R> = await write(tx);
      await tx.query(`UPDATE ${o.table} SET result = $3 WHERE scope = $1 AND key = $2`, [
        o.scope,
        o.key,
        storedResult(o, result),
      ]);
      await tx.query("COMMIT");
      return {
        result,
        was_replay: false,
        original_called_at: iso(Number(created.created_ms)),
        idempotency_key: o.key,
      };
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
