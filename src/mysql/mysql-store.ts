import { sameLengthDeadlines } from "../core/deadlines.js";
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import {
  decodeListCursor,
  encodeListCursor,
  keyPrefixUpperBound,
  listLimit,
  purgeLimit,
} from "../core/list-paging.js";
import { durationOption, invalidOption } from "../core/option-checks.js";
import type {
  ClaimRequest,
  ClaimResult,
  IdempotencyRecord,
  IdempotencyStore,
  ListQuery,
  RecordStatus,
} from "../core/store.js";

/**
 * The part of a MySQL client the store uses: `query(sql, values)` answering `[rows, fields]`, as the
 * promise API of mysql2 does (`mysql2/promise`'s `createPool()`, or `pool.promise()`).
 */
export interface MysqlQueryable {
  query(sql: string, values?: unknown[]): Promise<readonly [unknown, unknown?]>;
}

export interface MysqlStoreOptions {
  /**
   * Your mysql2 pool, promise API (`import mysql from "mysql2/promise"; mysql.createPool(…)`). It stays
   * yours: the store never ends it. Keep mysql2's default connection flags: the store reads how many rows
   * a write matched (`FOUND_ROWS`).
   */
  readonly client: MysqlQueryable;
  /** The table; default `idempotool_records`. Letters, digits and `_`, starting with a letter or `_`, at most 52. */
  readonly table?: string | undefined;
  /**
   * The longest any operation may take, pool checkout included, before it fails (the core then fails
   * closed with `store_unavailable`). Default 5000 ms. A claim that lands after its caller gave up is
   * released as soon as its answer arrives. Give the pool a `connectTimeout` no longer than this.
   */
  readonly statementTimeoutMs?: number | undefined;
  /**
   * Which clock judges leases and expiry. `"server"` (default): the database server's (UTC), so every
   * worker is judged by one clock (`now` in requests is ignored). `"request"`: the core's `now`, for tests
   * and single-clock setups.
   */
  readonly clock?: "server" | "request" | undefined;
  /** Tests only: milliseconds added to the server clock (a number, or read before every statement). */
  readonly clockOffsetMs?: number | (() => number) | undefined;
}

/** An idempotency store on a MySQL or MariaDB table. */
export interface MysqlStore extends IdempotencyStore {
  readonly client: MysqlQueryable;
  /** The table as given (or the default). */
  readonly table: string;
  /**
   * Create the table and its index if missing, then check that the table is one the store can trust
   * (InnoDB; scope, key and token as `VARBINARY`; primary key (scope, key)), else `invalid_options`.
   * Runs once per store on first use anyway; call it at deploy time if you manage schemas.
   */
  migrate(): Promise<void>;
}

const owner = "mysqlStore()";
const defaultTable = "idempotool_records";
const tableNamePattern = /^[A-Za-z_][A-Za-z0-9_]{0,51}$/;
// Each extra attempt follows a race lost to a writer that removed or replaced the row meanwhile.
const claimAttempts = 5;

const columns =
  "scope, `key`, tool, fingerprint, status, token, created_at, updated_at, lease_expires_at, expires_at, " +
  "attempts, result, error";

/** The columns a claim replaces in an expired row; expires_at, which its condition reads, last. */
const replacedColumns = [
  "tool",
  "fingerprint",
  "status",
  "token",
  "created_at",
  "updated_at",
  "lease_expires_at",
  "attempts",
  "result",
  "error",
  "expires_at",
];
/** ER_LOCK_DEADLOCK. */
const deadlock = 1213;

/** A row as mysql2 answers it: binary columns as Buffers, big integers as numbers or strings. */
type Row = Record<string, unknown>;

/**
 * A store on MySQL 8 or MariaDB 10.6+, shared by a fleet of workers. Claims are one conditional upsert
 * (the row is inserted, or replaces an expired one, atomically) read back by the claimant's owner token;
 * settles, renewals, takeovers and releases are single statements fenced by that token, judged by the
 * server's clock. Keys, scopes and tokens are kept as bytes (`VARBINARY`), compared exactly: no
 * collation folds two keys into one. See docs/stores.md.
 * @example
 * import mysql from "mysql2/promise";
 * import { idempotent } from "idempotool";
 * import { mysqlStore } from "idempotool/mysql";
 *
 * const pool = mysql.createPool({ uri: process.env.MYSQL_URL ?? "mysql://root@127.0.0.1:3306/test", connectTimeout: 5_000 });
 * const store = mysqlStore({ client: pool });
 * const sendEmail = idempotent(async (args: { to: string }) => ({ sent: args.to }), {
 *   name: "send_email",
 *   store,
 * });
 * await sendEmail({ to: "alice@example.com" }, { key: "turn-7-alice" });
 */
