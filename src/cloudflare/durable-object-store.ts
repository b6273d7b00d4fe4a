import {
  decodeListCursor,
  encodeListCursor,
  keyPrefixUpperBound,
  listLimit,
  purgeLimit,
} from "../core/list-paging.js";
import { invalidOption } from "../core/option-checks.js";
import type {
  ClaimRequest,
  ClaimResult,
  IdempotencyRecord,
  IdempotencyStore,
  ListPage,
  ListQuery,
  PurgeRequest,
  RecordId,
  RecordStatus,
  ReleaseRequest,
  RenewRequest,
  SettleRequest,
  TakeoverRequest,
} from "../core/store.js";
import { releasedTokens } from "./released-tokens.js";

/** A value SQLite hands back in a Durable Object. */
export type DurableObjectSqlValue = ArrayBuffer | string | number | null;

/**
 * The part of a Durable Object's storage the store uses: `ctx.storage` of an object whose class is
 * declared with SQLite storage (`new_sqlite_classes` in wrangler's migrations).
 */
export interface DurableObjectSqlStorage {
  readonly sql: {
    exec(
      query: string,
      ...bindings: DurableObjectSqlValue[]
    ): { toArray(): Record<string, DurableObjectSqlValue>[] };
  };
  transactionSync<T>(closure: () => T): T;
}

export interface DurableObjectStoreOptions {
  /** The object's storage, `this.ctx.storage` inside your Durable Object class. */
  readonly storage: DurableObjectSqlStorage;
  /**
   * Table name; default `idempotool_records`. Names starting with `_cf_` are Cloudflare's. The tokens
   * released in the last day are kept beside it, in `<table>_released`.
   */
  readonly table?: string | undefined;
  /**
   * Which clock judges leases and expiry. `"object"` (default): the Durable Object's own, so every caller
   * of the object (workers in other places, with clocks of their own) is judged by one clock and a caller
   * whose clock runs ahead can never take over a live lease; `now` in requests is ignored. `"request"`:
   * the core's `now`, for tests with a fake clock. Released tokens are remembered for a day by the object's
   * clock either way, since a release carries no time.
   */
  readonly clock?: "object" | "request" | undefined;
}

/** An idempotency store on the SQLite storage of one Durable Object. */
export interface DurableObjectStore extends IdempotencyStore {
  /** Create the table and index if missing. Runs on first use anyway. */
  migrate(): void;
}

const tableNamePattern = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
const columns =
  "scope, key, tool, fingerprint, status, token, created_at, updated_at, lease_expires_at, expires_at, attempts, result, error";

type Row = Record<string, DurableObjectSqlValue>;

/** The one place that knows the columns: binds each field by its name. */
function toRecord(row: Row): IdempotencyRecord {
  return {
    scope: row.scope as string,
    key: row.key as string,
    tool: row.tool as string,
    fingerprint: row.fingerprint as string,
    status: row.status as RecordStatus,
    token: row.token as string,
    createdAt: row.created_at as number,
    updatedAt: row.updated_at as number,
    leaseExpiresAt: row.lease_expires_at as number,
    expiresAt: row.expires_at as number,
    attempts: row.attempts as number,
    result: row.result as string | null,
    error: row.error as string | null,
  };
}

/**
 * A store on a Durable Object's SQLite storage (`ctx.storage.sql`): the records live in the object, and
 * every operation is one synchronous step of it. The object runs one event at a time and its output gate
 * holds each answer until the write is durable, so a claim is atomic and a caller that saw it won knows it
 * is on disk.
 *
 * Calls may reach the object out of order (a caller that lost its connection goes on through a new stub),
 * so a claim can arrive after the release its caller sent once it gave up on it. The object remembers each
 * released token on its key for a day and refuses a claim that carries one, whatever the key holds: such a
 * claim never lands.
 *
 * Records are shared only by the callers that reach this one object. Route every caller of a key space to
 * the same object (`env.IDEMPOTOOL.idFromName(namespace)`) and reach it from elsewhere through
 * {@link durableObjectStoreClient}; see docs/integrations/cloudflare.md.
 * @example
 * import { DurableObject } from "cloudflare:workers";
 * import { durableObjectStore, handleStoreCall, type StoreCall } from "idempotool/cloudflare";
 *
 * export class IdempotencyRecords extends DurableObject {
 *   readonly store = durableObjectStore({ storage: this.ctx.storage });
 *   idempotency(call: StoreCall) {
 *     return handleStoreCall(this.store, call);
 *   }
 * }
 */
