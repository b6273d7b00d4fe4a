/**
 * The retry loop both MCP client wrappers share: one key for every attempt, bounded attempts with
 * backoff, and an answer the model can read when no attempt got one.
 */
import { type Clock, systemClock } from "../core/clock.js";
import { ErrorCode } from "../core/errors.js";
import { invalidOption } from "../core/option-checks.js";
import { backoffMs, type RetryOptions, type RetryPolicy, resolveRetry } from "../http/retry-policy.js";
import type { ToolResult } from "../mcp/mcp-types.js";

/** The `_meta` key of the error info on a result (the one an `idempotool/mcp` server writes too). */
export const errorMetaKey = "idempotool/error";

/**
 * The `_meta` field the key is sent in. An `idempotool/mcp` server and `idempotool proxy` read it
 * (and `idempotencyKey`) by default.
 */
export const defaultMetaField = "idempotency_key";

/** The argument a tool listing `idempotency_key` takes its key in. */
export const keyArgument = "idempotency_key";

/** Options both wrappers take. */
export interface RetryCallOptions {
  /**
   * Bounds of the retries of one call. Defaults: 1 attempt (no retry), 60 s per attempt (the MCP SDK's own
   * request timeout), backoff from 200 ms doubling to 5 s, no retry starting later than 5 minutes after the
   * first. Set `maxAttempts` above 1 only for servers that deduplicate by the key in `_meta`
   * (`registerIdempotentTool`, `idempotool proxy`, or a server that says so): any other server runs the
   * tool again when an attempt whose reply was lost is retried.
   */
  readonly retry?: RetryOptions | undefined;
  /** The `_meta` field the key goes in. Default `"idempotency_key"`. */
  readonly metaField?: string | undefined;
  /**
   * Makes the key of a call that brings none (no `idempotency_key` argument, no key given by the
   * caller): once per logical call, before its first attempt. Default `crypto.randomUUID()`.
   */
  readonly newKey?: (() => string) | undefined;
  /** Time and sleep, for tests. Default: the wall clock and real timers. */
  readonly clock?: Clock | undefined;
  /** A number in [0, 1) for the backoff jitter. Default `Math.random`. */
  readonly random?: (() => number) | undefined;
}

// One attempt unless told: retrying is safe only against a server that deduplicates by the key.
export const mcpRetryDefaults: RetryPolicy = {
  maxAttempts: 1,
  maxElapsedMs: 300_000,
  initialDelayMs: 200,
  maxDelayMs: 5_000,
  timeoutMs: 60_000,
};

/** The options, checked once, when the wrapper is made. */
export interface ResolvedRetryCall {
  readonly policy: RetryPolicy;
  readonly metaField: string;
  readonly newKey: () => string;
  readonly clock: Clock;
  readonly random: () => number;
}

export function resolveRetryCall(owner: string, options: RetryCallOptions | undefined): ResolvedRetryCall {
  const given = options ?? {};
  if (typeof given !== "object" || given === null) invalidOption(owner, "options", "must be an object");
  const metaField = given.metaField ?? defaultMetaField;
  if (typeof metaField !== "string" || metaField.length === 0) {
    invalidOption(owner, "metaField", "must be a non-empty string");
  }
  if (given.newKey !== undefined && typeof given.newKey !== "function") {
    invalidOption(owner, "newKey", "must be a function returning a string");
  }
  return {
    policy: resolveRetry(given.retry, owner, mcpRetryDefaults),
    metaField,
    newKey: given.newKey ?? (() => crypto.randomUUID()),
    clock: given.clock ?? systemClock,
    random: given.random ?? Math.random,
  };
}

/** How an attempt that threw ended: an answer (passed on as it is), or none (retried). */
export type Judged = "answer" | "no_answer" | "connection_lost";

/** What one logical call ended with. */
export type CallOutcome<T> =
  | { readonly answered: true; readonly value: T; readonly attempts: number }
  | { readonly answered: false; readonly lastError: unknown; readonly attempts: number };

