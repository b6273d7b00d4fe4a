import { keyPrefixUpperBound } from "../core/list-paging.js";
import type {
  ClaimRequest,
  IdempotencyRecord,
  ListQuery,
  RecordId,
  ReleaseRequest,
  RenewRequest,
  SettleRequest,
  TakeoverRequest,
} from "../core/store.js";

/** Which clock a statement judges time by: PostgreSQL's own, or the `now` the core sent. */
export type PostgresClock = "server" | "request";

/** A statement's text and parameters, ready for `query()`. */
export interface Statement {
  readonly text: string;
  readonly values: unknown[];
}

/**
 * A statement whose parameters have names. pg binds only by position ($1, $2 …), so the names are numbered
 * in one place (see `named`): the text refers to each parameter by its name, and `values` lays the fields of
 * one object, most often the request itself, out in that same order.
 */
export interface NamedStatement<P> {
  readonly text: string;
  /** The parameters from `params`; `now`, where the statement judges time, is the clock parameter. */
  values(params: P, now?: number): unknown[];
}

/**
 * Every statement the store runs against one table. Each is a single statement, so each operation is
 * one round trip. The parameter `now` takes the core's `now` under the request clock, and the clock
 * offset (ms, normally 0) under the server clock.
 */
export interface PostgresStatements {
  /**
   * Creates the table and its index if missing, refuses a table that is not an ordinary logged one, and
   * creates the claim function if missing and the role may (claimFunctionSql).
   */
  readonly migrate: string;
  /**
   * Calls the table's claim function (claimFunctionSql): answers one `{ claim }`, the `ClaimRow` as JSON, or
   * null when it lost three races in a row to newer commits.
   */
  readonly claim: NamedStatement<ClaimRequest>;
  /**
   * The same claim as one plain statement, for a table whose schema has no claim function (made by hand,
   * or by an earlier version, for a role that may not create functions): answers one `ClaimRow`, or no row
   * when it lost a race to a newer commit than its snapshot (claimSql).
   */
  readonly claimStatement: NamedStatement<ClaimRequest>;
  /**
   * claimStatement, whose row also says whether the store may call the claim function instead
   * (`useFunction`, see claimFunctionCheck): what a store's first claim runs.
   */
  readonly claimChecked: NamedStatement<ClaimRequest>;
  /** Answers a `RecordRow`, or no row. */
  readonly takeover: NamedStatement<TakeoverRequest>;
  /** Answers a `SettleRow`, or no row. */
  readonly settle: NamedStatement<SettleRequest>;
  readonly renew: NamedStatement<RenewRequest>;
  readonly release: NamedStatement<ReleaseRequest>;
  /** Answers a `RecordRow`, or no row. */
  readonly get: NamedStatement<RecordId>;
  readonly delete: NamedStatement<RecordId>;
  readonly purge: NamedStatement<{ readonly limit: number }>;
  /** The filters of `query` as one statement, asking for `limit + 1` rows so a last page can be told. */
  list(query: ListQuery, limit: number, after: RecordId | undefined): Statement;
}

/** The part of a table name before and after the dot, each a plain identifier. */
export interface TableName {
  readonly schema: string | undefined;
  readonly table: string;
}

/**
 * What PostgreSQL answers a call of the claim function the role cannot make: the function does not exist
 * (undefined_function), or the role may not execute it (insufficient_privilege, where a DBA revoked
 * EXECUTE from PUBLIC by default).
 */
export const claimFunctionUnusableSqlStates: ReadonlySet<string> = new Set(["42883", "42501"]);

/** The SQLSTATE and message prefix of the migration's refusal of an UNLOGGED or temporary table. */
export const notLoggedSqlState = "55000";
export const notLoggedPrefix = "idempotool: ";

