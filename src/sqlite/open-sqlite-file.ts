/**
 * Opening a SQLite file with whichever driver the running Node has: its built-in `node:sqlite` where it
 * has one the store can use, else the better-sqlite3 package. Each is loaded only when a file is opened
 * with it, synchronously (the store's factory is synchronous), so Node 20 never asks for `node:sqlite` and a
 * Node with the built-in never needs better-sqlite3 installed.
 */
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { IdempotencyError } from "../core/errors.js";
import type {
  AnySqliteDatabase,
  NodeSqliteDatabase,
  SqliteDatabase,
  SqliteDriver,
} from "./sqlite-connection.js";

const require = createRequire(import.meta.url);

type NodeSqliteModule = {
  DatabaseSync: new (location: string, options?: object) => NodeSqliteDatabase;
  StatementSync: { prototype: object };
};
type BetterSqlite3 = new (path: string, options?: object) => SqliteDatabase;

/** A driver, or why it cannot be used here; each is tried once per process. */
type Loaded<T> = { readonly driver: T } | { readonly error: unknown };

let nodeSqlite: Loaded<NodeSqliteModule> | undefined;
let betterSqlite3: Loaded<BetterSqlite3> | undefined;

/** The statement methods the store needs: Node 24 has them, and recent Node 22 releases (22.23 does); older ones lack some. */
const nodeStatementMethods = ["setReturnArrays", "setAllowUnknownNamedParameters", "setReadBigInts"];

function loadNodeSqlite(): Loaded<NodeSqliteModule> {
  nodeSqlite ??= (() => {
    try {
      const module = withoutSqliteExperimentalWarning(() => require("node:sqlite") as NodeSqliteModule);
      const prototype = module.StatementSync.prototype as Record<string, unknown>;
      const missing = nodeStatementMethods.filter((name) => typeof prototype[name] !== "function");
      if (missing.length > 0) {
        return { error: new Error(`node:sqlite on Node ${process.version} lacks ${missing.join(", ")}`) };
      }
      return { driver: module };
    } catch (error) {
      return { error };
    }
  })();
  return nodeSqlite;
}

function loadBetterSqlite3(): Loaded<BetterSqlite3> {
  betterSqlite3 ??= (() => {
    try {
      const Database = require("better-sqlite3") as BetterSqlite3;
      // The package loads its native addon on the first open: one built for another Node fails here.
      new Database(":memory:").close();
      return { driver: Database };
    } catch (error) {
      return { error };
    }
  })();
  return betterSqlite3;
}

/**
 * Node 22 warns that SQLite is experimental the first time `node:sqlite` loads. The user chose no
 * experiment, the store did, so that one warning is dropped; every other warning passes as it was.
 */
export function withoutSqliteExperimentalWarning<T>(load: () => T): T {
  const emitWarning = process.emitWarning;
  process.emitWarning = function (this: unknown, warning: string | Error, ...rest: unknown[]) {
    const type = typeof rest[0] === "string" ? rest[0] : (rest[0] as { type?: unknown } | undefined)?.type;
    const name = typeof warning === "string" ? type : warning.name;
    const text = typeof warning === "string" ? warning : warning.message;
    if (name === "ExperimentalWarning" && /\bSQLite\b/.test(text)) return;
    return (emitWarning as (...args: unknown[]) => void).call(this, warning, ...rest);
  } as typeof process.emitWarning;
  try {
    return load();
  } finally {
    process.emitWarning = emitWarning;
  }
}

export interface OpenSqliteFileOptions {
  /** The driver to use; default node:sqlite where the running Node has it, else better-sqlite3. */
  readonly driver?: SqliteDriver | undefined;
  /** Refuse to create the file: open an existing one only. */
  readonly mustExist?: boolean | undefined;
  /** SQLite's own busy timeout: how long one statement may block the thread waiting for a lock. */
  readonly busyTimeoutMs: number;
  /** Who asks, for messages: `sqliteStore({ path })`. */
  readonly caller: string;
}

/** An open database and the driver that opened it. */
export interface OpenedSqliteFile {
  readonly database: AnySqliteDatabase;
  readonly driver: SqliteDriver;
}

/** Opens `path` with the chosen driver, or the one available; `invalid_options` when there is none. */
export function openSqliteFile(path: string, options: OpenSqliteFileOptions): OpenedSqliteFile {
  const timeout = Math.ceil(options.busyTimeoutMs);
  const useNode = () => {
    const loaded = loadNodeSqlite();
    if (!("driver" in loaded)) return loaded;
    // A file: URI with mode=rw opens an existing file and never creates one.
    const location = options.mustExist && path !== ":memory:" ? `${pathToFileURL(path).href}?mode=rw` : path;
    return { database: new loaded.driver.DatabaseSync(location, { timeout }) };
  };
  const useBetterSqlite3 = () => {
    const loaded = loadBetterSqlite3();
    if (!("driver" in loaded)) return loaded;
    return { database: new loaded.driver(path, { fileMustExist: options.mustExist === true, timeout }) };
  };

  if (options.driver === "node:sqlite" || options.driver === "better-sqlite3") {
    const opened = options.driver === "node:sqlite" ? useNode() : useBetterSqlite3();
    if ("error" in opened) {
      throw new IdempotencyError(
        "invalid_options",
        `${options.caller}: driver "${options.driver}" cannot be loaded on Node ${process.version}` +
          (options.driver === "node:sqlite"
            ? " (the store needs the node:sqlite of Node 24 or of a recent Node 22)."
            : ": install better-sqlite3@12."),
        { cause: opened.error },
      );
    }
    return { database: opened.database, driver: options.driver };
  }
  if (options.driver !== undefined) {
    throw new IdempotencyError(
      "invalid_options",
      `${options.caller}: driver must be "node:sqlite" or "better-sqlite3", got ${JSON.stringify(options.driver)}.`,
    );
  }
  const native = useNode();
  if ("database" in native) return { database: native.database, driver: "node:sqlite" };
  const addon = useBetterSqlite3();
  if ("database" in addon) return { database: addon.database, driver: "better-sqlite3" };
  throw new IdempotencyError(
    "invalid_options",
    `${options.caller} needs a SQLite driver, and Node ${process.version} has none the store can use: ` +
      "run on Node 24 (its built-in node:sqlite), or install better-sqlite3@12, " +
      "or pass an open database as { database }.",
    { cause: new AggregateError([native.error, addon.error], "no SQLite driver could be loaded") },
  );
}
