import { keyPrefixUpperBound } from "../core/list-paging.js";
import type { ListQuery, RecordId } from "../core/store.js";

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
  /** $1 scope, $2 key, $3 tool, $4 fingerprint, $5 token, $6 now, $7 leaseMs, $8 ttlMs. */
  readonly claim: string;
  /** $1 scope, $2 key, $3 fromToken, $4 token, $5 now, $6 leaseMs. */
  readonly takeover: string;
  /** $1 scope, $2 key, $3 token, $4 status, $5 result, $6 error, $7 now, $8 ttlMs. */
  readonly settle: string;
  /** $1 scope, $2 key, $3 token, $4 now, $5 leaseMs. */
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
 * The statements for one table and one clock.
 * @example
 * const s = postgresStatements({ schema: undefined, table: "idempotool_records" }, "server");
 * await pool.query({ text: s.get, values: ["tenant-1", "order-42", 0] });
 */
export function postgresStatements(name: TableName, clock: PostgresClock): PostgresStatements {
  const t = name.schema === undefined ? `"${name.table}"` : `"${name.schema}"."${name.table}"`;
  // statement_timestamp() is stable within a statement, so every use below sees one instant; a plain
  // parameter under the request clock. Either way one clock judges every comparison in a statement.
  const now = (n: number) =>
    clock === "server"
      ? `(floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint + $${n}::bigint)`
      : `$${n}::bigint`;

  return {
    migrate: migrateSql(t, name),

    // One round trip in the common cases; see the comment above claimSql.
    claim: claimSql(t, now(6)),

    takeover: `WITH clock AS (SELECT ${now(5)} AS now)
      UPDATE ${t} SET token = $4, status = 'in_progress', lease_expires_at = clock.now + $6::bigint,
        expires_at = greatest(expires_at, clock.now + $6::bigint), attempts = attempts + 1,
        updated_at = clock.now, result = NULL
      FROM clock
      WHERE scope = $1 AND key = $2 AND token = $3 AND expires_at > clock.now
        AND (status = 'unknown' OR (status = 'in_progress' AND lease_expires_at <= clock.now))
      RETURNING ${recordColumns}`,

    settle: `WITH clock AS (SELECT ${now(7)} AS now)
      UPDATE ${t} SET status = $4, result = $5, error = $6, updated_at = clock.now,
        lease_expires_at = clock.now, expires_at = clock.now + $8::bigint
      FROM clock
      WHERE scope = $1 AND key = $2 AND token = $3 AND status IN ('in_progress', 'unknown')
      RETURNING ${recordColumns}`,

    renew: `WITH clock AS (SELECT ${now(4)} AS now)
      UPDATE ${t} SET lease_expires_at = clock.now + $5::bigint,
        expires_at = greatest(expires_at, clock.now + $5::bigint), updated_at = clock.now
      FROM clock
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
 * Claim-or-return-holder in one statement. Three parts share one snapshot:
 * - `existing` reads the row, if any;
 * - `replaced` overwrites it only if it expired (an UPDATE locks the row and, under READ COMMITTED,
 *   re-checks `expires_at` on its newest version, so two claimants never both replace it);
 * - `inserted` runs only when the snapshot saw no row: `ON CONFLICT DO NOTHING` makes a concurrent
 *   insert of the same key win and ours add nothing.
 * The statement returns the replaced or inserted row flagged `claimed`, or else the live existing row.
 *
 * The READ COMMITTED gap: when another transaction inserted the key but had not committed when our
 * snapshot was taken, our INSERT waits for it and then does nothing, yet no part of this statement can
 * see the row (it is newer than the snapshot). The same holds when a concurrent claim replaced an expired
 * row: our UPDATE re-checks and skips it, while `existing` still shows the old, expired version, which the
 * final filter drops. In both cases the statement returns no row, and the caller runs it again: the next
 * statement's snapshot is taken after that commit and sees the holder. So a claim is one round trip
 * unless it lost such a race, and never reports a holder it did not see committed.
 *
 * Why not `ON CONFLICT DO UPDATE … WHERE expires_at <= now` (which returns the newest row even across that
 * gap)? DO UPDATE locks the conflicting row even when its WHERE is false, so every replay would take an
 * XID, write WAL and wait for a commit flush. Here a replay writes nothing: the UPDATE's filter fails on
 * the snapshot's version and the INSERT is skipped.
 */
function claimSql(t: string, now: string): string {
  return `WITH clock AS MATERIALIZED (SELECT ${now} AS now),
    existing AS MATERIALIZED (SELECT ${recordColumns} FROM ${t} WHERE scope = $1 AND key = $2),
    replaced AS (
      UPDATE ${t} SET tool = $3, fingerprint = $4, status = 'in_progress', token = $5,
        created_at = clock.now, updated_at = clock.now, lease_expires_at = clock.now + $7::bigint,
        expires_at = greatest(clock.now + $8::bigint, clock.now + $7::bigint), attempts = 1,
        result = NULL, error = NULL
      FROM clock
      WHERE scope = $1 AND key = $2 AND expires_at <= clock.now
      RETURNING ${recordColumns}),
    inserted AS (
      INSERT INTO ${t} (scope, key, tool, fingerprint, status, token, created_at, updated_at,
        lease_expires_at, expires_at, attempts)
      SELECT $1, $2, $3, $4, 'in_progress', $5, clock.now, clock.now, clock.now + $7::bigint,
        greatest(clock.now + $8::bigint, clock.now + $7::bigint), 1
      FROM clock WHERE NOT EXISTS (SELECT 1 FROM existing)
      ON CONFLICT (scope, key) DO NOTHING
      RETURNING ${recordColumns})
    SELECT true AS claimed, clock.now::float8 AS now, replaced.* FROM replaced, clock
    UNION ALL SELECT true, clock.now::float8, inserted.* FROM inserted, clock
    UNION ALL SELECT false, clock.now::float8, existing.* FROM existing, clock
      WHERE existing."expiresAt" > clock.now`;
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
