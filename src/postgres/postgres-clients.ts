import { invalidOption } from "../core/option-checks.js";
import { holdDataDirectory } from "./pglite-lock.js";
import type { PgQueryable, PgQueryConfig } from "./postgres-options.js";

/**
 * The part of a postgres.js 4.2+ `sql` (from `postgres(url)`) we use: `unsafe` with values, and on each
 * query its own parsers, `transform(false)` and `cancel`. Whatever the instance's `types` and `transform`
 * do to the application's queries, the store reads its own rows as pg does. See docs/stores.md, "Clients".
 * @example
 * import postgres from "postgres";
 * import { postgresStore } from "idempotool/postgres";
 *
 * const sql = postgres(process.env.DATABASE_URL ?? "postgres://localhost/app", { transform: postgres.camel });
 * const store = postgresStore({ client: sql });
 */
export interface PostgresJsClient {
  unsafe(text: string, values: StatementValue[], options: { prepare: boolean }): PostgresJsQuery;
  readonly options: { readonly serializers: { readonly [oid: number]: (value: never) => unknown } };
}

/**
 * A postgres.js query, as the store drives it: the answer of `sql.unsafe(…)`.
 * @example
 * import postgres from "postgres";
 * import type { PostgresJsQuery } from "idempotool/postgres";
 *
 * const query: PostgresJsQuery = postgres().unsafe("SELECT 1", [], { prepare: false });
 */
export interface PostgresJsQuery extends PromiseLike<readonly unknown[]> {
  parsers(parsers: (column: { readonly type: number }) => ((raw: string) => unknown) | null): this;
  transform(transform: false): this;
  cancel(): Promise<void>;
}

/**
 * The part of a PGlite instance (`new PGlite()`, `@electric-sql/pglite`) we use: `query` with per-query
 * parsers and serializers, which take precedence over the instance's, and `waitReady`. The records live
 * in your process; see docs/stores.md, "Clients", for what other processes can do.
 * @example
 * import { PGlite } from "@electric-sql/pglite";
 * import { postgresStore } from "idempotool/postgres";
 *
 * const store = postgresStore({ client: new PGlite("./records") });
 */
export interface PGliteClient {
  readonly waitReady: Promise<void>;
  /** Where it keeps its data: a directory (which the store locks for it), or none in memory. */
  readonly dataDir?: string | undefined;
  /** True once closed: another instance on its directory may then take the directory's lock. */
  readonly closed?: boolean | undefined;
  query(
    text: string,
    values: unknown[],
    options: {
      parsers: { readonly [oid: number]: (raw: string) => unknown };
      serializers: { readonly [oid: number]: (value: unknown) => string };
    },
  ): Promise<{ readonly rows: readonly unknown[] }>;
}

/**
 * What the store's statements bind: text, and integers it casts to bigint.
 * @example
 * import type { StatementValue } from "idempotool/postgres";
 *
 * const values: StatementValue[] = ["tenant-1", "order-42", 60_000, null];
 */
export type StatementValue = string | number | null;

/**
 * Every client `postgresStore()` takes: pg's, postgres.js's or PGlite's.
 * @example
 * import pg from "pg";
 * import type { PostgresClient } from "idempotool/postgres";
 *
 * const client: PostgresClient = new pg.Pool();
 */
export type PostgresClient = PgQueryable | PostgresJsClient | PGliteClient;

/** Stops a statement the store gave up on, where the client can: set on a statement's answer. */
export const cancelStatement: unique symbol = Symbol("idempotool.cancelStatement");

/** A statement's answer, and for a client that can stop it, how. */
export type StatementAnswer = Promise<{ readonly rows: readonly unknown[] }> & {
  readonly [cancelStatement]?: () => void;
};

/** How the store sends statements: pg's `query(config)`, or an adapter for another client. */
export interface StatementClient {
  query(config: PgQueryConfig): StatementAnswer;
  /**
   * Settles once the client can take statements: a PGlite instance starting up, then holding its data
   * directory. Not bounded by the timeout; asked again after it failed.
   */
  readonly ready?: () => Promise<unknown>;
}