export function mysqlStore(options: MysqlStoreOptions): MysqlStore {
  const o = resolveOptions(options);
  const t = `\`${o.table}\``;
  const deadline = sameLengthDeadlines(o.timeoutMs);

  /** The instant a statement judges by: the server's clock in ms (plus the offset), or the request's. */
  const clock = (requestNow: number): [string, number] =>
    o.clock === "server"
      ? ["(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(3)) DIV 1000 + ?)", o.offsetMs()]
      : ["?", requestNow];

  /** One statement, failed after the timeout; a late answer reaches `onLate`. */
  const send = (operation: string, sql: string, values: unknown[], onLate?: (result: unknown) => void) =>
    new Promise<unknown>((resolve, reject) => {
      const answer = o.client.query(sql, values);
      const pending = deadline(() =>
        reject(
          new Error(`mysqlStore: ${operation} got no answer within ${o.timeoutMs} ms (statementTimeoutMs)`),
        ),
      );
      answer.then(
        ([result]) => {
          if (pending.clear()) resolve(result);
          else onLate?.(result);
        },
        (error: unknown) => {
          if (pending.clear()) reject(error as Error);
        },
      );
    });

  let migrated: Promise<void> | undefined;
  let ready = false;
  const migrate = () => {
    migrated ??= send(
      "migrate",
      `CREATE TABLE IF NOT EXISTS ${t} (
        scope VARBINARY(1020) NOT NULL, \`key\` VARBINARY(1020) NOT NULL, tool VARBINARY(1020) NOT NULL,
        fingerprint VARBINARY(255) NOT NULL, status VARBINARY(16) NOT NULL, token VARBINARY(255) NOT NULL,
        created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, lease_expires_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL, attempts INT NOT NULL, result LONGBLOB NULL, error LONGBLOB NULL,
        PRIMARY KEY (scope, \`key\`), KEY \`${o.table}_expires_at\` (expires_at)
      ) ENGINE = InnoDB`,
      [],
    )
      .then(() => send("migrate", shapeSql, [o.table]))
      .then((rows) => checkShape(o.table, rowsOf(rows)[0]))
      .then(
        () => {
          ready = true;
        },
        (error: unknown) => {
          migrated = undefined;
          throw error;
        },
      );
    return migrated;
  };
  const run = (operation: string, sql: string, values: unknown[], onLate?: (result: unknown) => void) =>
    ready ? send(operation, sql, values, onLate) : migrate().then(() => send(operation, sql, values, onLate));
  const rowsOf = (result: unknown) => result as Row[];
  const matched = (result: unknown) => (result as { affectedRows?: number }).affectedRows ?? 0;

  /** The row of (scope, key), live or expired, with the instant the store judges by (`now`); or undefined. */
  const read = async (operation: string, scope: string, key: string, requestNow: number) => {
    const [now, nowValue] = clock(requestNow);
    const [row] = rowsOf(
      await run(operation, `SELECT ${columns}, ${now} AS now FROM ${t} WHERE scope = ? AND \`key\` = ?`, [
        nowValue,
        scope,
        key,
      ]),
    );
    return row;
  };

  const claim = async (request: ClaimRequest): Promise<ClaimResult> => {
    const { scope, key } = request;
    // A repeat (the common case) finds its live holder with one read and no lock.
    const seen = await read("claim", scope, key, request.now);
    if (seen !== undefined && Number(seen.expires_at) > Number(seen.now)) {
      return { claimed: false, record: toRecord(seen), now: Number(seen.now) };
    }
    for (let attempt = 1; ; attempt++) {
      const [now, nowValue] = clock(request.now);
      // Inserts the claimed record, or replaces an expired one; a live row is left as it is. MySQL assigns
      // left to right, each assignment seeing the ones before it, so expires_at, which the condition reads,
      // is assigned last (MariaDB's SIMULTANEOUS_ASSIGNMENT mode reads old values everywhere: the same).
      // The server's clock reads one instant for a whole statement.
      const replace = (column: string) =>
        `${column} = IF(expires_at <= VALUES(created_at), VALUES(${column}), ${column})`;
      const upsert =
        `INSERT INTO ${t} (${columns}) VALUES (?, ?, ?, ?, 'in_progress', ?, ${now}, ${now}, ${now} + ?, ` +
        `${now} + ? + ?, 1, NULL, NULL) ON DUPLICATE KEY UPDATE ${replacedColumns.map(replace).join(", ")}`;
      const values = [
        scope,
        key,
        request.tool,
        request.fingerprint,
        request.token,
        nowValue,
        nowValue,
        nowValue,
        request.leaseMs,
        nowValue,
        request.leaseMs,
        request.ttlMs,
      ];
      // A claim that timed out may still land: its caller never runs the tool, so the key is given back.
      const giveBack = () => {
        send("release", releaseSql, [scope, key, request.token]).catch(() => {});
      };
      try {
        await run("claim", upsert, values, giveBack);
      } catch (error) {
        // A deadlock between two claimants rolls the victim's statement back whole: it changed nothing.
        if (errno(error) !== deadlock || attempt === claimAttempts) throw error;
        continue;
      }
      // The upsert may have made the record this caller's: if the read that would say so fails, the caller
      // never runs the tool, so the key is given back.
      const row = await read("claim", scope, key, request.now).catch((error: unknown) => {
        giveBack();
        throw error;
      });
      if (row !== undefined && bytes(row.token) === request.token) {
        const record = toRecord(row);
        return { claimed: true, record, now: record.createdAt };
      }
      if (row !== undefined && Number(row.expires_at) > Number(row.now)) {
        return { claimed: false, record: toRecord(row), now: Number(row.now) };
      }
      // The row went (released, purged) or expired between the upsert and the read: claim again.
      if (attempt === claimAttempts) {
        throw new Error(
          `mysqlStore: claim of (${scope}, ${key}) lost ${claimAttempts} races in a row to concurrent writers`,
        );
      }
    }
  };

  const releaseSql = `DELETE FROM ${t} WHERE scope = ? AND \`key\` = ? AND token = ? AND status IN ('in_progress', 'unknown')`;

  /** The record after a write fenced by `token`, read back; null when the token no longer holds it. */
  const readOwn = async (
    operation: string,
    scope: string,
    key: string,
    token: string,
    requestNow: number,
  ) => {
    const row = await read(operation, scope, key, requestNow);
    return row !== undefined && bytes(row.token) === token ? toRecord(row) : null;
  };

  return {
    client: o.client,
    table: o.table,
    migrate,
    claim,

    async takeover(request) {
      const [now, nowValue] = clock(request.now);
      const result = await run(
        "takeover",
        `UPDATE ${t} SET token = ?, status = 'in_progress', lease_expires_at = ${now} + ?,
           expires_at = GREATEST(expires_at, ${now} + ? + ?), attempts = attempts + 1, updated_at = ${now},
           result = NULL
         WHERE scope = ? AND \`key\` = ? AND token = ? AND expires_at > ${now}
           AND (status = 'unknown' OR (status = 'in_progress' AND lease_expires_at <= ${now}))`,
        [
          request.token,
          nowValue,
          request.leaseMs,
          nowValue,
          request.leaseMs,
          request.ttlMs,
          nowValue,
          request.scope,
          request.key,
          request.fromToken,
          nowValue,
          nowValue,
        ],
      );
      if (matched(result) !== 1) return null;
      return readOwn("takeover", request.scope, request.key, request.token, request.now);
    },

    async settle(request) {
      const [now, nowValue] = clock(request.now);
      const result = await run(
        "settle",
        `UPDATE ${t} SET status = ?, result = ?, error = ?, updated_at = ${now}, lease_expires_at = ${now},
           expires_at = ${now} + ?
         WHERE scope = ? AND \`key\` = ? AND token = ? AND status IN ('in_progress', 'unknown')`,
        [
          request.status,
          request.result,
          request.error,
          nowValue,
          nowValue,
          nowValue,
          request.ttlMs,
          request.scope,
          request.key,
          request.token,
        ],
      );
      if (matched(result) !== 1) return null;
      return readOwn("settle", request.scope, request.key, request.token, request.now);
    },

    async renew(request) {
      const [now, nowValue] = clock(request.now);
      const result = await run(
        "renew",
        `UPDATE ${t} SET lease_expires_at = ${now} + ?, expires_at = GREATEST(expires_at, ${now} + ? + ?),
           updated_at = ${now}
         WHERE scope = ? AND \`key\` = ? AND token = ? AND status = 'in_progress'`,
        [
          nowValue,
          request.leaseMs,
          nowValue,
          request.leaseMs,
          request.ttlMs,
          nowValue,
          request.scope,
          request.key,
          request.token,
        ],
      );
      return matched(result) === 1;
    },

    async release(request) {
      return matched(await run("release", releaseSql, [request.scope, request.key, request.token])) === 1;
    },

    async get(id, requestNow) {
      const row = await read("get", id.scope, id.key, requestNow);
      return row !== undefined && Number(row.expires_at) > Number(row.now) ? toRecord(row) : undefined;
    },

    async delete(id) {
      const result = await run("delete", `DELETE FROM ${t} WHERE scope = ? AND \`key\` = ?`, [
        id.scope,
        id.key,
      ]);
      return matched(result) === 1;
    },

    async list(query) {
      const limit = listLimit("mysqlStore", query.limit);
      const { where, values } = listFilter(query);
      const rows = rowsOf(
        await run(
          "list",
          `SELECT ${columns} FROM ${t}${where.length > 0 ? ` WHERE ${where.join(" AND ")}` : ""} ` +
            "ORDER BY scope, `key` LIMIT ?",
          [...values, limit + 1],
        ),
      );
      const records = rows.map(toRecord);
      // One row beyond the limit says whether another page exists, so the last page carries no cursor.
      if (records.length <= limit) return { records };
      records.length = limit;
      return { records, nextCursor: encodeListCursor(records[limit - 1]!) };
    },

    async purge({ now: requestNow, limit }) {
      const max = purgeLimit("mysqlStore", limit);
      const [now, nowValue] = clock(requestNow);
      const result = await run(
        "purge",
        `DELETE FROM ${t} WHERE expires_at <= ${now} ORDER BY expires_at LIMIT ?`,
        [nowValue, max],
      );
      return { deleted: matched(result) };
    },
  };
}

