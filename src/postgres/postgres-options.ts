import { durationOption, invalidOption } from "../core/option-checks.js";
import { type PostgresClient, type StatementClient, statementClient } from "./postgres-clients.js";
import type { PostgresClock, TableName } from "./postgres-statements.js";

/** One statement with its parameters, in the object form pg's `query(config)` takes. */
export interface PgQueryConfig {
  readonly text: string;
  readonly values?: unknown[];
  /** Prepare the statement once per connection under this name, and reuse the plan (pg). */
  readonly name?: string;
  /** pg's client-side timeout: the query fails after this many ms and a pool discards the connection. */
  readonly query_timeout?: number;
}

/**
 * The part of pg's clients we use: `query` with a config object, answering rows. `pg.Pool` and `pg.Client`
 * fit, and anything else that takes pg's query config. postgres.js and PGlite are taken as they are
 * (`PostgresJsClient`, `PGliteClient`).
 */
export interface PgQueryable {
  query(config: PgQueryConfig): Promise<{ readonly rows: readonly unknown[] }>;
}

export interface PostgresStoreOptions {
  /**
   * Your `pg.Pool` (recommended) or `pg.Client`, postgres.js `sql` (`postgres(url)`, 4.2 or later), or PGlite
   * instance. It stays yours: the store never ends it.
   */
  readonly client: PostgresClient;
  /**
   * The table, optionally schema-qualified (`"idempotool.records"`); default `idempotool_records`.
   * Letters, digits and `_`, starting with a letter or `_`: at most 63 for the schema, 52 for the table.
   * The schema must exist; the table and its index are created on first use.
   */
  readonly table?: string | undefined;
  /**
   * The longest any operation may take, pool checkout included, before it fails (the core then fails
   * closed with `store_unavailable`). Default 5000 ms. A claim that lands after its caller gave up is
   * released as soon as its answer arrives. Give your pool a `connectionTimeoutMillis` and a server-side
   * `statement_timeout` no longer than this, so that the server, too, abandons what the caller gave up on.
   * Whole ms from 1 to 2^31 − 1 (what a timer holds).
   */
  readonly statementTimeoutMs?: number | undefined;
  /**
   * Which clock judges leases and expiry. `"server"` (default): PostgreSQL's, so every worker is judged by
   * one clock and one whose clock runs ahead can never take over a live lease (`now` in requests is
   * ignored). `"request"`: the core's `now`, for tests and single-clock setups.
   */
  readonly clock?: "server" | "request" | undefined;
  /**
   * Tests only: milliseconds added to the server clock (a number, or read before every statement),
   * to model a store whose clock has moved on. Only with the server clock.
   */
  readonly clockOffsetMs?: number | (() => number) | undefined;
  /**
   * Prepare each statement once per connection (pg's named statements, postgres.js's `prepare`) instead of
   * planning it on every call; default true. Turn it off behind a pooler that cannot keep prepared
   * statements (PgBouncer in transaction mode before 1.21, or without `max_prepared_statements`). PGlite
   * plans every statement whatever this says (its claim function keeps its own plans).
   */
  readonly preparedStatements?: boolean | undefined;
}

const identifier = "[A-Za-z_][A-Za-z0-9_]";
// The index is named `<table>_expires_at`, which must fit PostgreSQL's 63-byte identifiers.
const tableNamePattern = new RegExp(`^(?:(${identifier}{0,62})\\.)?(${identifier}{0,51})$`);
const defaultTable = "idempotool_records";
const defaultStatementTimeoutMs = 5_000;
const owner = "postgresStore()";

/** The options, checked and completed. */
export interface ResolvedPostgresOptions {
  readonly client: PostgresClient;
  /** The client, as the store sends statements to it. */
  readonly statements: StatementClient;
  readonly table: string;
  readonly name: TableName;
  readonly timeoutMs: number;
  readonly clock: PostgresClock;
  readonly offsetMs: () => number;
  readonly preparedStatements: boolean;
}

/** Validate every option once, at configuration time, naming the option at fault. */
export function resolvePostgresOptions(options: PostgresStoreOptions): ResolvedPostgresOptions {
  if (typeof options !== "object" || options === null) invalidOption(owner, "options", "must be an object");
  const client = options.client;
  const shape = client as Partial<PgQueryable & { unsafe: unknown }> | null;
  const known =
    typeof client === "function"
      ? typeof shape?.unsafe === "function"
      : typeof client === "object" && typeof shape?.query === "function";
  if (!known) {
    invalidOption(
      owner,
      "client",
      "must be a pg.Pool or pg.Client (anything with query(config)), a postgres.js sql or a PGlite instance",
    );
  }
  const statements = statementClient(client);
  const table = options.table ?? defaultTable;
  const match = typeof table === "string" ? tableNamePattern.exec(table) : null;
  if (!match) {
    invalidOption(
      owner,
      "table",
      "must be a plain identifier, optionally schema-qualified (letters, digits, _; " +
        `at most 63 for the schema and 52 for the table), got ${JSON.stringify(table)}`,
    );
  }
  const timeoutMs = durationOption(
    owner,
    "statementTimeoutMs",
    options.statementTimeoutMs,
    defaultStatementTimeoutMs,
  );
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
  const preparedStatements = options.preparedStatements ?? true;
  if (typeof preparedStatements !== "boolean") {
    invalidOption(owner, "preparedStatements", `must be true or false, got ${String(preparedStatements)}`);
  }
  const offsetMs =
    typeof offset === "function"
      ? () => {
          const value = offset();
          if (!Number.isSafeInteger(value)) {
            throw new TypeError(
              `postgresStore: clockOffsetMs() must return an integer, got ${String(value)}`,
            );
          }
          return value;
        }
      : () => offset;
  return {
    client,
    statements,
    table,
    name: { schema: match[1], table: match[2]! },
    timeoutMs,
    clock,
    offsetMs,
    preparedStatements,
  };
}