// The types the store's statements return (see postgres-statements.ts), parsed as pg parses them by default.
// Any other type stays the server's text, as pg leaves a type it does not know (int8 among them).
const integer = (raw: string) => Number.parseInt(raw, 10);
const textParsers: { readonly [oid: number]: (raw: string) => unknown } = {
  16: (raw: string) => raw === "t", // bool
  21: integer, // int2
  23: integer, // int4
  26: integer, // oid
  700: Number.parseFloat, // float4
  701: Number.parseFloat, // float8
};
const keepText = (raw: string) => raw;
const parserFor = (column: { readonly type: number }) => textParsers[column.type] ?? null;

const owner = "postgresStore()";

/**
 * The client as the store sends statements to it. pg's is used as it is; postgres.js's and PGlite's are
 * told apart by their shape and wrapped, each statement with parsers of its own so that rows read the same
 * whatever the client's settings.
 */
export function statementClient(client: PostgresClient): StatementClient {
  if (typeof client === "function" && typeof (client as Partial<PostgresJsClient>).unsafe === "function") {
    return postgresJsStatements(client as PostgresJsClient);
  }
  if (typeof client === "object" && client !== null && "waitReady" in client) {
    return pgliteStatements(client as PGliteClient);
  }
  return client as PgQueryable;
}

function postgresJsStatements(sql: PostgresJsClient): StatementClient {
  // Without per-query parsers and transform(false) (postgres.js before 4.2), the instance's `types` and
  // `transform` would decide what the store reads: its rows, renamed or reparsed, would not be records.
  const probe = sql.unsafe("SELECT 1", [], { prepare: false }) as Partial<PostgresJsQuery>;
  if (typeof probe.parsers !== "function" || typeof probe.transform !== "function") {
    invalidOption(
      owner,
      "client",
      "is a postgres.js client older than 4.2: upgrade postgres to 4.2 or later",
    );
  }
  // Values are sent through the instance's serializers, by the type the server gives each parameter: the
  // store's are text and bigint. A custom type on either would change the keys and times it writes.
  const sent: [number, string, unknown, string][] = [
    [25, "text", "it's ☃", "it's ☃"],
    [20, "int8", -9_007_199_254_740_991, "-9007199254740991"],
  ];
  for (const [oid, name, value, text] of sent) {
    const serialize = sql.options?.serializers?.[oid] as ((value: unknown) => unknown) | undefined;
    if (serialize !== undefined && serialize(value) !== text) {
      invalidOption(
        owner,
        "client",
        `is a postgres.js client whose \`types\` change how ${name} values (oid ${oid}) are sent: give the store a postgres() instance without that custom type`,
      );
    }
  }
  return {
    query(config) {
      // A statement without values goes by the simple protocol (the migration's DO block).
      const query = sql
        .unsafe(config.text, (config.values ?? []) as StatementValue[], {
          prepare: config.name !== undefined,
        })
        .parsers(parserFor)
        .transform(false);
      const answer = Promise.resolve(query).then((rows) => ({ rows }));
      // A query still queued is withdrawn unsent; a running one gets a cancel request, and postgres.js closes
      // its connection if the server stays silent (cancel_timeout), so a frozen connection is replaced.
      return Object.assign(answer, {
        [cancelStatement]: () => {
          query.cancel().catch(() => {});
        },
      });
    },
  };
}

function pgliteStatements(pglite: PGliteClient): StatementClient {
  // Per-query parsers and serializers override the instance's, for every type the store reads or sends.
  const options = {
    parsers: { ...textParsers, 20: keepText, 25: keepText },
    serializers: { 20: String, 25: String },
  };
  return {
    // One session, one statement at a time: PGlite plans each statement it is given (the claim function keeps
    // its own plans), and a statement the store gave up on cannot be stopped, only its answer handled.
    query: (config) => pglite.query(config.text, config.values ?? [], options),
    // Starting up (initdb, on a fresh instance) takes seconds on a busy machine: not a statement.
    ready: () => pglite.waitReady.then(() => holdDataDirectory(pglite)),
  };
}
