/**
 * Stores named by URL on the command line: `sqlite://path`, `postgres://…`, `mysql://…`, `redis://…`,
 * `dynamodb://table?region=…`. Commands that work on records (inspect, purge, reconcile) open their store
 * here, so every one of them fails the same way on a bad URL, a missing store or table, or an unreachable
 * server: one line and exit 2. None creates a store or a table unless asked, and none prints a password.
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import type { IdempotencyStore } from "../core/store.js";
import { createTableInput, dynamoStore } from "../dynamodb/index.js";
import { mysqlStore } from "../mysql/index.js";
import { postgresStore } from "../postgres/index.js";
import { redisStore } from "../redis/index.js";
import { type AnySqliteDatabase, sqliteStore } from "../sqlite/index.js";
import { busyWaitPerAttemptMs } from "../sqlite/lock-wait.js";
import { openSqliteFile } from "../sqlite/open-sqlite-file.js";
import { OptionError, UsageError } from "./errors.js";
import { loadOptional } from "./optional-packages.js";
import { printable } from "./output.js";
import { redactUrl } from "./redact.js";

/** A parsed store URL. */
export type StoreUrl =
  | { readonly kind: "sqlite"; readonly path: string; readonly table: string | undefined }
  | { readonly kind: "postgres"; readonly url: string; readonly table: string | undefined }
  | { readonly kind: "mysql"; readonly url: string; readonly table: string | undefined }
  | { readonly kind: "redis"; readonly url: string; readonly prefix: string | undefined }
  | {
      readonly kind: "dynamodb";
      readonly table: string | undefined;
      /** The AWS region; absent, the SDK's own (AWS_REGION, the profile). */
      readonly region: string | undefined;
      /** Another endpoint than AWS's: DynamoDB Local, dynalite, a VPC endpoint. */
      readonly endpoint: string | undefined;
    };

/** A store the command opened and must close. */
export type OpenedStore = IdempotencyStore & {
  close(): Promise<void>;
  /**
   * The instant the store's `purge` would judge expiry by, were it called now: PostgreSQL's or MySQL's clock, or for
   * DynamoDB this machine's less the store's skew margin. Absent where `purge` judges by the `now` it is
   * given (SQLite, with `Date.now()`).
   */
  readonly purgeCutoff?: () => Promise<number>;
};

const examples =
  "sqlite://./idempotool.db, postgres://user@host:5432/db, mysql://user@host:3306/db, redis://host:6379 or " +
  "dynamodb://table?region=eu-west-1";

/**
 * Parse a store URL. `sqlite://` takes a path (`sqlite://./records.db`, `sqlite:///var/lib/x.db`);
 * `?table=` names the SQLite, PostgreSQL or MySQL table and `?prefix=` the Redis key prefix. `dynamodb://` takes
 * the table where a host would be, and `?region=` and `?endpoint=`; credentials come from the AWS SDK's
 * own chain (environment, profile, role). Messages show the URL with its password masked.
 * @example
 * parseStoreUrl("sqlite://./records.db?table=tool_calls"); // { kind: "sqlite", path: "./records.db", table: "tool_calls" }
 */
