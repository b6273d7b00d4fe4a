import { type ErrorCode, IdempotencyError } from "../core/errors.js";
import type { ProblemDetails } from "./problem-details.js";

/**
 * An idempotency answer from the server (a conflict, a malformed or missing key, a request still in flight
 * after every retry, an unknown outcome), or no answer at all after every retry. Branch on `code`; the
 * server's response and problem details ride along.
 */
export class IdempotentFetchError extends IdempotencyError {
  override name = "IdempotentFetchError";
  /** Requests sent, the first one included. */
  readonly attempts: number;
  /** The idempotency key every attempt carried. */
  readonly idempotencyKey: string;
  /** The last response, unread (absent when no attempt got one). */
  readonly response: Response | undefined;
  /** The status of the last response, if any. */
  readonly status: number | undefined;
  /** The problem details the last response carried, if its body was JSON. */
  readonly problem: ProblemDetails | undefined;
  /** For `idempotency_key_in_use`: the server's `Retry-After`, in ms. */
  readonly retryAfterMs: number | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    details: {
      readonly attempts: number;
      readonly idempotencyKey: string;
      readonly response?: Response | undefined;
      readonly problem?: ProblemDetails | undefined;
      readonly retryAfterMs?: number | undefined;
      readonly cause?: unknown;
    },
  ) {
    super(code, message, "cause" in details ? { cause: details.cause } : undefined);
    this.attempts = details.attempts;
    this.idempotencyKey = details.idempotencyKey;
    this.response = details.response;
    this.status = details.response?.status;
    this.problem = details.problem;
    this.retryAfterMs = details.retryAfterMs;
  }
}

/**
 * Whether `value` is an {@link IdempotentFetchError}, optionally of one code.
 * @example
 * try {
 *   await idempotentFetch("https://api.example.com/payments", { method: "POST", idempotencyKey: key, body });
 * } catch (error) {
 *   if (isIdempotentFetchError(error, "idempotency_key_conflict")) console.error(error.problem?.detail);
 * }
 */
export function isIdempotentFetchError(value: unknown, code?: ErrorCode): value is IdempotentFetchError {
  return value instanceof IdempotentFetchError && (code === undefined || value.code === code);
}
