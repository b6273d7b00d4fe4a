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
 */
import type { PGliteClient } from "./postgres-clients.js";

interface Held {
  /** The instance whose store took the lock, while it lives. */
  holder: WeakRef<PGliteClient>;
}

/** The data directories this process holds, by real path. The locks live as long as the process. */
const held = new Map<string, Held>();
/** The open lock databases, kept from the garbage collector: closing one would drop its lock. */
const locks: unknown[] = [];
/** Instances refused a directory, and why: refused for as long as they live. */
const refusals = new WeakMap<PGliteClient, Error>();

/**
 * The directory `pglite` keeps its data in, if it keeps it in files: a plain path or a `file://` one.
 * Undefined for an instance in memory or in a browser's storage (`memory://`, `idb://`, `opfs-ahp://`).
 */
export function dataDirectoryOf(pglite: PGliteClient): string | undefined {
  const dataDir = pglite.dataDir;
  if (typeof dataDir !== "string" || dataDir === "") return undefined;
  if (dataDir.startsWith("file://")) return dataDir.slice("file://".length);
  return /^[a-z][a-z\d+.-]*:\/\//i.test(dataDir) ? undefined : dataDir;
}

/**
 * Hold `pglite`'s data directory for it, or throw when another instance holds it: one still open in this
 * process, or any in another process. Nothing to hold for an instance that keeps no files. Call once the
 * instance is ready (the directory exists then); again after a refusal, to try again.
 */
export async function holdDataDirectory(pglite: PGliteClient): Promise<void> {
  const directory = dataDirectoryOf(pglite);
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
    const holder = mine.holder.deref();
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
    // The instance that held it is closed (or gone): the lock passes to this one.
    mine.holder = new WeakRef(pglite);
    return;
  }
  const lockPath = `${real}.idempotool-lock`;
  const { database } = openSqliteFile(lockPath, {
    busyTimeoutMs: 0,
    caller: "postgresStore (the lock on a PGlite data directory)",
  });
  try {
    database.exec("BEGIN EXCLUSIVE");
  } catch (error) {
    database.close();
    throw refuse(
      pglite,
      new Error(
        `the PGlite data directory ${real} is open in another process (it holds ${lockPath}). PGlite keeps ` +
          `a data directory in one process's memory: two processes on one directory would each claim every ` +
          `key and run the tool twice. Use one process, or a PostgreSQL server (or pglite-socket) to share ` +
          `records.`,
        { cause: error },
      ),
    );
  }
  locks.push(database);
  held.set(real, { holder: new WeakRef(pglite) });
}

/** Refuse `pglite` its directory for as long as it lives, for `reason`. */
function refuse(pglite: PGliteClient, reason: Error): Error {
  refusals.set(pglite, reason);
  return reason;
}
