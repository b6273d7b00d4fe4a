import type { Subject } from "../subject.js";

/** The SQLite drivers the bench measures sqliteStore on, each its own row group (and file). */
export const SqliteDriver = { node: "node:sqlite", betterSqlite3: "better-sqlite3" } as const;
export type SqliteDriver = (typeof SqliteDriver)[keyof typeof SqliteDriver];

/**
 * The row groups, in the order they run and print. A SQLite group carries its driver in its name: the two
 * drivers' groups of a kind run back to back, so they read side by side.
 */
export const BackendName = {
  memory: "memory",
  sqliteNode: "sqlite (node:sqlite)",
  sqliteBetterSqlite3: "sqlite (better-sqlite3)",
  tieredSqliteNode: "tiered-sqlite (node:sqlite)",
  tieredSqliteBetterSqlite3: "tiered-sqlite (better-sqlite3)",
  redis: "redis",
  /** The same Redis through node-redis 4.7.1, the client (and version) @node-idempotency's adapter opens. */
  redisNodeRedis: "redis (node-redis 4)",
  tieredRedis: "tiered-redis",
  postgres: "postgres",
  mysql: "mysql",
  dynamodb: "dynamodb (dynalite)",
} as const;
export type BackendName = (typeof BackendName)[keyof typeof BackendName];
export const backendNames: readonly BackendName[] = Object.values(BackendName);

/** The SQLite row groups on each driver: the store alone, and tieredStore in front of it. */
export const sqliteBackendNames = {
  [SqliteDriver.node]: { store: BackendName.sqliteNode, tiered: BackendName.tieredSqliteNode },
  [SqliteDriver.betterSqlite3]: {
    store: BackendName.sqliteBetterSqlite3,
    tiered: BackendName.tieredSqliteBetterSqlite3,
  },
} as const satisfies Record<SqliteDriver, { store: BackendName; tiered: BackendName }>;

/** One row group of the table: subjects measured side by side (interleaved) on one backend. */
export interface Backend {
  readonly name: BackendName;
  /**
   * Backends of one family (the same store on each SQLite driver) run together: each workload and
   * concurrency's repetitions interleave all their subjects, so the backends compare repetition by
   * repetition, as the subjects of one backend do. Default: the backend alone.
   */
  readonly family?: string;
  readonly description: string;
  readonly concurrencies: readonly number[];
  readonly subjects: readonly Subject[];
}

/** Backends that share one connection or file, and how to let go of them. */
export interface BackendSetup {
  readonly backends: readonly Backend[];
  /** Server or library versions worth recording. */
  readonly info: Readonly<Record<string, string>>;
  /**
   * Counted costs (requests, units, bytes) measured after the timed runs with keys from `nextKey`, as
   * Markdown lines printed under the tables, and as `notes` in the JSON.
   */
  notes?(nextKey: () => string): Promise<readonly string[]>;
  close(): Promise<void>;
}

/** A backend that could not be set up: its rows are printed as skipped, with the reason. */
export class Skip extends Error {
  override name = "Skip";
}

/** Default concurrencies (issue 7: each workload at 1 and 32). */
export const defaultConcurrencies = [1, 32] as const;