// Aliased and cast so a row comes back with a record's field names (see toRecord): pg returns bigint as a
// string, float8 as a number, and epoch milliseconds stay exact in a float8 for the next 285,000 years.
// A claim's holder: its scope and key are the request's (the primary key compares bytes).
const holderColumns = [
  "tool",
  "fingerprint",
  "status",
  "token",
  'created_at::float8 AS "createdAt"',
  'updated_at::float8 AS "updatedAt"',
  'lease_expires_at::float8 AS "leaseExpiresAt"',
  'expires_at::float8 AS "expiresAt"',
  "attempts",
  "result",
  "error",
];
const recordColumns = ["scope", "key", ...holderColumns].join(", ");
// A settle returns only what its request lacks: what the claim stored, the instant the settle judged by
// (updated_at, which it set to that instant) and the expiry it wrote. Its request holds the scope, the key,
// the token (the WHERE matched it), the status and the outcome (the SET stored them) (settledRecord).
const settleReturns = [
  "tool",
  "fingerprint",
  'created_at::float8 AS "createdAt"',
  "attempts",
  "updated_at::float8 AS now",
  // Read back rather than summed here: as the server wrote and rounds it, whatever ttlMs (past 2^53 pg sends
  // its shortest decimal, not the exact integer) or the server's extra_float_digits.
  'expires_at::float8 AS "expiresAt"',
];

/**
 * The row of a settle: the record's fields its request cannot tell, and `now`, the instant it judged by
 * (`updatedAt` and `leaseExpiresAt` are that instant).
 */
export type SettleRow = Pick<
  IdempotencyRecord,
  "tool" | "fingerprint" | "createdAt" | "attempts" | "expiresAt"
> & {
  readonly now: number;
};

/** The row of a claim's holder: the record but its scope and key. */
export type HolderRow = Omit<IdempotencyRecord, "scope" | "key">;

/** The row of a whole record (get, takeover, list). */
export type RecordRow = IdempotencyRecord;

/**
 * What a claim answers. A won claim carries only the judging clock: every other field of the new record
 * follows from the request and that instant, so the holder's columns are null. A lost claim carries the
 * live holder.
 */
export interface ClaimRow extends HolderRow {
  readonly claimed: boolean;
  readonly now: number;
  /** claimChecked only: whether the claim function may be called (claimFunctionCheck). */
  readonly useFunction?: boolean;
}

/**
 * The record a row holds, one of the two places a row becomes a record (settledRecord is the other): a
 * whole row, or a claim's holder under the request's id.
 */
export function toRecord(row: RecordRow): IdempotencyRecord;
export function toRecord(row: HolderRow, id: RecordId): IdempotencyRecord;
export function toRecord(
  row: HolderRow & Partial<RecordId>,
  id: RecordId = row as RecordRow,
): IdempotencyRecord {
  return {
    scope: id.scope,
    key: id.key,
    tool: row.tool,
    fingerprint: row.fingerprint,
    status: row.status,
    token: row.token,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
    leaseExpiresAt: row.leaseExpiresAt,
    expiresAt: row.expiresAt,
    attempts: row.attempts,
    result: row.result,
    error: row.error,
  };
}

/**
 * The record a settle left, from its row and its request: the statement set status, result and error to
 * the request's and updated_at and lease_expires_at to `now`, and matched the request's token.
 */
export function settledRecord(row: SettleRow, request: SettleRequest): IdempotencyRecord {
  return {
    scope: request.scope,
    key: request.key,
    tool: row.tool,
    fingerprint: row.fingerprint,
    status: request.status,
    token: request.token,
    createdAt: row.createdAt,
    updatedAt: row.now,
    leaseExpiresAt: row.now,
    expiresAt: row.expiresAt,
    attempts: row.attempts,
    result: request.result,
    error: request.error,
  };
}

/**
 * A statement with named parameters: `names` numbers them ($1 is the first name), `text` writes the SQL
 * with each parameter's placeholder looked up by its name, and `values` reads the parameters from one
 * object by name, in that order. The name `now` is the clock parameter, passed beside the object.
 */
