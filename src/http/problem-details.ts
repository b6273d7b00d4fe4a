/**
 * RFC 9457 problem details: how the middleware answers an idempotency error, and how the client reads
 * one (or a Stripe-style `{ error: { code, message } }` body) back.
 */
import { ErrorCode, type IdempotencyError } from "../core/errors.js";
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
  result_unserializable: "The original response could not be kept",
};

/**
 * The HTTP status a middleware answers an error with. The core's own statuses, except that a response too
 * large to keep is the server's failure (500), not the client's request being too large (413).
 */
export function problemStatus(error: IdempotencyError): number {
  return error.code === ErrorCode.resultTooLarge ? 500 : error.httpStatus;
}

export interface ProblemOptions {
  /** Prefix of the problem `type` URIs (`https://api.example.com/problems/`); the code is appended. */
  readonly problemTypeBase: string | undefined;
  /** The `Retry-After` (seconds) sent with a 409 for a request still in flight. */
  readonly retryAfterSeconds: number;
}

/** The problem+json response for an idempotency error. */
export function problemResponse(error: IdempotencyError, options: ProblemOptions): Response {
  const status = problemStatus(error);
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

/** What a client may read: a store failure's own message can name hosts and drivers, so it stays inside. */
function publicDetail(error: IdempotencyError): string {
  if (error.code === ErrorCode.storeUnavailable || error.code === ErrorCode.storeFull) {
    return "The request was not processed: the idempotency store cannot take it now. Retry later with the same Idempotency-Key.";
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
