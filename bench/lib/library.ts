/**
 * The library under test, loaded from its BUILT output (dist/ by default, or `--lib <dir>`), never from the
 * tsx-transformed source: the figures are those of the JavaScript users run. Types come from src/.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import type * as Core from "../../src/index.js";
import type { IdempotencyStore } from "../../src/index.js";
import type * as Sqlite from "../../src/sqlite/index.js";

export type CoreLib = typeof Core;
export type SqliteLib = typeof Sqlite;

/** What the bench uses of `idempotool/postgres` (kept as a shape so the bench compiles before the store lands). */
export interface PostgresLib {
  postgresStore(options: {
    client: unknown;
    table?: string;
    clock?: "server" | "request";
  }): IdempotencyStore & { migrate(): Promise<void> };
}

/** What the bench uses of `idempotool/redis`. */
export interface RedisLib {
  redisStore(options: { client: unknown; prefix?: string }): IdempotencyStore;
}

/** What the bench uses of `idempotool/mysql`. */
export interface MysqlLib {
  mysqlStore(options: { client: unknown; table?: string }): IdempotencyStore & { migrate(): Promise<void> };
}

/** What the bench uses of `idempotool/dynamodb`. */
export interface DynamoLib {
  dynamoStore(options: { client: unknown; table: string }): IdempotencyStore;
}

export interface Library {
  /** The directory the modules were loaded from. */
  readonly dir: string;
  readonly core: CoreLib;
  readonly sqlite: SqliteLib;
  /** Undefined when the built store is missing; `missing` says why. */
  readonly postgres: PostgresLib | undefined;
  readonly redis: RedisLib | undefined;
  readonly mysql: MysqlLib | undefined;
  readonly dynamodb: DynamoLib | undefined;
  readonly missing: Readonly<Record<string, string>>;
}

export async function loadLibrary(dir: string): Promise<Library> {
  const absolute = path.resolve(dir);
  const load = async <T>(relative: string): Promise<T> =>
    (await import(pathToFileURL(path.join(absolute, relative)).href)) as T;
  if (!existsSync(path.join(absolute, "index.js"))) {
    throw new Error(`No built library in ${absolute}: run \`npm run build\` first (or pass --lib <dir>).`);
  }
  const missing: Record<string, string> = {};
  const optional = async <T>(name: string, relative: string): Promise<T | undefined> => {
    if (!existsSync(path.join(absolute, relative))) {
      missing[name] = `${path.join(dir, relative)} is not built (the store has not landed yet)`;
      return undefined;
    }
    try {
      return await load<T>(relative);
    } catch (error) {
      missing[name] = `${path.join(dir, relative)} failed to load: ${(error as Error).message}`;
      return undefined;
    }
  };
  return {
    dir: absolute,
    core: await load<CoreLib>("index.js"),
    sqlite: await load<SqliteLib>("sqlite/index.js"),
    postgres: await optional<PostgresLib>("postgres", "postgres/index.js"),
    redis: await optional<RedisLib>("redis", "redis/index.js"),
    mysql: await optional<MysqlLib>("mysql", "mysql/index.js"),
    dynamodb: await optional<DynamoLib>("dynamodb", "dynamodb/index.js"),
    missing,
  };
}
