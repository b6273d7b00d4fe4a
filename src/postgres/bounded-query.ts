import { maxTimerMs, type PgQueryable, type PgQueryConfig } from "./postgres-options.js";

/**
 * One statement, failed after `timeoutMs` whatever the client does: a pool checkout, for one, can wait
 * forever. pg's own `query_timeout` is set to twice that: it frees a connection whose answer never comes,
 * and until then a late answer still reaches `onLateRows`, so a caller can undo what it gave up on.
 */
export async function boundedQuery(
  client: PgQueryable,
  timeoutMs: number,
  operation: string,
  statement: { readonly text: string; readonly values?: unknown[]; readonly name?: string },
  onLateRows?: (rows: readonly unknown[]) => void,
): Promise<unknown[]> {
  const config: PgQueryConfig = { ...statement, query_timeout: Math.min(2 * timeoutMs, maxTimerMs) };
  const answer = (async () => client.query(config))();
  let timedOut = false;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      timedOut = true;
      reject(
        new Error(`postgresStore: ${operation} got no answer within ${timeoutMs} ms (statementTimeoutMs)`),
      );
    }, timeoutMs);
  });
  answer.then(
    (result) => {
      if (timedOut) onLateRows?.(result.rows);
    },
    // An abandoned query that fails later has nobody left to tell.
    () => {},
  );
  try {
    return (await Promise.race([answer, timeout])).rows as unknown[];
  } finally {
    clearTimeout(timer);
  }
}
