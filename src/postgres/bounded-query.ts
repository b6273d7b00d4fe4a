import { sameLengthDeadlines } from "../core/deadlines.js";
import { maxTimerMs } from "../core/option-checks.js";
import { cancelStatement, type StatementClient } from "./postgres-clients.js";
import type { PgQueryConfig } from "./postgres-options.js";

/**
 * Runs one statement and answers its rows, or fails after `timeoutMs` whatever the client does (a pool
 * checkout, for one, can wait forever). A late answer to a statement it gave up on reaches `onLateRows`,
 * so a caller can undo what it gave up on. A client that can stop a statement (postgres.js) is asked to.
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

/**
 * Statements on `client`, each failed after `timeoutMs`. pg's own `query_timeout` is set to twice that:
 * it frees a connection whose answer never comes, and until then a late answer still reaches `onLateRows`.
 * The deadlines share one timer (see core/deadlines.ts): a statement costs a list entry, not a timer.
 */
export function boundedQueries(client: StatementClient, timeoutMs: number): BoundedQueries {
  const deadline = sameLengthDeadlines(timeoutMs);
  const run = (operation: string, config: PgQueryConfig, onLateRows?: (rows: readonly unknown[]) => void) =>
    new Promise<unknown[]>((resolve, reject) => {
      const answer = client.query(config);
      const pending = deadline(() => {
        reject(
          new Error(`postgresStore: ${operation} got no answer within ${timeoutMs} ms (statementTimeoutMs)`),
        );
        answer[cancelStatement]?.();
      });
      answer.then(
        (result) => {
          if (pending.clear()) resolve(result.rows as unknown[]);
          else onLateRows?.(result.rows);
        },
        (error: unknown) => {
          // An abandoned statement that fails later has nobody left to tell.
          if (pending.clear()) reject(error as Error);
        },
      );
    });
  return Object.assign(run, { queryTimeoutMs: Math.min(2 * timeoutMs, maxTimerMs) });
}
