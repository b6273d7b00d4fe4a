import { keyPrefixUpperBound } from "../core/list-paging.js";
import type { IdempotencyRecord, ListQuery, RecordId } from "../core/store.js";

/** Which clock a statement judges time by: PostgreSQL's own, or the `now` the core sent. */
export type PostgresClock = "server" | "request";

/** A statement's text and parameters, ready for `query()`. */
export interface Statement {
  readonly text: string;
  readonly values: unknown[];
}

/**
 * Every statement the store runs against one table. Each is a single statement, so each operation is
 * one round trip. Parameter positions are fixed per statement; `$n` marked "now" takes the core's `now`
 * under the request clock, and the clock offset (ms, normally 0) under the server clock.
 */
export interface PostgresStatements {
  /** Creates the table and its index if missing, then refuses a table that is not an ordinary logged one. */
  readonly migrate: string;
  /**
   * $1 scope, $2 key, $3 tool, $4 fingerprint, $5 token, $6 now, $7 leaseMs, $8 ttlMs. Answers one
   * `ClaimRow`, or no row when it lost a race to a commit newer than its snapshot (see claimSql).
   */
  readonly claim: string;
  /** $1 scope, $2 key, $3 fromToken, $4 token, $5 now, $6 leaseMs, $7 ttlMs. */
  readonly takeover: string;
  /** $1 scope, $2 key, $3 token, $4 status, $5 result, $6 error, $7 now, $8 ttlMs. Answers a `SettleRow`. */
  readonly settle: string;
  /** $1 scope, $2 key, $3 token, $4 now, $5 leaseMs, $6 ttlMs. */
  readonly renew: string;
  /** $1 scope, $2 key, $3 token. */
  readonly release: string;
  /** $1 scope, $2 key, $3 now. */
  readonly get: string;
  /** $1 scope, $2 key. */
  readonly delete: string;
  /** $1 now, $2 limit. */
  readonly purge: string;
  /** The filters of `query` as one statement, asking for `limit + 1` rows so a last page can be told. */
  list(query: ListQuery, limit: number, after: RecordId | undefined): Statement;
}

/** The part of a table name before and after the dot, each a plain identifier. */
export interface TableName {
  readonly schema: string | undefined;
  readonly table: string;
}

/** The SQLSTATE and message prefix of the migration's refusal of an UNLOGGED or temporary table. */
export const notLoggedSqlState = "55000";
export const notLoggedPrefix = "idempotool: ";

// Aliased and cast so a row comes back already shaped as an IdempotencyRecord: pg returns bigint as a
// string, float8 as a number, and epoch milliseconds stay exact in a float8 for the next 285,000 years.
const recordColumns =
  'scope, key, tool, fingerprint, status, token, created_at::float8 AS "createdAt", ' +
  'updated_at::float8 AS "updatedAt", lease_expires_at::float8 AS "leaseExpiresAt", ' +
  'expires_at::float8 AS "expiresAt", attempts, result, error';

/**
 * What a claim answers. A won claim carries only the judging clock: every other field of the new record
 * follows from the request and that instant, so the holder's columns are null. A lost claim carries the
 * live holder (its scope and key are the request's: the primary key compares bytes).
 */
export interface ClaimRow {
  readonly claimed: boolean;
  readonly now: number;
  readonly tool: string;
  readonly fingerprint: string;
  readonly status: IdempotencyRecord["status"];
  readonly token: string;
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly leaseExpiresAt: number;
  readonly expiresAt: number;
  readonly attempts: number;
  readonly result: string | null;
  readonly error: string | null;
}

/** What a settle answers: the fields of the settled record that its request does not already hold. */
export interface SettleRow {
  readonly tool: string;
  readonly fingerprint: string;
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly expiresAt: number;
  readonly attempts: number;
}

/**
 * The statements for one table and one clock.
 * @example
 * const s = postgresStatements({ schema: undefined, table: "idempotool_records" }, "server");
 * await pool.query({ text: s.get, values: ["tenant-1", "order-42", 0] });
 */