/**
 * Run `attempt` until it resolves or throws an answer, retrying what `judge` calls no answer within the
 * policy's bounds, with backoff. A throw after the caller's `signal` aborted goes to the caller at once.
 * Before a retry after `connection_lost`, `reconnect` runs (a throw there counts as one more failed attempt,
 * whatever it says). An answer that is an error after an attempt that got none ends the call as unanswered:
 * the first attempt may have run.
 */
export async function retryCall<T>(
  config: ResolvedRetryCall,
  attempt: (timeoutMs: number) => Promise<T>,
  judge: (error: unknown) => Judged,
  signal: AbortSignal | undefined,
  reconnect?: (() => Promise<void>) | undefined,
): Promise<CallOutcome<T>> {
  const { policy, clock } = config;
  const startedAt = clock.now();
  let reconnectFirst = false;
  // Once an attempt went unanswered, the call may have run: a later attempt's error cannot say it did not.
  let unanswered = false;
  for (let attempts = 1; ; attempts++) {
    signal?.throwIfAborted();
    const elapsedMs = clock.now() - startedAt;
    const timeoutMs =
      policy.timeoutMs === 0 ? 0 : Math.max(1, Math.min(policy.timeoutMs, policy.maxElapsedMs - elapsedMs));
    let lastError: unknown;
    try {
      if (reconnectFirst && reconnect) await reconnect();
      reconnectFirst = false;
    } catch (error) {
      // The connection is still gone: this attempt is spent reconnecting, whatever the error says.
      if (signal?.aborted) throw error;
      lastError = error;
    }
    if (!reconnectFirst) {
      try {
        return { answered: true, value: await attempt(timeoutMs), attempts };
      } catch (error) {
        if (signal?.aborted) throw error;
        const judged = judge(error);
        if (judged === "answer" && !unanswered) throw error;
        if (judged === "answer") return { answered: false, lastError: error, attempts };
        unanswered = true;
        reconnectFirst = judged === "connection_lost";
        lastError = error;
      }
    }
    const delayMs = backoffMs(policy, attempts, config.random);
    const outOfTime = clock.now() - startedAt + delayMs >= policy.maxElapsedMs;
    if (attempts >= policy.maxAttempts || outOfTime) return { answered: false, lastError, attempts };
    await clock.sleep(delayMs, signal);
  }
}

/**
 * What the model reads when no attempt of a call got an answer: the action may or may not have happened,
 * the key it ran under, and that only a retry under that same key is safe. `_meta["idempotool/error"]`
 * carries `outcome_unknown`, as an `idempotool/mcp` server's unknown outcome does.
 */
export function unknownOutcomeResult(
  tool: string,
  key: string,
  attempts: number,
  lastError: unknown,
): ToolResult {
  const k = JSON.stringify(key);
  const text =
    `Outcome unknown: no answer came from the server for this call of ${tool} (idempotency_key ${k}) after ` +
    `${attempts} attempt${attempts === 1 ? "" : "s"} (last: ${describe(lastError)}), so the action may or may ` +
    "not have happened. Do not call it again under a new key: that could do it twice. To try again, retry with " +
    `idempotency_key ${k} and the same arguments; if the action already happened, the server answers with its ` +
    "original result instead of running it again. If you cannot, tell the user it may or may not have happened " +
    "and needs checking.";
  return {
    content: [{ type: "text", text }],
    isError: true,
    _meta: {
      [errorMetaKey]: { code: ErrorCode.outcomeUnknown, idempotency_key: key, was_replay: false, attempts },
    },
  };
}

/** The key a call carries in its arguments, if it carries one. */
export function argumentKey(args: unknown): string | undefined {
  if (typeof args !== "object" || args === null) return undefined;
  const value = (args as Record<string, unknown>)[keyArgument];
  return typeof value === "string" ? value : undefined;
}

function describe(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}
