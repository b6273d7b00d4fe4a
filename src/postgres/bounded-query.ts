import { maxTimerMs, type PgQueryable, type PgQueryConfig } from "./postgres-options.js";

/**
 * Runs one statement and answers its rows, or fails after `timeoutMs` whatever the client does (a pool
 * checkout, for one, can wait forever). A late answer to a statement it gave up on reaches `onLateRows`,
 * so a caller can undo what it gave up on.
 */
export interface BoundedQueries {
  (
    operation: string,
    config: PgQueryConfig,
    onLateRows?: (rows: readonly unknown[]) => void,
  ): Promise<unknown[]>;
  /** What to give pg as `query_timeout`: twice the store's timeout (see boundedQueries). */
  readonly queryTimeoutMs: number;
}

/** A statement in flight, on a list ordered by deadline. */
interface Pending {
  readonly operation: string;
  readonly deadline: number;
  readonly reject: (error: Error) => void;
  timedOut: boolean;
  previous: Pending | undefined;
  next: Pending | undefined;
}

/**
 * Statements on `client`, each failed after `timeoutMs`. pg's own `query_timeout` is set to twice that:
 * it frees a connection whose answer never comes, and until then a late answer still reaches `onLateRows`.
 *
 * Every statement waits the same `timeoutMs`, so deadlines fall in the order statements start: they wait
 * on one list, and one timer, armed for the oldest deadline, serves them all. A statement costs a list
 * entry, not a timer of its own to set and clear.
 */
export function boundedQueries(client: PgQueryable, timeoutMs: number): BoundedQueries {
  let oldest: Pending | undefined;
  let newest: Pending | undefined;
  let timer: NodeJS.Timeout | undefined;
  // Whether the timer keeps the process alive: only while statements are in flight, as their own timers
  // did, so an idle store never holds a process that has finished up.
  let holding = false;

  const unlink = (entry: Pending) => {
    if (entry.previous) entry.previous.next = entry.next;
    else oldest = entry.next;
    if (entry.next) entry.next.previous = entry.previous;
    else newest = entry.previous;
    entry.previous = entry.next = undefined;
    if (oldest === undefined && holding) {
      timer?.unref();
      holding = false;
    }
  };
  const arm = () => {
    if (oldest === undefined) return;
    if (timer === undefined) {
      // At least 1 ms: a timer may fire a fraction early, and then it looks again.
      timer = setTimeout(expire, Math.max(1, Math.ceil(oldest.deadline - performance.now())));
      holding = true;
    } else if (!holding) {
      timer.ref();
      holding = true;
    }
  };
  const expire = () => {
    timer = undefined;
    holding = false;
    const now = performance.now();
    while (oldest !== undefined && oldest.deadline <= now) {
      const entry = oldest;
      unlink(entry);
      entry.timedOut = true;
      entry.reject(
        new Error(
          `postgresStore: ${entry.operation} got no answer within ${timeoutMs} ms (statementTimeoutMs)`,
        ),
      );
    }
    arm();
  };

  const run = (operation: string, config: PgQueryConfig, onLateRows?: (rows: readonly unknown[]) => void) =>
    new Promise<unknown[]>((resolve, reject) => {
      const answer = client.query(config);
      const entry: Pending = {
        operation,
        deadline: performance.now() + timeoutMs,
        reject,
        timedOut: false,
        previous: newest,
        next: undefined,
      };
      if (newest) newest.next = entry;
      else oldest = entry;
      newest = entry;
      arm();
      answer.then(
        (result) => {
          if (entry.timedOut) {
            onLateRows?.(result.rows);
            return;
          }
          unlink(entry);
          resolve(result.rows as unknown[]);
        },
        (error: unknown) => {
          // An abandoned statement that fails later has nobody left to tell.
          if (entry.timedOut) return;
          unlink(entry);
          reject(error as Error);
        },
      );
    });
  return Object.assign(run, { queryTimeoutMs: Math.min(2 * timeoutMs, maxTimerMs) });
}
