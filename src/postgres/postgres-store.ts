import { createHash } from "node:crypto";
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import { decodeListCursor, encodeListCursor, listLimit, purgeLimit } from "../core/list-paging.js";
import { type ClaimResult, claimedRecord, type IdempotencyStore, refuseNul } from "../core/store.js";
import { boundedQueries } from "./bounded-query.js";
import type { PostgresClient } from "./postgres-clients.js";
import { type PgQueryConfig, type PostgresStoreOptions, resolvePostgresOptions } from "./postgres-options.js";
import {
  type ClaimRow,
  claimFunctionUnusableSqlStates,
  type NamedStatement,
  notLoggedPrefix,
  notLoggedSqlState,
  postgresStatements,
  type RecordRow,
  type SettleRow,
  settledRecord,
  toRecord,
} from "./postgres-statements.js";

/** An idempotency store on a PostgreSQL table. */
export interface PostgresStore extends IdempotencyStore {
  /** The client as given. */
  readonly client: PostgresClient;
  /** The table as given (or the default), unquoted. */
  readonly table: string;
  /**
   * Create the table and its index if missing, check that the table is an ordinary logged one, and add
   * the claim function (`<table>_claim_v1`, which makes claims cheaper) if missing and the role may
   * create it; without it claims still work, as one plain statement.
   * Runs once per store on first use anyway; call it at deploy time if you manage schemas.
   */
  migrate(): Promise<void>;
}

// Each extra attempt follows a race lost to a concurrent commit; a fifth loss in a row is not a race.
const claimAttempts = 5;

/**
 * A store on PostgreSQL, shared by a fleet of workers. Every operation is one statement (one round
 * trip), fenced by the owner token, and judged by the server's clock: under `clock: "server"` (the
 * default) the `now` of every request, `purge`'s included, is ignored. See docs/stores.md.
 * @example
 * import pg from "pg";
 * import { idempotent } from "idempotool";
 * import { postgresStore } from "idempotool/postgres";
 *
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, connectionTimeoutMillis: 5_000 });
 * pool.on("error", () => {}); // an idle connection that drops is replaced on next use
 * const store = postgresStore({ client: pool });
 * const sendEmail = idempotent(async (args: { to: string }) => ({ sent: args.to }), {
 *   name: "send_email",
 *   store,
 * });
 * const first = await sendEmail({ to: "alice@example.com" }, { key: "turn-7-alice" });
 */
