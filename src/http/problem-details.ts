/**
 * RFC 9457 problem details: how the middleware answers an idempotency error, and how the client reads
 * one (or a Stripe-style `{ error: { code, message } }` body) back.
 */

import {
  ErrorCode,
  type IdempotencyError,
  OutcomeUnknownError,
  ResultTooLargeError,
} from "../core/errors.js";
import { iso } from "../core/time.js";
import { HttpHeader } from "./idempotency-key-header.js";

/** An RFC 9457 problem, with idempotool's stable `code` as an extension member. */
export interface ProblemDetails {
  /** A URI naming the problem type; `about:blank` when the status says it all. */
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail?: string;
  /** idempotool's error code (`idempotency_key_conflict`, …). */
  readonly code?: string;
  readonly [extension: string]: unknown;
}

export const problemContentType = "application/problem+json";

const statusPhrases: Record<number, string> = {
  400: "Bad Request",
  409: "Conflict",
  413: "Content Too Large",
  422: "Unprocessable Content",
  500: "Internal Server Error",
  503: "Service Unavailable",
};

/** Titles for typed problems (a `problemTypeBase` is configured); RFC 9457 wants the status phrase for about:blank. */
const titles: Partial<Record<ErrorCode, string>> = {
  idempotency_key_missing: "Idempotency-Key is missing",
  idempotency_key_invalid: "Idempotency-Key is malformed",
  idempotency_key_conflict: "Idempotency-Key is already used with a different request",
  idempotency_key_in_use: "A request is outstanding for this Idempotency-Key",
  outcome_unknown: "The outcome of the original request is unknown",
  lease_lost: "The request lost its claim on the Idempotency-Key",
  store_unavailable: "The idempotency store is unavailable",
  store_full: "The idempotency store is full",
  result_too_large: "The original response was too large to keep",
  invalid_options: "The server could not tell whose request this is",
  result_unserializable: "The original response could not be kept",
  result_undecryptable: "The server cannot read its record of the original request",
};

/**
 * The core's size error told in the middleware's terms: the limit is `maxResponseBytes`, and what was not
 * kept is a response.
 */
export function responseTooLarge(error: ResultTooLargeError): ResultTooLargeError {
  const told = new ResultTooLargeError(error.sizeBytes, error.maxBytes, error.record);
  told.message =
    `The response was ${error.sizeBytes} bytes, over the ${error.maxBytes}-byte limit (maxResponseBytes), so it was not kept for replay.` +
    (error.record
      ? ` The request with this Idempotency-Key already completed at ${iso(error.record.updatedAt)}: it will not run again.`
      : "");
  return told;
}

export interface ProblemOptions {
  /** Prefix of the problem `type` URIs (`https://api.example.com/problems/`); the code is appended. */
  readonly problemTypeBase: string | undefined;
  /** The `Retry-After` (seconds) sent with a 409 for a request still in flight. */
  readonly retryAfterSeconds: number;
}

/** The problem+json response for an idempotency error. */
export function problemResponse(error: IdempotencyError, options: ProblemOptions): Response {
  // The core's own status, so an HTTP client and a caller of idempotent() read the same code the same way.
  const status = error.httpStatus;
  const typed = options.problemTypeBase !== undefined;
  const problem: ProblemDetails = {
    type: typed ? `${options.problemTypeBase}${error.code}` : "about:blank",
    title: (typed ? titles[error.code] : undefined) ?? statusPhrases[status] ?? "Error",
    status,
    detail: publicDetail(error),
    code: error.code,
  };
  const headers = new Headers({ "Content-Type": problemContentType, "Cache-Control": "no-store" });
  // The core's retry hint is when the lease would pass, which says nothing of when the request will finish.
  if (error.code === ErrorCode.keyInUse)
    headers.set(HttpHeader.retryAfter, String(options.retryAfterSeconds));
  return new Response(JSON.stringify(problem), { status, headers });
}

/**
 * What a client may read: a store failure's own message can name hosts and drivers, and an unknown
 * outcome's the handler's own error, so they stay inside (the `onEvent` events carry them).
 */
function publicDetail(error: IdempotencyError): string {
  if (error.code === ErrorCode.storeUnavailable || error.code === ErrorCode.storeFull) {
    return "The request was not processed: the idempotency store cannot take it now. Retry later with the same Idempotency-Key.";
  }
  if (error instanceof OutcomeUnknownError) {
    return (
      `The first request with this Idempotency-Key (received at ${iso(error.record.createdAt)}) ` +
      "failed or was cut off before it answered, and may have taken effect. It will not run again under this key " +
      "until the server's operator resolves it: check whether it took effect before you send it again under a new key."
    );
  }
  return error.message;
}

/**
 * The problem a response carries, if its body is JSON: an RFC 9457 problem as is, or a Stripe-style
 * `{ error: { type, code, message } }` turned into one. Reads a clone, so the response stays readable.
 */
export async function readProblem(response: Response): Promise<ProblemDetails | undefined> {
  const contentType = response.headers.get("content-type") ?? "";
  if (!/\bjson\b/i.test(contentType)) return undefined;
  let body: unknown;
  try {
    body = await response.clone().json();
  } catch {
    return undefined;
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) return undefined;
  const record = body as Record<string, unknown>;
  const nested = record.error;
  if (typeof record.code !== "string" && typeof nested === "object" && nested !== null) {
    const error = nested as Record<string, unknown>;
    return {
      type: typeof error.type === "string" ? error.type : "about:blank",
      title: typeof error.type === "string" ? error.type : (statusPhrases[response.status] ?? "Error"),
      status: response.status,
      ...(typeof error.message === "string" ? { detail: error.message } : {}),
      ...(typeof error.code === "string" ? { code: error.code } : {}),
    };
  }
  return {
    ...record,
    type: typeof record.type === "string" ? record.type : "about:blank",
    title: typeof record.title === "string" ? record.title : (statusPhrases[response.status] ?? "Error"),
    status: typeof record.status === "number" ? record.status : response.status,
  };
}