export function parseStoreUrl(text: string): StoreUrl {
  const shown = `"${printable(redactUrl(text))}"`;
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(text)?.[1]?.toLowerCase();
  if (scheme === "sqlite") {
    const [location = "", query = ""] = text.slice("sqlite:".length).replace(/^\/\//, "").split("?", 2);
    const path = decodePercents(location);
    if (path === "")
      throw new UsageError(`the store URL ${shown} has no file path (like sqlite://./idempotool.db)`);
    return { kind: "sqlite", path, table: new URLSearchParams(query).get("table") ?? undefined };
  }
  if (scheme === "dynamodb") {
    const [location = "", query = ""] = text.slice("dynamodb:".length).replace(/^\/\//, "").split("?", 2);
    const params = new URLSearchParams(query);
    const endpoint = params.get("endpoint") ?? undefined;
    if (endpoint !== undefined && !URL.canParse(endpoint))
      throw new UsageError(
        `the store URL ${shown} has an endpoint that is not a URL (like http://127.0.0.1:8000)`,
      );
    const table = decodePercents(location.replace(/\/$/, ""));
    return {
      kind: "dynamodb",
      table: table === "" ? undefined : table,
      region: params.get("region") ?? undefined,
      endpoint,
    };
  }
  if (
    scheme === "postgres" ||
    scheme === "postgresql" ||
    scheme === "mysql" ||
    scheme === "mariadb" ||
    scheme === "redis" ||
    scheme === "rediss"
  ) {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      throw new UsageError(
        `the store URL ${shown} is not a valid URL: check the host and port, and percent-encode ` +
          `characters like @ : / ? # in the user name and password (like ${examples})`,
      );
    }
    if (url.hostname === "") throw new UsageError(`the store URL ${shown} names no host`);
    if (scheme.startsWith("postgres"))
      return { kind: "postgres", url: text, table: url.searchParams.get("table") ?? undefined };
    if (scheme === "mysql" || scheme === "mariadb")
      return { kind: "mysql", url: text, table: url.searchParams.get("table") ?? undefined };
    return { kind: "redis", url: text, prefix: url.searchParams.get("prefix") ?? undefined };
  }
  throw new UsageError(
    `the store URL ${shown} is not one idempotool knows: use ${examples}${scheme ? ` (not ${printable(scheme)}:)` : ""}`,
  );
}

/**
 * A file path from a URL: percent-escapes decoded where they are valid (`my%20records.db`), any other
 * `%` kept as written (`100%.db`).
 */
function decodePercents(location: string): string {
  return location.replace(/(?:%[0-9a-f]{2})+/gi, (escapes) => {
    try {
      return decodeURIComponent(escapes);
    } catch {
      return escapes;
    }
  });
}

/** How each kind of store is opened; each checks it can reach its server before a command uses it. */
export const storeOpeners: Record<
  StoreUrl["kind"],
  (url: never, options: OpenOptions) => Promise<OpenedStore>
> = {
  sqlite: openSqlite,
  postgres: openPostgres,
  mysql: openMysql,
  redis: openRedis,
  dynamodb: openDynamo,
};

export interface OpenOptions {
  /**
   * Create what is missing: the SQLite file, the table. Default false: a store that is not there is a
   * misspelled path or `--table`, and a command that reads must never write one into being.
   */
  readonly create?: boolean;
  /**
   * The command only reads. Redis has no table to be missing, so a prefix under which no record lives is
   * refused instead, as a misspelled `--prefix`.
   */
  readonly readOnly?: boolean;
}

/** Open the store a URL names, failing with a {@link UsageError} when it is bad, missing or cannot be reached. */
export async function openStore(url: string | StoreUrl, options: OpenOptions = {}): Promise<OpenedStore> {
  const parsed = typeof url === "string" ? parseStoreUrl(url) : url;
  const open = storeOpeners[parsed.kind] as (url: StoreUrl, options: OpenOptions) => Promise<OpenedStore>;
  return open(parsed, options);
}

/** The table the SQLite store uses unless told otherwise. */
const defaultSqliteTable = "idempotool_records";

async function openSqlite(
  url: Extract<StoreUrl, { kind: "sqlite" }>,
  options: OpenOptions,
): Promise<OpenedStore> {
  const path = resolve(url.path);
  const shown = printable(path);
  const table = url.table ? { table: url.table } : {};
  if (options.create) {
    try {
      const store = sqliteStore({ path, ...table });
      store.migrate();
      return store;
    } catch (error) {
      throw (
        optionError(error) ??
        new UsageError(`cannot open the SQLite store at ${shown}: ${reasonOf(error)}`, { cause: error })
      );
    }
  }
  // The store's own check of the table name, on a throwaway in-memory database: a bad --table is an
  // option error whether or not the file is there.
  try {
    await sqliteStore({ path: ":memory:", ...table }).close();
  } catch (error) {
    throw (
      optionError(error) ?? new UsageError(`cannot open a SQLite store: ${reasonOf(error)}`, { cause: error })
    );
  }
  if (!existsSync(path)) throw new UsageError(`no SQLite store at ${shown}`);
  let database: AnySqliteDatabase;
  try {
    // node:sqlite where this Node has it, else better-sqlite3. mustExist: a file removed since the check
    // above is not created either. A short busy timeout per attempt: the store waits for locks on timers.
    database = openSqliteFile(path, {
      mustExist: true,
      busyTimeoutMs: busyWaitPerAttemptMs,
      caller: "sqlite:// stores",
    }).database;
  } catch (error) {
    throw new UsageError(`cannot open the SQLite store at ${shown}: ${reasonOf(error)}`, { cause: error });
  }
  try {
    const store = sqliteStore({ database, ...table });
    const name = url.table ?? defaultSqliteTable;
    const tables = (
      database.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as {
        name: string;
      }[]
    ).map((row) => row.name);
    // SQLite matches table names without regard to case.
    if (!tables.some((t) => t.toLowerCase() === name.toLowerCase())) {
      const others = tables.filter((t) => !t.startsWith("sqlite_"));
      const there =
        others.length === 0
          ? "it has no tables"
          : `its tables: ${others.slice(0, 10).map(printable).join(", ")}`;
      throw new UsageError(
        `the SQLite store at ${shown} has no table ${printable(name)} (${there}); check --table`,
      );
    }
    return {
      ...store,
      close: async () => {
        database.close();
      },
    };
  } catch (error) {
    database.close();
    if (error instanceof UsageError) throw error;
    throw (
      optionError(error) ??
      new UsageError(`cannot open the SQLite store at ${shown}: ${reasonOf(error)}`, { cause: error })
    );
  }
}

/** How long a command waits for a server before it says it cannot reach it. */
const connectTimeoutMs = 5_000;

async function openPostgres(
  url: Extract<StoreUrl, { kind: "postgres" }>,
  options: OpenOptions,
): Promise<OpenedStore> {
  const pg = await loadDriver<{ Pool: new (config: object) => PgPool }>("pg", "postgres://");
  // `table` is ours, not a connection parameter.
  const connection = new URL(url.url);
  connection.searchParams.delete("table");
  const shown = printable(redactUrl(connection.toString()));
  const pool = new pg.Pool({
    connectionString: connection.toString(),
    connectionTimeoutMillis: connectTimeoutMs,
    max: 2,
  });
  // The pool connects on its first query, so a bad table name is found before any server is asked.
  let store: ReturnType<typeof postgresStore>;
  try {
    store = postgresStore({ client: pool, ...(url.table ? { table: url.table } : {}) });
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw optionError(error) ?? error;
  }
  try {
    await pool.query("SELECT 1");
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw new UsageError(`cannot reach the PostgreSQL store at ${shown}: ${reasonOf(error)}`, {
      cause: error,
    });
  }
  if (!options.create) {
    // Without this, the store's first query would create a misspelled table.
    const qualified = store.table
      .split(".")
      .map((part) => `"${part}"`)
      .join(".");
    let found: unknown;
    try {
      const { rows } = await pool.query({
        text: "SELECT to_regclass($1) IS NOT NULL AS found",
        values: [qualified],
      });
      found = (rows[0] as { found?: unknown } | undefined)?.found;
    } catch (error) {
      await pool.end().catch(() => undefined);
      throw new UsageError(`cannot read the PostgreSQL store at ${shown}: ${reasonOf(error)}`, {
        cause: error,
      });
    }
    if (found !== true) {
      await pool.end().catch(() => undefined);
      throw new UsageError(`the PostgreSQL store at ${shown} has no table ${store.table}; check --table`);
    }
  }
  return {
    ...store,
    close: () => pool.end(),
    // The store judges by the server's clock (clock "server"): its purge reads statement_timestamp().
    purgeCutoff: async () => {
      const { rows } = await pool.query(
        "SELECT floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint AS now",
      );
      return Number((rows[0] as { now: unknown }).now);
    },
  };
}

async function openMysql(
  url: Extract<StoreUrl, { kind: "mysql" }>,
  options: OpenOptions,
): Promise<OpenedStore> {
  const mysql = await loadOptional("a mysql:// store", ["mysql2"], async () => {
    const module = (await import("mysql2/promise")) as MysqlDriver & { default?: MysqlDriver };
    return module.default ?? module;
  });
  // `table` is ours, not a connection parameter; mysql2 reads only mysql:// URLs.
  const connection = new URL(url.url.replace(/^mariadb:/i, "mysql:"));
  connection.searchParams.delete("table");
  const shown = printable(redactUrl(connection.toString()));
  const pool = mysql.createPool({
    uri: connection.toString(),
    connectTimeout: connectTimeoutMs,
    connectionLimit: 2,
  });
  let store: ReturnType<typeof mysqlStore>;
  try {
    store = mysqlStore({ client: pool, ...(url.table ? { table: url.table } : {}) });
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw optionError(error) ?? error;
  }
  let found: unknown;
  try {
    const [rows] = await pool.query(
      "SELECT COUNT(*) AS found FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?",
      [store.table],
    );
    found = (rows as { found?: unknown }[])[0]?.found;
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw new UsageError(`cannot reach the MySQL store at ${shown}: ${reasonOf(error)}`, { cause: error });
  }
  if (!options.create && Number(found) === 0) {
    // Without this, the store's first query would create a misspelled table.
    await pool.end().catch(() => undefined);
    throw new UsageError(`the MySQL store at ${shown} has no table ${store.table}; check --table`);
  }
  return {
    ...store,
    close: () => pool.end(),
    // The store judges by the server's clock (clock "server"): its purge reads UTC_TIMESTAMP().
    purgeCutoff: async () => {
      const [rows] = await pool.query(
        "SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(3)) DIV 1000 AS now",
      );
      return Number((rows as { now: unknown }[])[0]?.now);
    },
  };
}

async function openRedis(
  url: Extract<StoreUrl, { kind: "redis" }>,
  options: OpenOptions,
): Promise<OpenedStore> {
  const ioredis = await loadDriver<{ Redis: new (url: string, options: object) => RedisClient }>(
    "ioredis",
    "redis://",
  );
  const connection = new URL(url.url);
  connection.searchParams.delete("prefix");
  const shown = printable(redactUrl(connection.toString()));
  const client = new ioredis.Redis(connection.toString(), {
    lazyConnect: true,
    connectTimeout: connectTimeoutMs,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  // Errors reach the command through the rejected calls; without a listener ioredis prints each one too.
  client.on("error", () => undefined);
  let store: ReturnType<typeof redisStore>;
  try {
    store = redisStore({ client, ...(url.prefix ? { prefix: url.prefix } : {}) });
  } catch (error) {
    client.disconnect();
    throw optionError(error) ?? error;
  }
  try {
    await client.connect();
  } catch (error) {
    client.disconnect();
    throw new UsageError(`cannot reach the Redis store at ${shown}: ${reasonOf(error)}`, { cause: error });
  }
  if (options.readOnly) {
    let page: Awaited<ReturnType<typeof store.list>>;
    try {
      page = await store.list({ limit: 1 });
    } catch (error) {
      client.disconnect();
      throw new UsageError(`cannot read the Redis store at ${shown}: ${reasonOf(error)}`, { cause: error });
    }
    if (page.records.length === 0) {
      client.disconnect();
      throw new UsageError(
        `no records under the prefix ${printable(JSON.stringify(store.prefix))} in the Redis store at ${shown}; ` +
          "check --prefix (Redis keeps no table, so an empty prefix and a misspelled one look alike)",
      );
    }
  }
  return {
    ...store,
    close: async () => {
      await client.quit();
    },
  };
}

async function openDynamo(
  url: Extract<StoreUrl, { kind: "dynamodb" }>,
  options: OpenOptions,
): Promise<OpenedStore> {
  const sdk = await loadDriver<typeof import("@aws-sdk/client-dynamodb")>(
    "@aws-sdk/client-dynamodb",
    "dynamodb://",
  );
  if (url.table === undefined)
    throw new UsageError("the dynamodb:// store URL names no table (like dynamodb://idempotool_records)");
  const where = `DynamoDB table ${printable(url.table)}${url.endpoint ? ` at ${printable(redactUrl(url.endpoint))}` : ""}`;
  const client = new sdk.DynamoDBClient({
    ...(url.region ? { region: url.region } : {}),
    ...(url.endpoint ? { endpoint: url.endpoint } : {}),
    maxAttempts: 2,
    requestHandler: { connectionTimeout: connectTimeoutMs, requestTimeout: connectTimeoutMs },
  });
  let store: ReturnType<typeof dynamoStore>;
  try {
    store = dynamoStore({ client, table: url.table });
  } catch (error) {
    client.destroy();
    throw optionError(error) ?? error;
  }
  try {
    await client.send(new sdk.DescribeTableCommand({ TableName: store.table }));
  } catch (error) {
    if ((error as { name?: unknown }).name !== "ResourceNotFoundException") {
      client.destroy();
      throw new UsageError(`cannot reach the ${where}: ${reasonOf(error)}`, { cause: error });
    }
    if (!options.create) {
      client.destroy();
      throw new UsageError(`no ${where}; check the URL and --table`);
    }
    try {
      await client.send(new sdk.CreateTableCommand(createTableInput(store.table)));
      await sdk.waitUntilTableExists({ client, maxWaitTime: 120 }, { TableName: store.table });
    } catch (createError) {
      client.destroy();
      throw new UsageError(`cannot create the ${where}: ${reasonOf(createError)}`, { cause: createError });
    }
  }
  return {
    ...store,
    close: async () => {
      client.destroy();
    },
    purgeCutoff: async () => Date.now() - store.clockSkewMarginMs,
  };
}

interface MysqlDriver {
  createPool(config: object): MysqlPool;
}

interface MysqlPool {
  query(sql: string, values?: unknown[]): Promise<readonly [unknown, unknown?]>;
  end(): Promise<void>;
}

interface PgPool {
  query(config: { text: string; values?: unknown[] } | string): Promise<{ rows: unknown[] }>;
  end(): Promise<void>;
}

type RedisClient = Parameters<typeof redisStore>[0]["client"] & {
  on(event: "error", listener: (error: unknown) => void): unknown;
  connect(): Promise<void>;
  quit(): Promise<unknown>;
  disconnect(): void;
};

/** Drivers are optional peers: load one only when its URL is used, and say how to get it. */
async function loadDriver<T>(name: string, scheme: string): Promise<T> {
  const module = await loadOptional(
    `a ${scheme} store`,
    [name],
    async () => (await import(name)) as T & { default?: T },
  );
  // A CommonJS package with one export (a constructor) arrives as `default`.
  return typeof module.default === "function" ? module.default : module;
}

/**
 * A store's refusal of its table or prefix, as an error about the option: `--table must be a plain SQL
 * identifier …`, not "cannot reach the store".
 */
function optionError(error: unknown): OptionError | undefined {
  if ((error as { code?: unknown } | null)?.code !== "invalid_options" || !(error instanceof Error))
    return undefined;
  const problem = error.message
    .replace(/^\w+(?:\(\))?:\s*/, "")
    .replace(/^option `(\w+)`/, "$1")
    .replace(/^(table|prefix)\b/, "--$1")
    .replace(/\.$/, "");
  // Other refusals (a driver that is not installed) are not about an option.
  if (!/^--(table|prefix)\b/.test(problem)) return undefined;
  return new OptionError(printable(problem), { cause: error });
}

function reasonOf(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) return reasonOf(error.errors[0]);
  return printable(error instanceof Error && error.message ? error.message : String(error));
}