/** The engine, primary key and identity columns' types of the store's table, in the current database. */
const shapeSql = `SELECT t.ENGINE AS engine,
    (SELECT GROUP_CONCAT(s.COLUMN_NAME ORDER BY s.SEQ_IN_INDEX SEPARATOR ',') FROM information_schema.STATISTICS s
      WHERE s.TABLE_SCHEMA = t.TABLE_SCHEMA AND s.TABLE_NAME = t.TABLE_NAME AND s.INDEX_NAME = 'PRIMARY') AS primary_key,
    (SELECT GROUP_CONCAT(CONCAT(c.COLUMN_NAME, ' ', c.DATA_TYPE) ORDER BY c.COLUMN_NAME SEPARATOR ',')
      FROM information_schema.COLUMNS c WHERE c.TABLE_SCHEMA = t.TABLE_SCHEMA AND c.TABLE_NAME = t.TABLE_NAME
        AND c.COLUMN_NAME IN ('scope', 'key', 'token') AND c.DATA_TYPE NOT IN ('varbinary', 'binary')) AS text_columns
  FROM information_schema.TABLES t WHERE t.TABLE_SCHEMA = DATABASE() AND t.TABLE_NAME = ?`;

/**
 * Refuses a table the store did not make and cannot trust: one on an engine that is not crash-safe
 * (MyISAM, MEMORY, Aria: a crash or restart may lose a committed claim, and the repeat runs the tool
 * again), one whose key columns compare as text (a collation folds case and trailing spaces, so two keys
 * would share one record), or one whose primary key is not (scope, key).
 */
