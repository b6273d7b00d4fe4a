/**
 * When {@link idempotentFetch} tries again: exponential backoff with jitter, bounded in attempts and in
 * total time, and never sooner than the server's `Retry-After`.
 */
import { durationOption, invalidOption, sizeOption } from "../core/option-checks.js";

/** Retry bounds of {@link idempotentFetch} (and of the MCP client wrappers, with their own defaults). All times in whole milliseconds, from 0 to 2^31 − 1 (what a timer holds). */
export interface RetryOptions {
  /** Attempts in all (a whole number ≥ 1), the first one included; 1 never retries. Default 4. */
  readonly maxAttempts?: number | undefined;
  /** No retry starts later than this after the first attempt began, and no wait runs past it. Default 30 000. */
  readonly maxElapsedMs?: number | undefined;
  /** The first backoff; each retry doubles it. Default 200. */
  readonly initialDelayMs?: number | undefined;
  /** The longest one backoff can be (a longer `Retry-After` is still honoured). Default 5 000. */
  readonly maxDelayMs?: number | undefined;
  /** How long one attempt may wait for the response headers before it is abandoned and retried; 0 for no limit. Default 10 000. */
  readonly timeoutMs?: number | undefined;
}

export interface RetryPolicy {
  readonly maxAttempts: number;
  readonly maxElapsedMs: number;
  readonly initialDelayMs: number;
  readonly maxDelayMs: number;
  readonly timeoutMs: number;
}

export const retryDefaults: RetryPolicy = {
  maxAttempts: 4,
  maxElapsedMs: 30_000,
  initialDelayMs: 200,
  maxDelayMs: 5_000,
  timeoutMs: 10_000,
};

/** The `retry` option, checked: each bound a whole number in range, or its default. Errors name `owner`. */
export function resolveRetry(
  options: RetryOptions | undefined,
  owner = "idempotentFetch()",
  defaults: RetryPolicy = retryDefaults,
): RetryPolicy {
  if (options === undefined) return defaults;
  if (typeof options !== "object" || options === null) invalidOption(owner, "retry", "must be an object");
  const delay = (name: string, value: number | undefined, fallback: number) =>
    // Every delay here ends up in a timer, so it is bounded by what a timer holds.
    durationOption(owner, name, value, fallback, { min: 0 });
  return {
    maxAttempts: sizeOption(owner, "retry.maxAttempts", options.maxAttempts, defaults.maxAttempts),
    maxElapsedMs: delay("retry.maxElapsedMs", options.maxElapsedMs, defaults.maxElapsedMs),
    initialDelayMs: delay("retry.initialDelayMs", options.initialDelayMs, defaults.initialDelayMs),
    maxDelayMs: delay("retry.maxDelayMs", options.maxDelayMs, defaults.maxDelayMs),
    timeoutMs: delay("retry.timeoutMs", options.timeoutMs, defaults.timeoutMs),
  };
}

/**
 * The backoff before retry number `retry` (1 for the first retry): the doubled delay, capped, with
 * "equal jitter" (between half and all of it), so a crowd of clients spreads out but none retries at once.
 */
export function backoffMs(policy: RetryPolicy, retry: number, random: () => number): number {
  const exponential = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** Math.min(retry - 1, 30));
  const r = Math.min(Math.max(random(), 0), 1);
  return Math.round(exponential / 2 + (exponential / 2) * r);
}

/**
 * A `Retry-After` value in milliseconds from `now`: delay-seconds or an HTTP date. Undefined when absent
 * or unreadable; never negative.
 * @example
 * parseRetryAfter("3", Date.now()); // 3000
 * parseRetryAfter("Wed, 21 Oct 2026 07:28:00 GMT", Date.parse("2026-10-21T07:27:58Z")); // 2000
 */
export function parseRetryAfter(value: string | null, now: number): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // Only an HTTP date (it names a weekday or a month); Date.parse would read "12" or "1.5" as a year.
  if (!/[A-Za-z]/.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