export function postgresStatements(name: TableName, clock: PostgresClock): PostgresStatements {
  const t = name.schema === undefined ? `"${name.table}"` : `"${name.schema}"."${name.table}"`;
  // statement_timestamp() is stable within a statement, so every use below sees one instant (written out
  // where needed: cheaper than joining a one-row CTE); a plain parameter under the request clock. Either
  // way one clock judges every comparison in a statement.
  const now = (n: number) =>
    clock === "server"
      ? `(floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint + $${n}::bigint)`
      : `$${n}::bigint`;

  return {
    migrate: migrateSql(t, name),

    // One round trip in the common cases; see the comment above claimSql.
    claim: claimSql(t, now(6)),

    takeover: `UPDATE ${t} SET token = $4, status = 'in_progress', lease_expires_at = ${now(5)} + $6::bigint,
        expires_at = greatest(expires_at, ${now(5)} + $6::bigint + $7::bigint), attempts = attempts + 1,
        updated_at = ${now(5)}, result = NULL
      WHERE scope = $1 AND key = $2 AND token = $3 AND expires_at > ${now(5)}
        AND (status = 'unknown' OR (status = 'in_progress' AND lease_expires_at <= ${now(5)}))
      RETURNING ${recordColumns}`,

    // Returns only what the request does not hold: result and error go back as they were sent, and a
    // large result is not shipped back over the wire.
    settle: `UPDATE ${t} SET status = $4, result = $5, error = $6, updated_at = ${now(7)},
        lease_expires_at = ${now(7)}, expires_at = ${now(7)} + $8::bigint
      WHERE scope = $1 AND key = $2 AND token = $3 AND status IN ('in_progress', 'unknown')
      RETURNING tool, fingerprint, created_at::float8 AS "createdAt", updated_at::float8 AS "updatedAt",
        expires_at::float8 AS "expiresAt", attempts`,

    renew: `UPDATE ${t} SET lease_expires_at = ${now(4)} + $5::bigint,
        expires_at = greatest(expires_at, ${now(4)} + $5::bigint + $6::bigint), updated_at = ${now(4)}
      WHERE scope = $1 AND key = $2 AND token = $3 AND status = 'in_progress'
      RETURNING 1 AS renewed`,

    release: `DELETE FROM ${t}
      WHERE scope = $1 AND key = $2 AND token = $3 AND status IN ('in_progress', 'unknown')
      RETURNING 1 AS released`,

    get: `SELECT ${recordColumns} FROM ${t} WHERE scope = $1 AND key = $2 AND expires_at > ${now(3)}`,

    delete: `DELETE FROM ${t} WHERE scope = $1 AND key = $2 RETURNING 1 AS deleted`,

    // The inner SELECT walks the expires_at index from the oldest entry and stops after $2 rows, so the
    // cost follows what expired, not the table's size; ctid then finds each row without another index
    // lookup. The outer WHERE repeats the expiry test: if a claim replaced or a settle extended a row
    // since the inner read, PostgreSQL re-checks the newest version (READ COMMITTED) and leaves it alone.
    purge: `WITH clock AS (SELECT ${now(1)} AS now),
      gone AS (
        DELETE FROM ${t} USING clock
        WHERE ${t}.ctid = ANY (ARRAY(
            SELECT ctid FROM ${t} WHERE expires_at <= (SELECT now FROM clock)
            ORDER BY expires_at LIMIT $2::bigint))
          AND ${t}.expires_at <= clock.now
        RETURNING 1)
      SELECT count(*)::int AS deleted FROM gone`,

    list(query, limit, after) {
      const where: string[] = [];
      const values: unknown[] = [];
      const filter = (condition: (...positions: string[]) => string, ...params: unknown[]) => {
        const positions = params.map((param) => {
          values.push(param);
          return `$${values.length}`;
        });
        where.push(condition(...positions));
      };
      if (query.scope !== undefined) filter((p) => `scope = ${p}`, query.scope);
      if (query.tool !== undefined) filter((p) => `tool = ${p}`, query.tool);
      if (query.status !== undefined) filter((p) => `status = ${p}`, query.status);
      if (query.keyPrefix) {
        // A range on the "C"-collated key, not LIKE: % and _ are plain characters, the comparison is
        // case-sensitive code point order, and the primary key serves the range.
        filter((p) => `key >= ${p}`, query.keyPrefix);
        const upper = keyPrefixUpperBound(query.keyPrefix);
        if (upper !== undefined) filter((p) => `key < ${p}`, upper);
      }
      if (query.createdBefore !== undefined) filter((p) => `created_at < ${p}::bigint`, query.createdBefore);
      if (query.createdAfter !== undefined) filter((p) => `created_at >= ${p}::bigint`, query.createdAfter);
      if (after !== undefined) filter((s, k) => `(scope, key) > (${s}, ${k})`, after.scope, after.key);
      values.push(limit + 1);
      const text =
        `SELECT ${recordColumns} FROM ${t}${where.length > 0 ? ` WHERE ${where.join(" AND ")}` : ""}` +
        ` ORDER BY scope, key LIMIT $${values.length}`;
      return { text, values };
    },
  };
}

