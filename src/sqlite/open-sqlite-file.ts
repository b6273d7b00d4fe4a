/**
 * Opening a SQLite file with whichever driver the running runtime has: on Bun, its own `bun:sqlite`; on
 * Node and Deno, the built-in `node:sqlite` where it has one the store can use; else the better-sqlite3
 * package; or the libsql package when it is named. Each is loaded only when a file is opened with it,
 * synchronously (the store's factory is synchronous), so a runtime without `node:sqlite` never asks for it
 * and a runtime with a built-in never needs better-sqlite3 installed.
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { IdempotencyError } from "../core/errors.js";
import type {
  AnySqliteDatabase,
  BunSqliteDatabase,
  LibsqlDatabase,
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
type BunSqliteModule = { Database: new (path: string, options?: object) => BunSqliteDatabase };
type Libsql = new (path: string, options?: object) => LibsqlDatabase;

/** A driver, or why it cannot be used here; each is tried once per process. */
type Loaded<T> = { readonly driver: T } | { readonly error: unknown };

let nodeSqlite: Loaded<NodeSqliteModule> | undefined;
let betterSqlite3: Loaded<BetterSqlite3> | undefined;
let bunSqlite: Loaded<BunSqliteModule> | undefined;
let libsql: Loaded<Libsql> | undefined;

interface RuntimeGlobals {
  readonly Bun?: { readonly version: string };
  readonly Deno?: { readonly version: { readonly deno: string } };
  readonly process?: { readonly version?: string };
}

/** The runtime and its version, for messages: `Node v24.1.0`, `Deno 2.9.6`, `Bun 1.4.5`. */
function runtimeName(): string {
  const { Bun, Deno, process } = globalThis as RuntimeGlobals;
  if (Bun) return `Bun ${Bun.version}`;
  if (Deno) return `Deno ${Deno.version.deno}`;
  return `Node ${process?.version ?? "(unknown version)"}`;
}

/** The drivers a path is opened with when none is named, in order of preference. */
function defaultDrivers(): readonly SqliteDriver[] {
  const onBun = (globalThis as RuntimeGlobals).Bun !== undefined;
  return onBun ? ["bun:sqlite", "node:sqlite", "better-sqlite3"] : ["node:sqlite", "better-sqlite3"];
}

/**
 * The statement methods the store needs: Node 24, Deno 2 and Bun have them, and recent Node 22 releases
 * (22.23 does); older ones lack some.
 */
const nodeStatementMethods = ["setReturnArrays", "setReadBigInts"];