function checkShape(table: string, shape: Row | undefined): void {
  const why = shapeProblem(shape);
  if (why === undefined) return;
  throw new IdempotencyError(
    ErrorCode.invalidOptions,
    `mysqlStore: table ${table} ${why}. Give the store a table name of its own (it creates the table), or ` +
      "drop this one.",
  );
}

function shapeProblem(shape: Row | undefined): string | undefined {
  if (shape === undefined) return "is not in the connection's current database (or is a temporary table)";
  const engine = nullableBytes(shape.engine);
  if (engine?.toLowerCase() !== "innodb") {
    return `is on the ${engine ?? "unknown"} engine, which may lose a committed claim in a crash; the store needs InnoDB`;
  }
  const primaryKey = nullableBytes(shape.primary_key);
  if (primaryKey !== "scope,key") return `has primary key (${primaryKey ?? "none"}), not (scope, key)`;
  const textColumns = nullableBytes(shape.text_columns);
  if (textColumns !== null) {
    return (
      `keeps ${textColumns} as text: a collation would let two keys that differ in case or trailing spaces ` +
      "share one record; the store keeps them as VARBINARY"
    );
  }
  return undefined;
}

/** The WHERE conditions of a list query, and their values in order. */
function listFilter(query: ListQuery): { where: string[]; values: unknown[] } {
  const where: string[] = [];
  const values: unknown[] = [];
  const filter = (condition: string, ...given: unknown[]) => {
    where.push(condition);
    values.push(...given);
  };
  if (query.scope !== undefined) filter("scope = ?", query.scope);
  if (query.tool !== undefined) filter("tool = ?", query.tool);
  if (query.status !== undefined) filter("status = ?", query.status);
  if (query.keyPrefix) {
    // A range of bytes, not LIKE: % and _ in a prefix are plain characters, and the primary key serves it.
    filter("`key` >= ?", Buffer.from(query.keyPrefix));
    const upper = keyPrefixUpperBound(query.keyPrefix);
    if (upper !== undefined) filter("`key` < ?", Buffer.from(upper));
  }
  if (query.createdBefore !== undefined) filter("created_at < ?", query.createdBefore);
  if (query.createdAfter !== undefined) filter("created_at >= ?", query.createdAfter);
  if (query.cursor !== undefined) {
    const after = decodeListCursor("mysqlStore", query.cursor);
    filter(
      "(scope > ? OR (scope = ? AND `key` > ?))",
      Buffer.from(after.scope),
      Buffer.from(after.scope),
      Buffer.from(after.key),
    );
  }
  return { where, values };
}

