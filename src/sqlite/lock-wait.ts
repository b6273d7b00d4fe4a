/**
 * Waiting for another connection's lock on a SQLite file without blocking the process. Every driver
 * (node:sqlite, bun:sqlite and better-sqlite3) runs every statement synchronously, so SQLite's own busy timeout would hold the event loop for as long
 * as it waits: timers, I/O and the lease renewals of every other call in flight would stop. The store
 * keeps that wait to a few milliseconds per attempt and waits the rest on timers between attempts.
 */
import { setTimeout as sleep } from "node:timers/promises";

/** How long one attempt may block the thread in SQLite's busy handler before it gives the loop back. */
export const busyWaitPerAttemptMs = 2;

const firstRetryDelayMs = 2;
const maxRetryDelayMs = 50;

/** SQLite's primary result codes for a lock held elsewhere; an extended code keeps one in its low byte. */
const SQLITE_BUSY = 5;
const SQLITE_LOCKED = 6;

/**
 * SQLite's own text for those codes (`sqlite3_errmsg`), the only sign Deno's node:sqlite gives: its errors
 * carry `code: "ERR_SQLITE_ERROR"` and no `errcode`.
 */
const lockMessage = /^database (?:table |schema )?is locked(?:$|:)/;

/**
 * Whether `error` says another connection holds a lock (`SQLITE_BUSY`, `SQLITE_LOCKED` and their extended
 * codes): better-sqlite3 and bun:sqlite name the code in `code`, node:sqlite gives its number in `errcode`
 * (on Deno, only SQLite's message). Such a statement did not apply: SQLite rolls back a statement that could
 * not get its lock, and the store's transactions are rolled back whole when any statement in them (or their
 * `COMMIT`) throws. So the same attempt can simply run again.
 */
export function isLockBusy(error: unknown): boolean {
  const { code, errcode, message } = (error ?? {}) as {
    code?: unknown;
    errcode?: unknown;
    message?: unknown;
  };
  if (typeof errcode === "number") {
    const primary = errcode & 0xff;
    return primary === SQLITE_BUSY || primary === SQLITE_LOCKED;
  }
  if (code === "ERR_SQLITE_ERROR") return typeof message === "string" && lockMessage.test(message);
  return typeof code === "string" && /^SQLITE_(?:BUSY|LOCKED)(?:_|$)/.test(code);
}

/** An attempt run as an async operation that waits for another connection's lock (see {@link lockWaiter}). */
export interface WaitForLock {
  <A, R>(attempt: (a: A) => R): (a: A) => Promise<R>;
  <A, B, R>(attempt: (a: A, b: B) => R): (a: A, b: B) => Promise<R>;
}

/**
 * Makes synchronous attempts into operations that, while another connection holds the lock, try again
 * on timers (backoff with jitter) for up to `timeoutMs`, then fail with an error the core turns into
 * `store_unavailable`. The first attempt runs at once and, when it succeeds, costs no timer and no
 * promise beyond the async call itself.
 */
export function lockWaiter(timeoutMs: number): WaitForLock {
  return (<A, B, R>(attempt: (a: A, b: B) => R) =>
    async (a: A, b: B): Promise<R> => {
      try {
        return attempt(a, b);
      } catch (error) {
        if (!isLockBusy(error)) throw error;
        return await retryWhileLocked(attempt, a, b, error, timeoutMs);
      }
    }) as WaitForLock;
}

async function retryWhileLocked<A, B, R>(
  attempt: (a: A, b: B) => R,
  a: A,
  b: B,
  firstError: unknown,
  timeoutMs: number,
): Promise<R> {
  const deadline = performance.now() + timeoutMs;
  let lastError = firstError;
  for (let retry = 1; ; retry++) {
    const remainingMs = deadline - performance.now();
    if (remainingMs <= 0) {
      throw new Error(
        `sqliteStore: another connection held the database's lock for longer than busyTimeoutMs (${timeoutMs} ms)`,
        { cause: lastError },
      );
    }
    await sleep(Math.min(backoffMs(retry), remainingMs));
    try {
      return attempt(a, b);
    } catch (error) {
      if (!isLockBusy(error)) throw error;
      lastError = error;
    }
  }
}

/** The doubled delay, capped, with "equal jitter" (half to all of it): waiters spread out, none spins. */
function backoffMs(retry: number): number {
  const delay = Math.min(maxRetryDelayMs, firstRetryDelayMs * 2 ** Math.min(retry - 1, 10));
  return delay / 2 + (delay / 2) * Math.random();
}