export function postgresStore(options: PostgresStoreOptions): PostgresStore {
  const o = resolvePostgresOptions(options);
  const s = postgresStatements(o.name, o.clock);
  const client = o.client;

  // Named after a hash of their text, so stores on different tables never share a name on one connection.
  const names = new Map<string, string>();
  if (o.preparedStatements) {
    for (const { text } of [
      s.claim,
      s.claimStatement,
      s.claimChecked,
      s.takeover,
      s.settle,
      s.renew,
      s.release,
      s.get,
      s.delete,
      s.purge,
    ]) {
      names.set(text, `idempotool_${createHash("sha256").update(text).digest("hex").slice(0, 24)}`);
    }
  }
  const bounded = boundedQueries(o.statements, o.timeoutMs);
  const query_timeout = bounded.queryTimeoutMs;
  const send: Send = (operation, text, values, onLateRows) => {
    const name = names.get(text);
    let config: PgQueryConfig;
    if (values === undefined) config = { text, query_timeout };
    else if (name === undefined) config = { text, values, query_timeout };
    else config = { name, text, values, query_timeout };
    return bounded(operation, config, onLateRows);
  };

  let migrated: Promise<void> | undefined;
  let ready = false;
  const migrate = () => {
    migrated ??= Promise.resolve(o.statements.ready?.())
      .then(() => runMigration(send, s.migrate))
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
  // Not an async function once migrated: one promise and one turn fewer per statement.
  const run = (
    operation: string,
    text: string,
    values: unknown[],
    onLateRows?: (rows: readonly unknown[]) => void,
  ): Promise<unknown[]> =>
    ready
      ? send(operation, text, values, onLateRows)
      : migrate().then(() => send(operation, text, values, onLateRows));
  // How claims run: the store's first claim runs the plain statement and learns from it whether the claim
  // function may be called (claimChecked); "statement" for good when it may not, or when a call fails
  // because the function is gone or no longer executable.
  let claimPath: "check" | "function" | "statement" = "check";

  /** The "now" parameter: the core's time, or the offset added to the server's. */
  const now = (requestNow: number) => (o.clock === "server" ? o.offsetMs() : requestNow);
  /** Runs a statement with its parameters taken by name from `params` (most often the request itself). */
  const runNamed = <P>(operation: string, statement: NamedStatement<P>, params: P, requestNow?: number) =>
    run(
      operation,
      statement.text,
      statement.values(params, requestNow === undefined ? undefined : now(requestNow)),
    );

  return {
    client,
    table: o.table,
    migrate,

    async claim(request): Promise<ClaimResult> {
      const { scope, key } = request;
      // PostgreSQL text cannot hold U+0000: say so instead of letting the driver fail obscurely.
      refuseNul("postgresStore", "in PostgreSQL.", scope, key, request.tool);
      for (let attempt = 1; ; attempt++) {
        const path = claimPath;
        const viaFunction = path === "function";
        const statement = viaFunction ? s.claim : path === "check" ? s.claimChecked : s.claimStatement;
        const values = statement.values(request, now(request.now));
        /** The claim's answer: the function's, parsed from its JSON, or the plain statement's row. */
        const answer = (rows: readonly unknown[]): ClaimRow | undefined => {
          if (!viaFunction) return rows[0] as ClaimRow | undefined;
          const json = (rows[0] as { claim: string | null } | undefined)?.claim;
          return json == null ? undefined : (JSON.parse(json) as ClaimRow);
        };
        // A claim that timed out may still land. Its caller was told the store is unavailable and never
        // runs the tool, so the store gives the key back as soon as the late answer shows the claim.
        const giveBack = (rows: readonly unknown[]) => {
          if (answer(rows)?.claimed !== true) return;
          send("release", s.release.text, s.release.values(request)).catch(() => {});
        };
        let rows: unknown[];
        try {
          rows = await run("claim", statement.text, values, giveBack);
        } catch (error) {
          // The function was dropped, or the role's EXECUTE revoked, since the first claim checked: see
          // claimStatement. Where the role may not use the table either, the statement fails the same way.
          if (!viaFunction || !claimFunctionUnusableSqlStates.has(sqlState(error) ?? "")) throw error;
          claimPath = "statement";
          attempt--;
          continue;
        }
        const row = answer(rows);
        if (path === "check" && row && claimPath === "check") {
          claimPath = row.useFunction === true ? "function" : "statement";
        }
        if (row?.claimed === true) {
          // The statement computed the same from the same request and instant, in exact integer arithmetic.
          return { claimed: true, record: claimedRecord(request, row.now), now: row.now };
        }
        if (row) return { claimed: false, record: toRecord(row, request), now: row.now };
        // No row: the holder committed after the statement's snapshot (see claimSql), or the function lost
        // three such races in a row. Look again.
        if (attempt === claimAttempts) {
          throw new Error(
            `postgresStore: claim of (${scope}, ${key}) lost ${claimAttempts} races in a row to concurrent writers`,
          );
        }
      }
    },

    async takeover(request) {
      const [row] = (await runNamed("takeover", s.takeover, request, request.now)) as RecordRow[];
      return row ? toRecord(row) : null;
    },

    async settle(request) {
      const [row] = (await runNamed("settle", s.settle, request, request.now)) as SettleRow[];
      return row ? settledRecord(row, request) : null;
    },

    async renew(request) {
      return (await runNamed("renew", s.renew, request, request.now)).length === 1;
    },

    async release(request) {
      return (await runNamed("release", s.release, request)).length === 1;
    },

    async get(id, requestNow) {
      const [row] = (await runNamed("get", s.get, id, requestNow)) as RecordRow[];
      return row ? toRecord(row) : undefined;
    },

    async delete(id) {
      return (await runNamed("delete", s.delete, id)).length === 1;
    },

    async list(query) {
      const limit = listLimit("postgresStore", query.limit);
      const after = query.cursor === undefined ? undefined : decodeListCursor("postgresStore", query.cursor);
      const statement = s.list(query, limit, after);
      const rows = (await run("list", statement.text, statement.values)) as RecordRow[];
      const records = rows.map((row) => toRecord(row));
      // One row beyond the limit says whether another page exists, so the last page carries no cursor.
      if (records.length <= limit) return { records };
      records.length = limit;
      const last = records[limit - 1]!;
      return { records, nextCursor: encodeListCursor(last) };
    },

    async purge({ now: requestNow, limit }) {
      const max = purgeLimit("postgresStore", limit);
      const [row] = (await runNamed("purge", s.purge, { limit: max }, requestNow)) as { deleted: number }[];
      return { deleted: row?.deleted ?? 0 };
    },
  };
}

type Send = (
  operation: string,
  text: string,
  values?: unknown[],
  onLateRows?: (rows: readonly unknown[]) => void,
) => Promise<unknown[]>;

async function runMigration(send: Send, sql: string): Promise<void> {
  try {
    await send("migrate", sql);
  } catch (error) {
    const code = sqlState(error);
    if (code === notLoggedSqlState && error instanceof Error && error.message.startsWith(notLoggedPrefix)) {
      throw new IdempotencyError(
        ErrorCode.invalidOptions,
        `postgresStore: ${error.message.slice(notLoggedPrefix.length)}`,
        {
          cause: error,
        },
      );
    }
    // Someone outside our advisory lock created the table or index at the same instant: by now it exists.
    if (code === "23505" || code === "42P07" || code === "42710") {
      await send("migrate", sql);
      return;
    }
    throw error;
  }
}

function sqlState(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}
