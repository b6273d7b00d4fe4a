import type { DurableObjectSqlStorage } from "./durable-object-store.js";

/** How long the object remembers a released token: a day after the release, by the object's clock. */
export const releasedTokenMemoryMs = 24 * 60 * 60 * 1000;
/** How many forgotten tokens one release clears on its way, so the table follows the last day's releases. */
const prunedPerRelease = 16;

/**
 * The tokens released on each key in the last day, in a table beside the records (`<table>_released`).
 *
 * A caller that gives up on a claim (its reply lost, its connection broken) releases the key with the same
 * token; the claim may still reach the object after that release, through a stub the caller no longer
 * uses. A token is never claimed again once released, so a claim carrying one is late, and is refused
 * whatever the key holds by then: the record never gets an owner that nobody stands behind.
 *
 * A release carries no time, so the memory runs on the object's clock (`Date.now()`) whichever clock judges
 * the records. A claim is refused for as long as its token is in the table, whatever time it carries.
 */
export interface ReleasedTokens {
  migrate(): void;
  /** Remember `token` as released on (scope, key) for a day from now; clears a few forgotten tokens. */
  remember(scope: string, key: string, token: string): void;
  /** Whether `token` was released on (scope, key) and is still remembered. */
  has(scope: string, key: string, token: string): boolean;
  /** Forget at most `limit` tokens whose day has passed, oldest first. */
  prune(limit: number): void;
}

export function releasedTokens(storage: DurableObjectSqlStorage, table: string): ReleasedTokens {
  const t = `"${table}_released"`;
  const sql = storage.sql;
  const prune = (limit: number) => {
    // Walks the index on `until` from the oldest, so the cost follows what is forgotten.
    sql.exec(
      `DELETE FROM ${t} WHERE rowid IN (SELECT rowid FROM ${t} WHERE until <= ? ORDER BY until LIMIT ?)`,
      Date.now(),
      limit,
    );
  };
  return {
    migrate() {
      sql.exec(
        `CREATE TABLE IF NOT EXISTS ${t} (
          scope TEXT NOT NULL, key TEXT NOT NULL, token TEXT NOT NULL, until INTEGER NOT NULL,
          PRIMARY KEY (scope, key, token)
        )`,
      );
      sql.exec(`CREATE INDEX IF NOT EXISTS "${table}_released_until" ON ${t} (until)`);
    },
    remember(scope, key, token) {
      // A token released twice is remembered for a day after its last release.
      sql.exec(
        `INSERT INTO ${t} (scope, key, token, until) VALUES (?, ?, ?, ?)
         ON CONFLICT (scope, key, token) DO UPDATE SET until = MAX(until, excluded.until)`,
        scope,
        key,
        token,
        Date.now() + releasedTokenMemoryMs,
      );
      prune(prunedPerRelease);
    },
    has(scope, key, token) {
      return (
        sql.exec(`SELECT 1 FROM ${t} WHERE scope = ? AND key = ? AND token = ?`, scope, key, token).toArray()
          .length > 0
      );
    },
    prune,
  };
}