function named<const N extends string>(
  names: readonly N[],
  text: (p: { readonly [K in N]: string }) => string,
): NamedStatement<{ readonly [K in Exclude<N, "now">]: unknown }> {
  const placeholders = Object.fromEntries(names.map((name, i) => [name, `$${i + 1}`]));
  return {
    text: text(placeholders as { readonly [K in N]: string }),
    values: (params, now) =>
      names.map((name) => (name === "now" ? now : (params as Record<string, unknown>)[name])),
  };
}

/**
 * The statements for one table and one clock.
 * @example
 * const s = postgresStatements({ schema: undefined, table: "idempotool_records" }, "server");
 * await pool.query({ text: s.get.text, values: s.get.values({ scope: "tenant-1", key: "order-42" }, 0) });
 */
export function postgresStatements(name: TableName, clock: PostgresClock): PostgresStatements {
  const t = name.schema === undefined ? `"${name.table}"` : `"${name.schema}"."${name.table}"`;
  // statement_timestamp() is stable within a statement, so every use below sees one instant (written out
  // where needed: cheaper than joining a one-row CTE); a plain parameter under the request clock. Either
  // way one clock judges every comparison in a statement.
  const at = (nowParam: string) =>
    clock === "server"
      ? `(floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint + ${nowParam}::bigint)`
      : `${nowParam}::bigint`;

  return {
    migrate: migrateSql(t, name),

    // One round trip, and one statement to plan, whatever the races; see claimFunctionSql.
    claim: named(
      ["scope", "key", "tool", "fingerprint", "token", "now", "leaseMs", "ttlMs"],
      (p) => `SELECT ${claimFunction(name)}(${p.scope}, ${p.key}, ${p.tool}, ${p.fingerprint}, ${p.token},
          ${at(p.now)}, ${p.leaseMs}::bigint, ${p.ttlMs}::bigint) AS claim`,
    ),

    // One round trip in the common cases; see the comment above claimSql.
    claimStatement: named(["scope", "key", "tool", "fingerprint", "token", "now", "leaseMs", "ttlMs"], (p) =>
      claimSql(t, p, at(p.now)),
    ),

    claimChecked: named(["scope", "key", "tool", "fingerprint", "token", "now", "leaseMs", "ttlMs"], (p) =>
      claimSql(t, p, at(p.now), `${claimFunctionCheck(t, name)} AS "useFunction"`),
    ),

    takeover: named(["scope", "key", "fromToken", "token", "now", "leaseMs", "ttlMs"], (p) => {
      const now = at(p.now);
      return `UPDATE ${t} SET token = ${p.token}, status = 'in_progress',
          lease_expires_at = ${now} + ${p.leaseMs}::bigint,
          expires_at = greatest(expires_at, ${now} + ${p.leaseMs}::bigint + ${p.ttlMs}::bigint),
          attempts = attempts + 1, updated_at = ${now}, result = NULL
        WHERE scope = ${p.scope} AND key = ${p.key} AND token = ${p.fromToken} AND expires_at > ${now}
          AND (status = 'unknown' OR (status = 'in_progress' AND lease_expires_at <= ${now}))
        RETURNING ${recordColumns}`;
    }),

    // Returns only what the request lacks (settleReturns): a large result is not shipped back over the wire,
    // and the record follows from the request and the row (settledRecord).
    settle: named(["scope", "key", "token", "status", "result", "error", "now", "ttlMs"], (p) => {
      const now = at(p.now);
      return `UPDATE ${t} SET status = ${p.status}, result = ${p.result}, error = ${p.error},
          updated_at = ${now}, lease_expires_at = ${now}, expires_at = ${now} + ${p.ttlMs}::bigint
        WHERE scope = ${p.scope} AND key = ${p.key} AND token = ${p.token}
          AND status IN ('in_progress', 'unknown')
        RETURNING ${settleReturns.join(", ")}`;
    }),

    renew: named(["scope", "key", "token", "now", "leaseMs", "ttlMs"], (p) => {
      const now = at(p.now);
      return `UPDATE ${t} SET lease_expires_at = ${now} + ${p.leaseMs}::bigint,
          expires_at = greatest(expires_at, ${now} + ${p.leaseMs}::bigint + ${p.ttlMs}::bigint),
          updated_at = ${now}
        WHERE scope = ${p.scope} AND key = ${p.key} AND token = ${p.token} AND status = 'in_progress'
        RETURNING 1 AS renewed`;
    }),

    release: named(
      ["scope", "key", "token"],
      (p) => `DELETE FROM ${t}
        WHERE scope = ${p.scope} AND key = ${p.key} AND token = ${p.token}
          AND status IN ('in_progress', 'unknown')
        RETURNING 1 AS released`,
    ),

    get: named(
      ["scope", "key", "now"],
      (p) => `SELECT ${recordColumns} FROM ${t}
        WHERE scope = ${p.scope} AND key = ${p.key} AND expires_at > ${at(p.now)}`,
    ),

    delete: named(
      ["scope", "key"],
      (p) => `DELETE FROM ${t} WHERE scope = ${p.scope} AND key = ${p.key} RETURNING 1 AS deleted`,
    ),

    // The inner SELECT walks the expires_at index from the oldest entry and stops after `limit` rows, so the
    // cost follows what expired, not the table's size; ctid then finds each row without another index
    // lookup. The outer WHERE repeats the expiry test: if a claim replaced or a settle extended a row
    // since the inner read, PostgreSQL re-checks the newest version (READ COMMITTED) and leaves it alone.
    purge: named(
      ["now", "limit"],
      (p) => `WITH clock AS (SELECT ${at(p.now)} AS now),
        gone AS (
          DELETE FROM ${t} USING clock
          WHERE ${t}.ctid = ANY (ARRAY(
              SELECT ctid FROM ${t} WHERE expires_at <= (SELECT now FROM clock)
              ORDER BY expires_at LIMIT ${p.limit}::bigint))
            AND ${t}.expires_at <= clock.now
          RETURNING 1)
        SELECT count(*)::int AS deleted FROM gone`,
    ),

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
function claimSql(
  t: string,
  p: { readonly [K in "scope" | "key" | "tool" | "fingerprint" | "token" | "leaseMs" | "ttlMs"]: string },
  now: string,
  extra?: string,
): string {
  const more = extra === undefined ? "" : `, ${extra}`;
  // The holder's columns take their names and types from the first branch; the claim's are nulls.
  return `WITH live AS MATERIALIZED (
      SELECT * FROM ${t} WHERE scope = ${p.scope} AND key = ${p.key} AND expires_at > ${now}),
    claimed AS (
      INSERT INTO ${t} AS held (scope, key, tool, fingerprint, status, token, created_at, updated_at,
        lease_expires_at, expires_at, attempts)
      SELECT ${p.scope}, ${p.key}, ${p.tool}, ${p.fingerprint}, 'in_progress', ${p.token}, ${now}, ${now},
        ${now} + ${p.leaseMs}::bigint, ${now} + ${p.leaseMs}::bigint + ${p.ttlMs}::bigint, 1
      WHERE NOT EXISTS (SELECT FROM live)
      ON CONFLICT (scope, key) DO UPDATE SET tool = excluded.tool, fingerprint = excluded.fingerprint,
        status = excluded.status, token = excluded.token, created_at = excluded.created_at,
        updated_at = excluded.updated_at, lease_expires_at = excluded.lease_expires_at,
        expires_at = excluded.expires_at, attempts = excluded.attempts, result = NULL, error = NULL
      WHERE held.expires_at <= excluded.created_at
      RETURNING 1)
    SELECT false AS claimed, ${now}::float8 AS now, ${holderColumns.join(", ")}${more}
    FROM live
    UNION ALL
    SELECT true, ${now}::float8, ${holderColumns.map(() => "NULL").join(", ")}${more}
    FROM claimed`;
}

/**
 * The claim function's name, quoted, as a store calls it: `<table>_claim_v1` for a table named without a
 * schema, found by search_path like the table; `<schema>.<table>_claim_v1q` for a schema-qualified one.
 */
function claimFunction(name: TableName): string {
  const fn = claimFunctionName(name);
  return name.schema === undefined ? fn : `"${name.schema}".${fn}`;
}

/** The claim function's own name, quoted, without a schema (see claimFunctionSql). */
function claimFunctionName(name: TableName): string {
  // The version changes with the function's parameters or answer, so workers of two releases can share a
  // table during a rolling deploy, each calling its own. A table name has at most 52 bytes (options).
  return `"${name.table}_claim_v1${name.schema === undefined ? "" : "q"}"`;
}

/** Stands for the table's schema, quoted, in claimFunctionSql's text; the migration puts it in. */
const homeSchema = "@idempotool_schema@";

/**
 * Whether the store may call the claim function, as one boolean expression: the function a call resolves
 * to exists beside the table (the migration made it, or it could not: a role without CREATE rights, a
 * read-only connection), the role may execute it, and it belongs to the table's owner, to the role itself
 * or to a superuser. Any other owner could have made it before the migration did (a role with CREATE on
 * the schema, every role in `public` before PostgreSQL 15), and a call would run that role's code with
 * the caller's rights and trust its answer. Checked within a store's first claim, so a function that
 * cannot be called is never called: a failed call would abort the caller's transaction on a pg.Client.
 */
function claimFunctionCheck(t: string, name: TableName): string {
  const callee = `${claimFunction(name)}(${claimFunctionParameters})`;
  return `coalesce((SELECT has_function_privilege(fn.oid, 'EXECUTE')
        AND (fn.proowner = tbl.relowner OR pg_get_userbyid(fn.proowner) = current_user
          OR (SELECT rolsuper FROM pg_roles WHERE oid = fn.proowner))
      FROM pg_proc AS fn JOIN pg_class AS tbl ON tbl.relnamespace = fn.pronamespace
      WHERE fn.oid = to_regprocedure('${callee}') AND tbl.oid = to_regclass('${t.replaceAll("'", "''")}')), false)`;
}

/** The claim function's parameter types, for its signature. */
const claimFunctionParameters = "text, text, text, text, text, bigint, bigint, bigint";

// The JSON a claim function answers for a live holder, named as a `HolderRow`'s fields.
const holderJsonColumns = {
  tool: "tool",
  fingerprint: "fingerprint",
  status: "status",
  token: "token",
  createdAt: "created_at",
  updatedAt: "updated_at",
  leaseExpiresAt: "lease_expires_at",
  expiresAt: "expires_at",
  attempts: "attempts",
  result: "result",
  error: "error",
} as const satisfies Record<keyof HolderRow, string>;

/**
 * The claim as a PL/pgSQL function, created with the table: it reads the key by its primary key and
 * inserts only when it found no live holder, so a replay plans and runs one indexed read, not an `INSERT`
 * (its own statements keep their plans for the session). It answers `ClaimRow` as JSON in one text column:
 * one value to describe and parse, bigints as exact JSON numbers.
 *
 * The same two parts as claimSql, each its own statement: the read takes a snapshot; the insert replaces
 * an expired row only through `ON CONFLICT DO UPDATE … WHERE expires_at <= now`, which locks the row and
 * re-checks the newest version, so two claimants never both replace it. When the insert finds a live row
 * its read could not see (committed after that snapshot), the function reads again: a volatile function's
 * next statement takes a new snapshot, which sees that commit, so a lost race costs no round trip. Three
 * losses in a row answer null and the caller calls again. A replay writes nothing and takes no
 * transaction id. The instant is a parameter: the caller computes it once, from the statement's clock.
 *
 * The function lives beside the table (in homeSchema, filled in by the migration) and names the table as
 * the store does, so its claims land where the store's other statements read and write: unqualified,
 * found by the caller's search_path at each call, or schema-qualified. The two kinds have different names
 * (claimFunctionName): a store on an unqualified name that found a qualified store's function would claim
 * in that store's table whatever its own search_path says, and a qualified store that found an
 * unqualified one would claim wherever the caller's search_path leads.
 */
function claimFunctionSql(t: string, name: TableName): string {
  const holder = Object.entries(holderJsonColumns)
    .map(([field, column]) => `'${field}', live.${column}`)
    .join(", ");
  return `CREATE FUNCTION ${homeSchema}.${claimFunctionName(name)}(
        p_scope text, p_key text, p_tool text, p_fingerprint text, p_token text,
        p_now bigint, p_lease_ms bigint, p_ttl_ms bigint)
      RETURNS text LANGUAGE plpgsql VOLATILE AS $claim$
      DECLARE
        found_holder text;
      BEGIN
        FOR attempt IN 1..3 LOOP
          SELECT json_build_object('claimed', false, 'now', p_now, ${holder})::text INTO found_holder
          FROM ${t} AS live WHERE live.scope = p_scope AND live.key = p_key AND live.expires_at > p_now;
          IF FOUND THEN
            RETURN found_holder;
          END IF;
          INSERT INTO ${t} AS held (scope, key, tool, fingerprint, status, token, created_at, updated_at,
            lease_expires_at, expires_at, attempts)
          VALUES (p_scope, p_key, p_tool, p_fingerprint, 'in_progress', p_token, p_now, p_now,
            p_now + p_lease_ms, p_now + p_lease_ms + p_ttl_ms, 1)
          ON CONFLICT (scope, key) DO UPDATE SET tool = excluded.tool, fingerprint = excluded.fingerprint,
            status = excluded.status, token = excluded.token, created_at = excluded.created_at,
            updated_at = excluded.updated_at, lease_expires_at = excluded.lease_expires_at,
            expires_at = excluded.expires_at, attempts = excluded.attempts, result = NULL, error = NULL
          WHERE held.expires_at <= excluded.created_at;
          IF FOUND THEN
            RETURN json_build_object('claimed', true, 'now', p_now)::text;
          END IF;
        END LOOP;
        RETURN NULL;
      END
      $claim$`;
}

/**
 * One DO block: one statement, one round trip, no parameters. It touches the catalog only when the
 * table or its claim function is missing, so an application role without CREATE rights runs fine against
 * a table a DBA made (with or without the function: see claimStatement). The advisory lock makes
 * concurrent first uses take turns instead of racing on the catalog (the race that otherwise fails one of
 * them with a unique violation on pg_type).
 */
function migrateSql(t: string, name: TableName): string {
  const literal = t.replaceAll("'", "''");
  const index = `"${name.table}_expires_at"`;
  const signature = `${claimFunctionName(name)}(${claimFunctionParameters})`;
  return `DO $idempotool$
    DECLARE
      home text;
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
      -- The function goes beside the table (see claimFunctionSql), whichever schema search_path found it in.
      SELECT quote_ident(n.nspname) INTO home
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = '${literal}'::regclass;
      IF to_regprocedure(home || '.${signature}') IS NULL THEN
        PERFORM pg_advisory_xact_lock(hashtext('idempotool migrate ${literal}'));
        IF to_regprocedure(home || '.${signature}') IS NULL THEN
          BEGIN
            EXECUTE replace($create$${claimFunctionSql(t, name)}$create$, '${homeSchema}', home);
          EXCEPTION
            -- A worker outside our lock, or one whose commit this session's catalog cache has not seen yet,
            -- made it first.
            WHEN duplicate_function THEN NULL;
            -- A role that may use the table but not create in its schema: claims run as one plain statement.
            WHEN insufficient_privilege THEN NULL;
            -- A hot standby, or a role whose transactions are read-only (default_transaction_read_only):
            -- it reads an existing table as before, and a claim there fails on the write anyway.
            WHEN read_only_sql_transaction THEN NULL;
          END;
        END IF;
      END IF;
    END
    $idempotool$`;
}