function errno(error: unknown): number | undefined {
  const value = (error as { errno?: unknown } | null)?.errno;
  return typeof value === "number" ? value : undefined;
}

/** A binary column as the text it holds. */
function bytes(value: unknown): string {
  return Buffer.isBuffer(value) ? value.toString("utf8") : String(value);
}

function nullableBytes(value: unknown): string | null {
  return value === null || value === undefined ? null : bytes(value);
}

function toRecord(row: Row): IdempotencyRecord {
  return {
    scope: bytes(row.scope),
    key: bytes(row.key),
    tool: bytes(row.tool),
    fingerprint: bytes(row.fingerprint),
    status: bytes(row.status) as RecordStatus,
    token: bytes(row.token),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    leaseExpiresAt: Number(row.lease_expires_at),
    expiresAt: Number(row.expires_at),
    attempts: Number(row.attempts),
    result: nullableBytes(row.result),
    error: nullableBytes(row.error),
  };
}

interface ResolvedOptions {
  readonly client: MysqlQueryable;
  readonly table: string;
  readonly timeoutMs: number;
  readonly clock: "server" | "request";
  readonly offsetMs: () => number;
}

/** Validate every option once, at configuration time, naming the option at fault. */
function resolveOptions(options: MysqlStoreOptions): ResolvedOptions {
  if (typeof options !== "object" || options === null) invalidOption(owner, "options", "must be an object");
  const client = options.client;
  if (typeof client !== "object" || client === null || typeof client.query !== "function") {
    invalidOption(owner, "client", "must be a mysql2 pool with the promise API (mysql2/promise)");
  }
  const table = options.table ?? defaultTable;
  if (typeof table !== "string" || !tableNamePattern.test(table)) {
    invalidOption(
      owner,
      "table",
      `must be a plain identifier (letters, digits, _; at most 52), got ${JSON.stringify(table)}`,
    );
  }
  const timeoutMs = durationOption(owner, "statementTimeoutMs", options.statementTimeoutMs, 5_000);
  const clock = options.clock ?? "server";
  if (clock !== "server" && clock !== "request") {
    invalidOption(owner, "clock", `must be "server" or "request", got ${JSON.stringify(clock)}`);
  }
  const offset = options.clockOffsetMs ?? 0;
  if (typeof offset !== "function" && !Number.isSafeInteger(offset)) {
    invalidOption(
      owner,
      "clockOffsetMs",
      `must be an integer (ms) or a function returning one, got ${String(offset)}`,
    );
  }
  if (options.clockOffsetMs !== undefined && clock !== "server") {
    invalidOption(owner, "clockOffsetMs", 'shifts the server clock, so it needs clock: "server"');
  }
  const offsetMs =
    typeof offset === "function"
      ? () => {
          const value = offset();
          if (!Number.isSafeInteger(value)) {
            throw new IdempotencyError(
              ErrorCode.invalidOptions,
              `mysqlStore: clockOffsetMs() must return an integer, got ${String(value)}`,
            );
          }
          return value;
        }
      : () => offset;
  return { client, table, timeoutMs, clock, offsetMs };
}