function loadNodeSqlite(): Loaded<NodeSqliteModule> {
  nodeSqlite ??= (() => {
    try {
      const module = withoutSqliteExperimentalWarning(() => require("node:sqlite") as NodeSqliteModule);
      const prototype = module.StatementSync.prototype as Record<string, unknown>;
      const missing = nodeStatementMethods.filter((name) => typeof prototype[name] !== "function");
      if (missing.length > 0) {
        return { error: new Error(`node:sqlite on ${runtimeName()} lacks ${missing.join(", ")}`) };
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

function loadBunSqlite(): Loaded<BunSqliteModule> {
  bunSqlite ??= (() => {
    try {
      return { driver: require("bun:sqlite") as BunSqliteModule };
    } catch (error) {
      return { error };
    }
  })();
  return bunSqlite;
}

function loadLibsql(): Loaded<Libsql> {
  libsql ??= (() => {
    try {
      const Database = require("libsql") as Libsql;
      // The package loads its native binary for this platform here: one missing for it fails now.
      new Database(":memory:").close();
      return { driver: Database };
    } catch (error) {
      return { error };
    }
  })();
  return libsql;
}

/**
 * Node 22 warns that SQLite is experimental the first time `node:sqlite` loads. The user chose no
 * experiment, the store did, so that one warning is dropped; every other warning passes as it was.
 */
export function withoutSqliteExperimentalWarning<T>(load: () => T): T {
  // Deno and Bun have process.emitWarning too; a runtime without it has no such warning to drop.
  if (typeof globalThis.process?.emitWarning !== "function") return load();
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
  /** The driver to use; default the runtime's own (see {@link openSqliteFile}). */
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

/** What each driver says when it cannot be loaded here: how to get it. */
const driverAdvice: Record<SqliteDriver, string> = {
  "node:sqlite": " (the store needs the node:sqlite of Node 24, a recent Node 22, Deno 2 or Bun).",
  "better-sqlite3": ": install better-sqlite3 beside idempotool: npm install better-sqlite3.",
  "bun:sqlite": " (it is Bun's own module: run on Bun).",
  libsql: ": install libsql beside idempotool: npm install libsql.",
};

/**
 * Opens `path` with the chosen driver, or the first of the runtime's that loads: on Bun `bun:sqlite`, then
 * `node:sqlite`; elsewhere `node:sqlite`; then better-sqlite3 (libsql only when named). `invalid_options`
 * when there is none.
 */
export function openSqliteFile(path: string, options: OpenSqliteFileOptions): OpenedSqliteFile {
  const timeout = Math.ceil(options.busyTimeoutMs);
  const mustExist = options.mustExist === true && path !== ":memory:";
  const open: Record<SqliteDriver, () => { database: AnySqliteDatabase } | { error: unknown }> = {
    "node:sqlite": () => {
      const loaded = loadNodeSqlite();
      if (!("driver" in loaded)) return loaded;
      // A file: URI with mode=rw opens an existing file and never creates one.
      const location = mustExist ? `${pathToFileURL(path).href}?mode=rw` : path;
      return { database: new loaded.driver.DatabaseSync(location, { timeout }) };
    },
    "better-sqlite3": () => {
      const loaded = loadBetterSqlite3();
      if (!("driver" in loaded)) return loaded;
      return { database: new loaded.driver(path, { fileMustExist: mustExist, timeout }) };
    },
    "bun:sqlite": () => {
      const loaded = loadBunSqlite();
      if (!("driver" in loaded)) return loaded;
      // strict: `@name` binds from a plain `name` key, and a missing one is an error, as on the others.
      const database = new loaded.driver.Database(path, {
        strict: true,
        readwrite: true,
        create: !mustExist,
      });
      // bun:sqlite takes no timeout option: SQLite's pragma sets the same busy timeout.
      database.exec(`PRAGMA busy_timeout = ${timeout}`);
      return { database };
    },
    libsql: () => {
      const loaded = loadLibsql();
      if (!("driver" in loaded)) return loaded;
      // libsql opens a path starting so as a remote database, where the store must not run.
      if (/^(?:libsql|https?):/.test(path)) {
        throw new IdempotencyError(
          "invalid_options",
          `${options.caller}: libsql opens ${JSON.stringify(path)} as a remote database; the store runs on ` +
            "a local file only (write ./ before a file name that starts so).",
        );
      }
      // libsql can neither refuse to create the file nor open a file: URI: the file is looked for first (one
      // removed between the look and the open is created empty, and holds no records).
      if (mustExist && !existsSync(path)) throw new Error(`unable to open database file: no file at ${path}`);
      return { database: new loaded.driver(path, { timeout }) };
    },
  };

  if (options.driver !== undefined) {
    if (!Object.hasOwn(driverAdvice, options.driver)) {
      throw new IdempotencyError(
        "invalid_options",
        `${options.caller}: driver must be "node:sqlite", "bun:sqlite", "better-sqlite3" or "libsql", ` +
          `got ${JSON.stringify(options.driver)}.`,
      );
    }
    const opened = open[options.driver]();
    if ("error" in opened) {
      throw new IdempotencyError(
        "invalid_options",
        `${options.caller}: driver "${options.driver}" cannot be loaded on ${runtimeName()}` +
          driverAdvice[options.driver],
        { cause: opened.error },
      );
    }
    return { database: opened.database, driver: options.driver };
  }
  const errors: unknown[] = [];
  for (const driver of defaultDrivers()) {
    const opened = open[driver]();
    if ("database" in opened) return { database: opened.database, driver };
    errors.push(opened.error);
  }
  throw new IdempotencyError(
    "invalid_options",
    `${options.caller} needs a SQLite driver, and ${runtimeName()} has none the store can use: ` +
      "run on Node 24 (its built-in node:sqlite), Deno 2 or Bun; or install better-sqlite3 beside idempotool: npm install better-sqlite3; " +
      "or pass an open database as { database }.",
    { cause: new AggregateError(errors, "no SQLite driver could be loaded") },
  );
}