/**
 * Claim-or-return-holder in one statement, two parts sharing one snapshot:
 * - `live` reads the row if it has not expired;
 * - `claimed` runs only when the snapshot saw no live row: it inserts the key, or, when the key is held by
 *   an expired row, replaces that row through `ON CONFLICT DO UPDATE … WHERE expires_at <= now`. The
 *   conflict check sees every committed row, snapshot or not, and waits for an uncommitted one; DO UPDATE
 *   locks the row and re-checks the WHERE on its newest version (READ COMMITTED), so two claimants never
 *   both replace it, and a row that is live by then is left alone.
 * The statement returns the claim (flagged `claimed`, with the clock it judged by: the new record follows
 * from the request and that instant) or else the live holder.
 *
 * A replay writes nothing: the holder is live, `claimed` inserts nothing and takes no lock, so the
 * statement takes no transaction id, writes no WAL and its commit waits for no flush. (An ungated
 * `ON CONFLICT DO UPDATE` would lock the row on every replay, even when its WHERE is false.)
 *
 * The READ COMMITTED gap: when a concurrent claim inserted or replaced the key and committed after our
 * snapshot was taken, `live` cannot see its row (or sees the old, expired version), while `claimed` finds
 * the new row live and does nothing. The statement then returns no row, and the caller runs it again: the
 * next statement's snapshot is taken after that commit and sees the holder. So a claim is one round trip
 * unless it lost such a race, and never reports a holder it did not see committed.
 */
function claimSql(t: string, now: string): string {
  return `WITH live AS MATERIALIZED (
      SELECT tool, fingerprint, status, token, created_at, updated_at, lease_expires_at, expires_at, attempts,
        result, error
      FROM ${t} WHERE scope = $1 AND key = $2 AND expires_at > ${now}),
    claimed AS (
      INSERT INTO ${t} AS held (scope, key, tool, fingerprint, status, token, created_at, updated_at,
        lease_expires_at, expires_at, attempts)
      SELECT $1, $2, $3, $4, 'in_progress', $5, ${now}, ${now}, ${now} + $7::bigint,
        ${now} + $7::bigint + $8::bigint, 1
      WHERE NOT EXISTS (SELECT FROM live)
      ON CONFLICT (scope, key) DO UPDATE SET tool = excluded.tool, fingerprint = excluded.fingerprint,
        status = excluded.status, token = excluded.token, created_at = excluded.created_at,
        updated_at = excluded.updated_at, lease_expires_at = excluded.lease_expires_at,
        expires_at = excluded.expires_at, attempts = excluded.attempts, result = NULL, error = NULL
      WHERE held.expires_at <= excluded.created_at
      RETURNING 1)
    SELECT true AS claimed, ${now}::float8 AS now, NULL::text AS tool, NULL::text AS fingerprint,
      NULL::text AS status, NULL::text AS token, NULL::float8 AS "createdAt", NULL::float8 AS "updatedAt",
      NULL::float8 AS "leaseExpiresAt", NULL::float8 AS "expiresAt", NULL::integer AS attempts,
      NULL::text AS result, NULL::text AS error
    FROM claimed
    UNION ALL
    SELECT false, ${now}::float8, tool, fingerprint, status, token, created_at::float8, updated_at::float8,
      lease_expires_at::float8, expires_at::float8, attempts, result, error
    FROM live`;
}

/**
 * One DO block: one statement, one round trip, no parameters. It touches the catalog only when the
 * table is missing, so an application role without CREATE rights runs fine against a table a DBA made.
 * The advisory lock makes concurrent first uses take turns instead of racing on the catalog (the race
 * that otherwise fails one of them with a unique violation on pg_type).
 */
function migrateSql(t: string, name: TableName): string {
  const literal = t.replaceAll("'", "''");
  const index = `"${name.table}_expires_at"`;
  return `DO $idempotool$
    BEGIN
      IF to_regclass('${literal}') IS NULL THEN
        PERFORM pg_advisory_xact_lock(hashtext('idempotool migrate ${literal}'));
        CREATE TABLE IF NOT EXISTS ${t} (
          scope text COLLATE "C" NOT NULL,
          key text COLLATE "C" NOT NULL,
          tool text NOT NULL,
          fingerprint text NOT NULL,
          status text NOT NULL CHECK (status IN ('in_progress', 'completed', 'failed', 'unknown')),
          token text NOT NULL,
          created_at bigint NOT NULL,
          updated_at bigint NOT NULL,
          lease_expires_at bigint NOT NULL,
          expires_at bigint NOT NULL,
          attempts integer NOT NULL,
          result text,
          error text,
          PRIMARY KEY (scope, key)
        );
        CREATE INDEX IF NOT EXISTS ${index} ON ${t} (expires_at);
      END IF;
      IF (SELECT relpersistence FROM pg_class WHERE oid = '${literal}'::regclass) <> 'p' THEN
        RAISE EXCEPTION '${notLoggedPrefix}table ${literal} is UNLOGGED or temporary: a server crash or a new session would lose its records and let repeats run again. Use an ordinary table (ALTER TABLE … SET LOGGED).'
          USING ERRCODE = '${notLoggedSqlState}';
      END IF;
    END
    $idempotool$`;
}
