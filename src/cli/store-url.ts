/**
 * Stores named by URL on the command line: `sqlite://path`, `postgres://…`, `redis://…`. Commands that
 * work on records (inspect, purge, reconcile) open their store here, so every one of them fails the
 * same way on a bad URL or an unreachable store: one line and exit 2.
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import type { IdempotencyStore } from "../core/store.js";
import { postgresStore } from "../postgres/index.js";
import { redisStore } from "../redis/index.js";
import { sqliteStore } from "../sqlite/index.js";
import { UsageError } from "./errors.js";

/** A parsed store URL. */
export type StoreUrl =
  | { readonly kind: "sqlite"; readonly path: string; readonly table: string | undefined }
  | { readonly kind: "postgres"; readonly url: string; readonly table: string | undefined }
  | { readonly kind: "redis"; readonly url: string; readonly prefix: string | undefined };

/** A store the command opened and must close. */
export type OpenedStore = IdempotencyStore & { close(): Promise<void> };

const examples = "sqlite://./idempotool.db, postgres://user@host:5432/db or redis://host:6379";

/**
 * Parse a store URL. `sqlite://` takes a path (`sqlite://./records.db`, `sqlite:///var/lib/x.db`);
 * `?table=` names the SQLite or PostgreSQL table and `?prefix=` the Redis key prefix.
 * @example
 * parseStoreUrl("sqlite://./records.db?table=tool_calls"); // { kind: "sqlite", path: "./records.db", table: "tool_calls" }
 */
export function parseStoreUrl(text: string): StoreUrl {
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(text)?.[1]?.toLowerCase();
  if (scheme === "sqlite") {
    const [location = "", query = ""] = text.slice("sqlite:".length).replace(/^\/\//, "").split("?", 2);
    const path = decodeURIComponent(location);
    if (path === "")
      throw new UsageError(`the store URL "${text}" has no file path (like sqlite://./idempotool.db)`);
    return { kind: "sqlite", path, table: new URLSearchParams(query).get("table") ?? undefined };
  }
  if (scheme === "postgres" || scheme === "postgresql" || scheme === "redis" || scheme === "rediss") {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      throw new UsageError(`the store URL "${text}" is not a valid URL (like ${examples})`);
    }
    if (url.hostname === "") throw new UsageError(`the store URL "${text}" names no host`);
    return scheme.startsWith("postgres")
      ? { kind: "postgres", url: text, table: url.searchParams.get("table") ?? undefined }
      : { kind: "redis", url: text, prefix: url.searchParams.get("prefix") ?? undefined };
  }
  throw new UsageError(
    `the store URL "${text}" is not one idempotool knows: use ${examples}${scheme ? ` (not ${scheme}:)` : ""}`,
  );
}

/** How each kind of store is opened; each checks it can reach its server before a command uses it. */
export const storeOpeners: Record<
  StoreUrl["kind"],
  (url: never, options: OpenOptions) => Promise<OpenedStore>
> = {
  sqlite: openSqlite,
  postgres: openPostgres,
  redis: openRedis,
};

export interface OpenOptions {
  /** Create the store if it does not exist (a fresh SQLite file). Default false: inspecting nothing is a mistake. */
  readonly create?: boolean;
}

/** Open the store a URL names, failing with a {@link UsageError} when it is bad or cannot be reached. */
export async function openStore(url: string | StoreUrl, options: OpenOptions = {}): Promise<OpenedStore> {
  const parsed = typeof url === "string" ? parseStoreUrl(url) : url;
  const open = storeOpeners[parsed.kind] as (url: StoreUrl, options: OpenOptions) => Promise<OpenedStore>;
  return open(parsed, options);
}

async function openSqlite(
  url: Extract<StoreUrl, { kind: "sqlite" }>,
  options: OpenOptions,
): Promise<OpenedStore> {
  const path = resolve(url.path);
  if (!options.create && !existsSync(path)) throw new UsageError(`no SQLite store at ${path}`);
  try {
    const store = sqliteStore({ path, ...(url.table ? { table: url.table } : {}) });
    store.migrate();
    return store;
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new UsageError(`cannot open the SQLite store at ${path}: ${reason}`, { cause: error });
  }
}

/** How long a command waits for a server before it says it cannot reach it. */
const connectTimeoutMs = 5_000;

async function openPostgres(url: Extract<StoreUrl, { kind: "postgres" }>): Promise<OpenedStore> {
  const pg = await loadDriver<{ Pool: new (config: object) => PgPool }>("pg", "postgres://");
  // `table` is ours, not a connection parameter.
  const connection = new URL(url.url);
  connection.searchParams.delete("table");
  const pool = new pg.Pool({
    connectionString: connection.toString(),
    connectionTimeoutMillis: connectTimeoutMs,
    max: 2,
  });
  try {
    await pool.query("SELECT 1");
    const store = postgresStore({ client: pool, ...(url.table ? { table: url.table } : {}) });
    return { ...store, close: () => pool.end() };
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw new UsageError(`cannot reach the PostgreSQL store at ${redact(connection)}: ${reasonOf(error)}`, {
      cause: error,
    });
  }
}

async function openRedis(url: Extract<StoreUrl, { kind: "redis" }>): Promise<OpenedStore> {
  const ioredis = await loadDriver<{ Redis: new (url: string, options: object) => RedisClient }>(
    "ioredis",
    "redis://",
  );
  const connection = new URL(url.url);
  connection.searchParams.delete("prefix");
  const client = new ioredis.Redis(connection.toString(), {
    lazyConnect: true,
    connectTimeout: connectTimeoutMs,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  // Errors reach the command through the rejected calls; without a listener ioredis prints each one too.
  client.on("error", () => undefined);
  try {
    await client.connect();
    const store = redisStore({ client, ...(url.prefix ? { prefix: url.prefix } : {}) });
    return {
      ...store,
      close: async () => {
        await client.quit();
      },
    };
  } catch (error) {
    client.disconnect();
    throw new UsageError(`cannot reach the Redis store at ${redact(connection)}: ${reasonOf(error)}`, {
      cause: error,
    });
  }
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
  try {
    return (await import(name)) as T;
  } catch (error) {
    throw new UsageError(`${scheme} stores need the ${name} package: npm install ${name}`, { cause: error });
  }
}

/** Never print a password from a URL. */
function redact(url: URL): string {
  const shown = new URL(url.toString());
  if (shown.password) shown.password = "***";
  return shown.toString();
}

function reasonOf(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) return reasonOf(error.errors[0]);
  return error instanceof Error && error.message ? error.message : String(error);
}