export function durableObjectStore(options: DurableObjectStoreOptions): DurableObjectStore {
  const owner = "durableObjectStore()";
  const { storage } = options;
  if (
    typeof storage !== "object" ||
    storage === null ||
    typeof storage.sql?.exec !== "function" ||
    typeof storage.transactionSync !== "function"
  ) {
    invalidOption(
      owner,
      "storage",
      "must be the storage of a Durable Object with SQLite storage (this.ctx.storage, with sql.exec and transactionSync)",
    );
  }
  const table = options.table ?? "idempotool_records";
  if (typeof table !== "string" || !tableNamePattern.test(table) || table.toLowerCase().startsWith("_cf_")) {
    invalidOption(
      owner,
      "table",
      `must be a plain SQL identifier (letters, digits, _; at most 63) not starting with _cf_, got ${JSON.stringify(table)}`,
    );
  }
  const clock = options.clock ?? "object";
  if (clock !== "object" && clock !== "request") {
    invalidOption(owner, "clock", `must be "object" or "request", got ${JSON.stringify(clock)}`);
  }
  // Inside workerd, Date.now() stands still while the object runs code and moves on at each I/O: it reads the
  // instant the current event began, so every statement of one operation is judged by one instant.
  const now = clock === "object" ? (_requestNow: number) => Date.now() : (requestNow: number) => requestNow;

  const t = `"${table}"`;
  const sql = storage.sql;
  const rows = (query: string, ...bindings: DurableObjectSqlValue[]) =>
    sql.exec(query, ...bindings).toArray();
  const released = releasedTokens(storage, table);
  let migrated = false;
  const migrate = () => {
    if (migrated) return;
    storage.transactionSync(() => {
      released.migrate();
      sql.exec(
        `CREATE TABLE IF NOT EXISTS ${t} (
          scope TEXT NOT NULL, key TEXT NOT NULL, tool TEXT NOT NULL, fingerprint TEXT NOT NULL,
          status TEXT NOT NULL, token TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
          lease_expires_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, attempts INTEGER NOT NULL,
          result TEXT, error TEXT,
          PRIMARY KEY (scope, key)
        )`,
      );
      sql.exec(`CREATE INDEX IF NOT EXISTS "${table}_expires_at" ON ${t} (expires_at)`);
    });
    migrated = true;
  };
  // Each operation is synchronous from its first statement to its answer: no other event of the object can
  // run in between, and transactionSync makes a multi-statement one all-or-nothing.
  const operation =
    <A extends unknown[], R>(body: (...args: A) => R) =>
    async (...args: A): Promise<R> => {
      migrate();
      return body(...args);
    };

  const getLive = (scope: string, key: string, at: number): IdempotencyRecord | undefined => {
    const row = rows(
      `SELECT ${columns} FROM ${t} WHERE scope = ? AND key = ? AND expires_at > ?`,
      scope,
      key,
      at,
    )[0];
    return row === undefined ? undefined : toRecord(row);
  };
  /** The one row a fenced write returned, as a record; null when the fence held. */
  const single = (written: Row[]): IdempotencyRecord | null =>
    written[0] === undefined ? null : toRecord(written[0]);

  return {
    migrate,

    claim: operation((request: ClaimRequest): ClaimResult => {
      const at = now(request.now);
      if (released.has(request.scope, request.key, request.token)) {
        throw new Error(
          `durableObjectStore: the claim by this token on ${JSON.stringify(request.key)} was released before it arrived, so it does not land; call again with a new token.`,
        );
      }
      return storage.transactionSync((): ClaimResult => {
        const holder = getLive(request.scope, request.key, at);
        if (holder !== undefined) return { claimed: false, record: holder, now: at };
        const leaseExpiresAt = at + request.leaseMs;
        // Inserts, or replaces an expired record; a live one fails the WHERE (and was answered above). The
        // record comes back as SQLite keeps it.
        const written = rows(
          `INSERT INTO ${t} (${columns}) VALUES (?, ?, ?, ?, 'in_progress', ?, ?, ?, ?, ?, 1, NULL, NULL)
           ON CONFLICT (scope, key) DO UPDATE SET tool = excluded.tool, fingerprint = excluded.fingerprint,
             status = excluded.status, token = excluded.token, created_at = excluded.created_at,
             updated_at = excluded.updated_at, lease_expires_at = excluded.lease_expires_at,
             expires_at = excluded.expires_at, attempts = excluded.attempts, result = NULL, error = NULL
           WHERE expires_at <= excluded.created_at
           RETURNING ${columns}`,
          request.scope,
          request.key,
          request.tool,
          request.fingerprint,
          request.token,
          at,
          at,
          leaseExpiresAt,
          leaseExpiresAt + request.ttlMs,
        );
        const record = single(written);
        if (record === null)
          throw new Error("durableObjectStore: claim found neither a live record nor room for one");
        return { claimed: true, record, now: at };
      });
    }),

    takeover: operation((request: TakeoverRequest) => {
      const at = now(request.now);
      return single(
        rows(
          `UPDATE ${t} SET token = ?, status = 'in_progress', lease_expires_at = ?,
             expires_at = MAX(expires_at, ?), attempts = attempts + 1, updated_at = ?, result = NULL
           WHERE scope = ? AND key = ? AND token = ? AND expires_at > ?
             AND (status = 'unknown' OR (status = 'in_progress' AND lease_expires_at <= ?))
           RETURNING ${columns}`,
          request.token,
          at + request.leaseMs,
          at + request.leaseMs + request.ttlMs,
          at,
          request.scope,
          request.key,
          request.fromToken,
          at,
          at,
        ),
      );
    }),

    settle: operation((request: SettleRequest) => {
      const at = now(request.now);
      return single(
        rows(
          `UPDATE ${t} SET status = ?, result = ?, error = ?, updated_at = ?, lease_expires_at = ?, expires_at = ?
           WHERE scope = ? AND key = ? AND token = ? AND status IN ('in_progress', 'unknown')
           RETURNING ${columns}`,
          request.status,
          request.result,
          request.error,
          at,
          at,
          at + request.ttlMs,
          request.scope,
          request.key,
          request.token,
        ),
      );
    }),

    renew: operation((request: RenewRequest) => {
      const at = now(request.now);
      const written = rows(
        `UPDATE ${t} SET lease_expires_at = ?, expires_at = MAX(expires_at, ?), updated_at = ?
         WHERE scope = ? AND key = ? AND token = ? AND status = 'in_progress'
         RETURNING 1`,
        at + request.leaseMs,
        at + request.leaseMs + request.ttlMs,
        at,
        request.scope,
        request.key,
        request.token,
      );
      return written.length === 1;
    }),

    release: operation(({ scope, key, token }: ReleaseRequest) => {
      return storage.transactionSync(() => {
        // Remembered whatever the key holds: the claim this release gives up on may be still on its way.
        released.remember(scope, key, token);
        const written = rows(
          `DELETE FROM ${t} WHERE scope = ? AND key = ? AND token = ? AND status IN ('in_progress', 'unknown')
           RETURNING 1`,
          scope,
          key,
          token,
        );
        return written.length === 1;
      });
    }),

    get: operation(({ scope, key }: RecordId, requestNow: number) => getLive(scope, key, now(requestNow))),

    delete: operation(({ scope, key }: RecordId) => {
      return rows(`DELETE FROM ${t} WHERE scope = ? AND key = ? RETURNING 1`, scope, key).length === 1;
    }),

    list: operation((query: ListQuery): ListPage => {
      const limit = listLimit("durableObjectStore", query.limit);
      const where: string[] = [];
      const bindings: DurableObjectSqlValue[] = [];
      const filter = (condition: string, ...values: DurableObjectSqlValue[]) => {
        where.push(condition);
        bindings.push(...values);
      };
      if (query.scope !== undefined) filter("scope = ?", query.scope);
      if (query.tool !== undefined) filter("tool = ?", query.tool);
      if (query.status !== undefined) filter("status = ?", query.status);
      if (query.keyPrefix) {
        // A range, not LIKE: % and _ in a prefix are plain characters, and the primary key serves the range.
        filter("key >= ?", query.keyPrefix);
        const upper = keyPrefixUpperBound(query.keyPrefix);
        if (upper !== undefined) filter("key < ?", upper);
      }
      if (query.createdBefore !== undefined) filter("created_at < ?", query.createdBefore);
      if (query.createdAfter !== undefined) filter("created_at >= ?", query.createdAfter);
      if (query.cursor !== undefined) {
        const after = decodeListCursor("durableObjectStore", query.cursor);
        filter("(scope, key) > (?, ?)", after.scope, after.key);
      }
      // One extra row tells whether another page exists, so the last page carries no cursor.
      const records = rows(
        `SELECT ${columns} FROM ${t}${where.length > 0 ? ` WHERE ${where.join(" AND ")}` : ""}
         ORDER BY scope, key LIMIT ?`,
        ...bindings,
        limit + 1,
      ).map(toRecord);
      if (records.length <= limit) return { records };
      records.length = limit;
      return { records, nextCursor: encodeListCursor(records[limit - 1]!) };
    }),

    purge: operation(({ now: requestNow, limit }: PurgeRequest) => {
      const max = purgeLimit("durableObjectStore", limit);
      // Walks the expires_at index from the oldest, so the cost follows what expired, not the table size.
      const deleted = rows(
        `DELETE FROM ${t} WHERE rowid IN
           (SELECT rowid FROM ${t} WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)
         RETURNING 1`,
        now(requestNow),
        max,
      ).length;
      released.prune(max);
      return { deleted };
    }),
  };
}
