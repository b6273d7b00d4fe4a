/**
 * Stores named by URL on the command line: `sqlite://path`, `postgres://…`, `redis://…`. Commands that
 * work on records (inspect, purge, reconcile) open their store here, so every one of them fails the
 * same way on a bad URL or an unreachable store: one line and exit 2.
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import type { IdempotencyStore } from "../core/store.js";
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

/**
 * How each kind of store is opened. PostgreSQL and Redis join here as their stores land; until then a
 * URL of theirs parses and is refused with one clear line.
 */
export const storeOpeners: Record<
  StoreUrl["kind"],
  (url: never, options: OpenOptions) => Promise<OpenedStore>
> = {
  sqlite: openSqlite,
  postgres: async () => {
    throw new UsageError("this build of idempotool cannot open postgres:// stores yet");
  },
  redis: async () => {
    throw new UsageError("this build of idempotool cannot open redis:// stores yet");
  },
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
