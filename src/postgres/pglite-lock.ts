/**
 * One PGlite data directory, one PGlite instance. PGlite runs PostgreSQL inside the process and keeps the
 * directory's pages in that process's memory: two instances on one directory (two processes, say two MCP
 * clients each starting the same server, or two instances in one process) each see only their own writes,
 * so each claims every key, and a tool runs twice. The store holds a lock beside the directory from its
 * first statement on, and refuses to run on a directory another instance holds.
 *
 * The lock is SQLite's: an exclusive transaction on `<directory>.idempotool-lock`, never committed, held by a
 * file lock the operating system drops when the process ends however it ends, so a crashed holder never
 * leaves it behind. Within one process a closed instance hands it on to the next one opened on the directory.
 * An instance refused once is refused for good: it opened the directory beside another instance, and what it
 * read of the directory then may no longer be what is there.
 *
 * The store can take the lock only once it is given an instance, which has opened the directory by then: a
 * second instance refused so has already read it, and closing it writes that view back over what the holder
 * wrote since. {@link lockPGliteDirectory}, called before `new PGlite(dir)`, refuses before anything opens it.
 */
import { IdempotencyError } from "../core/errors.js";
import type { openSqliteFile } from "../sqlite/open-sqlite-file.js";
import type { PGliteClient } from "./postgres-clients.js";

type OpenSqliteFile = typeof openSqliteFile;

interface Held {
  /** The instance whose store took the lock, while it lives; none while only locked for one to come. */
  holder: WeakRef<PGliteClient> | undefined;
}

/** The data directories this process holds, by real path. The locks live as long as the process. */
const held = new Map<string, Held>();
/** The open lock databases, kept from the garbage collector: closing one would drop its lock. */
const locks: unknown[] = [];
/** Instances refused a directory, and why: refused for as long as they live. */
const refusals = new WeakMap<PGliteClient, Error>();

/**
 * The directory a PGlite `dataDir` names, if it keeps its data in files: a plain path or a `file://` one.
 * Undefined for an instance in memory or in a browser's storage (`memory://`, `idb://`, `opfs-ahp://`).
 */
function dataDirectoryOf(dataDir: string | undefined): string | undefined {
  if (typeof dataDir !== "string" || dataDir === "") return undefined;
  if (dataDir.startsWith("file://")) return dataDir.slice("file://".length);
  return /^[a-z][a-z\d+.-]*:\/\//i.test(dataDir) ? undefined : dataDir;
}

/**
 * Hold `pglite`'s data directory for it, or throw when another instance holds it: one still open in this
 * process, or any in another process. Nothing to hold for an instance that keeps no files. Call once the
 * instance is ready (the directory exists then). An instance refused once is refused again at every call.
 */
export async function holdDataDirectory(pglite: PGliteClient): Promise<void> {
  const directory = dataDirectoryOf(pglite.dataDir);
  if (directory === undefined) return;
  const refusal = refusals.get(pglite);
  if (refusal !== undefined) throw refusal;
  const [{ realpathSync }, { openSqliteFile }] = await Promise.all([
    import("node:fs"),
    import("../sqlite/open-sqlite-file.js"),
  ]);
  // From here on synchronous: two stores of this process never both find the directory free.
  const real = realpathSync(directory);
  const mine = held.get(real);
  if (mine !== undefined) {
    const holder = mine.holder?.deref();
    if (holder === pglite) return;
    if (holder !== undefined && holder.closed !== true) {
      throw refuse(
        pglite,
        new Error(
          `the PGlite data directory ${real} is open in another PGlite instance of this process, which ` +
            `keeps its pages in its own memory: two instances on one directory would each claim every key. ` +
            `Use one instance, or close the other before you open the next.`,
        ),
      );
    }
    // Locked for an instance to come, or the instance that held it is closed (or gone): it passes to this one.
    mine.holder = new WeakRef(pglite);
    return;
  }
  try {
    lockFile(real, openSqliteFile);
  } catch (error) {
    throw refuse(pglite, error as Error);
  }
  held.set(real, { holder: new WeakRef(pglite) });
}

/**
 * Lock a PGlite data directory for this process before opening it, so that a directory another process
 * holds is never opened here: a PGlite instance opened beside another reads the directory at once, and
 * closing it writes what it read back over what the other wrote since. Throws, with nothing opened, when
 * another process holds the directory; resolves at once when this process holds it already. The lock lasts
 * as long as the process, and the first `postgresStore()` on an instance of the directory takes it over.
 * Give the directory as you give it to PGlite, before any change of the working directory.
 * @example
 * import { PGlite } from "@electric-sql/pglite";
 * import { lockPGliteDirectory, postgresStore } from "idempotool/postgres";
 *
 * await lockPGliteDirectory("./records");
 * const store = postgresStore({ client: new PGlite("./records") });
 */
export async function lockPGliteDirectory(dataDir: string): Promise<void> {
  const directory = dataDirectoryOf(dataDir);
  if (directory === undefined) {
    throw new IdempotencyError(
      "invalid_options",
      `lockPGliteDirectory: ${JSON.stringify(dataDir)} is not a data directory on disk (a path or file:// path).`,
    );
  }
  const [{ existsSync, realpathSync }, { basename, dirname, resolve }, { openSqliteFile }] =
    await Promise.all([import("node:fs"), import("node:path"), import("../sqlite/open-sqlite-file.js")]);
  const absolute = resolve(directory);
  // A directory PGlite has yet to create is named by its parent's real path, as it will be once it exists.
  const real = existsSync(absolute)
    ? realpathSync(absolute)
    : resolve(realpathSync(dirname(absolute)), basename(absolute));
  if (held.has(real)) return;
  lockFile(real, openSqliteFile);
  held.set(real, { holder: undefined });
}

/** Take the lock beside directory `real` (a real path), or throw saying another process holds it. */
function lockFile(real: string, openSqliteFile: OpenSqliteFile): void {
  const lockPath = `${real}.idempotool-lock`;
  const { database } = openSqliteFile(lockPath, {
    busyTimeoutMs: 0,
    caller: "postgresStore (the lock on a PGlite data directory)",
  });
  try {
    database.exec("BEGIN EXCLUSIVE");
  } catch (error) {
    database.close();
    throw new Error(
      `the PGlite data directory ${real} is open in another process (it holds ${lockPath}). PGlite keeps ` +
        `a data directory in one process's memory: two processes on one directory would each claim every ` +
        `key and run the tool twice. Use one process, or a PostgreSQL server (or pglite-socket) to share ` +
        `records.`,
      { cause: error },
    );
  }
  locks.push(database);
}

/** Refuse `pglite` its directory for as long as it lives, for `reason`. */
function refuse(pglite: PGliteClient, reason: Error): Error {
  refusals.set(pglite, reason);
  return reason;
}
