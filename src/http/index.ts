/**
 * `idempotool/http`: the Idempotency-Key protocol on both sides.
 *
 * - Client (OP-1 in docs/operation-models.md): {@link idempotentFetch} sends `Idempotency-Key`, keeps the
 *   same key on every retry, and turns the server's 409/422/400 answers into typed errors;
 *   {@link withIdempotencyKey} hands the key to SDKs that send it themselves (Stripe's `idempotencyKey`
 *   request option).
 * - Server: {@link idempotencyMiddleware} implements draft-ietf-httpapi-idempotency-key-header on
 *   web-standard Request/Response over any idempotency store. Framework adapters live in their own
 *   subpaths, so this entry loads no framework: `idempotool/http/hono`, `/express`, `/fastify`.
 * @module
 */
export {
  formatIdempotencyKey,
  HttpHeader,
  KeyFormat,
  type ParsedIdempotencyKey,
  parseIdempotencyKey,
} from "./idempotency-key-header.js";
export {
  createIdempotencyHandler,
  type IdempotencyHandler,
  type IdempotencyMiddleware,
  idempotencyMiddleware,
  type NextHandler,
  type RequestContext,
} from "./idempotency-middleware.js";
export {
  type FetchFunction,
  type IdempotentFetchInit,
  type IdempotentFetchResult,
  idempotentFetch,
} from "./idempotent-fetch.js";
export { IdempotentFetchError, isIdempotentFetchError } from "./idempotent-fetch-error.js";
export {
  type IdempotencyMiddlewareOptions,
  recordsByDefault,
  type SharedMiddlewareOptions,
} from "./middleware-options.js";
export { type ProblemDetails, problemContentType, readProblem } from "./problem-details.js";
export { parseRetryAfter, type RetryOptions } from "./retry-policy.js";
export type { RouteMatcher } from "./route-pattern.js";
export { defaultReplayHeaders, type StoredResponse } from "./stored-response.js";
export { idempotencyKeyHeader, withIdempotencyKey } from "./with-idempotency-key.js";
