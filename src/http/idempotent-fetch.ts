/**
 * OP-1, the client side: send `Idempotency-Key`, keep the same key on every attempt, retry what is safe to
 * retry, and turn the server's idempotency answers into typed errors.
 */
import { type Clock, systemClock } from "../core/clock.js";
import { ErrorCode } from "../core/errors.js";
import { formatIdempotencyKey, HttpHeader, type KeyFormat } from "./idempotency-key-header.js";
import { IdempotentFetchError } from "./idempotent-fetch-error.js";
import { type ProblemDetails, readProblem } from "./problem-details.js";
import { backoffMs, parseRetryAfter, type RetryOptions, resolveRetry } from "./retry-policy.js";

/** The shape of `fetch` the client calls; the global one, undici's, or a test's. */
export type FetchFunction = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** `fetch`'s init, plus the key and how to retry. */
export interface IdempotentFetchInit extends RequestInit {
  /** Chosen before the first attempt and kept for every retry of this operation. Required. */
  readonly idempotencyKey: string;
  readonly retry?: RetryOptions | undefined;
  /** How the key is written. Default `"bare"`, what Stripe and most APIs expect. */
  readonly keyFormat?: KeyFormat | undefined;
  /** The fetch to call. Default: `globalThis.fetch`, looked up on every call. */
  readonly fetch?: FetchFunction | undefined;
  /** Time and sleep, for tests. Default: the wall clock and real timers. */
  readonly clock?: Clock | undefined;
  /** A number in [0, 1) for the backoff jitter. Default `Math.random`. */
  readonly random?: (() => number) | undefined;
}

/** What {@link idempotentFetch} resolves to. */
export interface IdempotentFetchResult {
  /** The final response, unread. */
  readonly response: Response;
  /** Requests sent, the first one included. */
  readonly attempts: number;
  /** True when the server says it replayed a stored response (`Idempotent-Replayed: true`) instead of running the request. */
  readonly replayed: boolean;
  readonly idempotencyKey: string;
}

type Judgement =
  | { readonly kind: "final" }
  | { readonly kind: "fail"; readonly error: IdempotentFetchError }
  | {
      readonly kind: "retry";
      readonly retryAfterMs: number | undefined;
      readonly inProgress: boolean;
      readonly problem: ProblemDetails | undefined;
    };

const keyErrorCodes = new Set<string>([ErrorCode.keyMissing, ErrorCode.keyInvalid, ErrorCode.keyConflict]);
const unknownOutcomeCodes = new Set<string>([ErrorCode.outcomeUnknown, ErrorCode.leaseLost]);
/** A 5xx with these codes means the request already completed: asking again cannot help. */
const completedCodes = new Set<string>([ErrorCode.resultTooLarge, ErrorCode.resultUnserializable]);

/**
 * `fetch` for a request with a side effect, made safe to retry (OP-1 in docs/operation-models.md). Every
 * attempt carries the same `Idempotency-Key` and the same body bytes. It retries network errors, attempts
 * that time out, 5xx (except 501 and 505) and 409 "request in flight", with exponential backoff and jitter,
 * never sooner than `Retry-After`, within `retry.maxAttempts` and `retry.maxElapsedMs`. Other 4xx are never
 * retried. A 500 `result_undecryptable` (the server cannot read its own record of the key: its keys are
 * wrong, or the record was altered) is a server error like any other, retried: the server runs nothing
 * again for it, and another instance, or the same one once its keys are fixed, may replay the response.
 *
 * It resolves to `{ response, attempts, replayed }` for any other answer (2xx, 3xx, 4xx, a final 5xx:
 * check `response.ok` as with `fetch`), and rejects with an {@link IdempotentFetchError} when the server
 * answers about the key: 422 (`idempotency_key_conflict`: the key was used for another request), 400 about
 * the key (`idempotency_key_missing` or `_invalid`), 409 `outcome_unknown`, a request still in flight after
 * every retry (`idempotency_key_in_use`), a record the server still cannot read after every retry
 * (`result_undecryptable`: it may have taken effect), or when no attempt got an answer (`outcome_unknown`: the server
 * may have acted; retry later with the same key). A missing key throws `idempotency_key_missing` before
 * anything is sent; the caller's `signal` aborts at once, without a retry.
 *
 * @example
 * import { idempotentFetch } from "idempotool/http";
 *
 * const key = "checkout-7f3a"; // from the agent's state, saved before the first attempt
 * const { response, attempts, replayed } = await idempotentFetch("https://api.example.com/payments", {
 *   method: "POST",
 *   headers: { "Content-Type": "application/json" },
 *   body: JSON.stringify({ amount: 1200, currency: "eur" }),
 *   idempotencyKey: key,
 *   retry: { maxAttempts: 5, maxElapsedMs: 60_000 },
 * });
 * if (replayed) console.log(`the server had already done it; ${attempts} attempts`);
 */
export async function idempotentFetch(
  input: string | URL | Request,
  init: IdempotentFetchInit,
): Promise<IdempotentFetchResult> {
  const {
    idempotencyKey,
    retry,
    keyFormat,
    fetch: fetchOption,
    clock: clockOption,
    random: randomOption,
    ...requestInit
  } = init ?? ({} as Partial<IdempotentFetchInit>);
  const headerValue = formatIdempotencyKey(idempotencyKey, keyFormat);
  const key = idempotencyKey as string;
  const policy = resolveRetry(retry);
  const clock = clockOption ?? systemClock;
  const random = randomOption ?? Math.random;
  const fetchFn = fetchOption ?? ((url, options) => globalThis.fetch(url, options));
  const callerSignal = requestInit.signal ?? (input instanceof Request ? input.signal : undefined);
  callerSignal?.throwIfAborted();

  // Serialized once, so every attempt sends the same bytes: a FormData boundary is drawn only once, and a
  // stream body (which can be read only once) is kept for the retries.
  const template = new Request(input, requestInit);
  const body = template.body === null ? undefined : new Uint8Array(await template.arrayBuffer());
  const headers = new Headers(template.headers);
  headers.set(HttpHeader.idempotencyKey, headerValue);
  const attemptInit: RequestInit = {
    ...requestInit,
    method: template.method,
    headers,
    redirect: template.redirect,
    ...(body === undefined ? {} : { body }),
  };

  const startedAt = clock.now();
  for (let attempts = 1; ; attempts++) {
    const elapsedMs = clock.now() - startedAt;
    const timeoutMs =
      policy.timeoutMs === 0 ? 0 : Math.max(1, Math.min(policy.timeoutMs, policy.maxElapsedMs - elapsedMs));
    const outcome = await attempt(fetchFn, template.url, attemptInit, callerSignal, timeoutMs, clock);

    let retryAfterMs: number | undefined;
    let giveUp: () => IdempotentFetchResult | IdempotentFetchError;
    if ("error" in outcome) {
      callerSignal?.throwIfAborted();
      giveUp = () =>
        new IdempotentFetchError(
          ErrorCode.outcomeUnknown,
          `No response after ${attempts} attempt${attempts === 1 ? "" : "s"} (${describe(outcome.error)}). ` +
            "The server may or may not have processed the request: retry later with the same idempotency key, " +
            "never with a new one.",
          { attempts, idempotencyKey: key, cause: outcome.error },
        );
    } else {
      const response = outcome.response;
      const judgement = await judge(response, attempts, key, clock.now());
      if (judgement.kind === "final") return result(response, attempts, key);
      if (judgement.kind === "fail") throw judgement.error;
      const { inProgress, problem } = judgement;
      retryAfterMs = judgement.retryAfterMs;
      giveUp = () =>
        inProgress
          ? new IdempotentFetchError(
              ErrorCode.keyInUse,
              `The server was still processing the first request with idempotency key "${key}" after ${attempts} attempts. ` +
                "Retry later with the same key and the same request.",
              { attempts, idempotencyKey: key, response, retryAfterMs, problem },
            )
          : problem?.code === ErrorCode.resultUndecryptable
            ? new IdempotentFetchError(
                ErrorCode.resultUndecryptable,
                `The server cannot read its own record of the request with idempotency key "${key}" ` +
                  `after ${attempts} attempts: it may have taken effect. Retry later with the same key and the ` +
                  "same request, never with a new key.",
                { attempts, idempotencyKey: key, response, problem },
              )
            : result(response, attempts, key);
    }

    const delayMs = Math.max(retryAfterMs ?? 0, backoffMs(policy, attempts, random));
    const outOfTime = clock.now() - startedAt + delayMs >= policy.maxElapsedMs;
    if (attempts >= policy.maxAttempts || outOfTime) {
      const last = giveUp();
      if (last instanceof IdempotentFetchError) throw last;
      return last;
    }
    if ("response" in outcome) await discard(outcome.response);
    await clock.sleep(delayMs, callerSignal);
  }
}

async function attempt(
  fetchFn: FetchFunction,
  url: string,
  init: RequestInit,
  callerSignal: AbortSignal | undefined,
  timeoutMs: number,
  clock: Clock,
): Promise<{ readonly response: Response } | { readonly error: unknown }> {
  const controller = new AbortController();
  // Left linked after the headers arrive, so the caller can still abort reading the body.
  const onCallerAbort = () => controller.abort(callerSignal?.reason);
  callerSignal?.addEventListener("abort", onCallerAbort, { once: true });
  const timer = new AbortController();
  if (timeoutMs > 0) {
    void clock.sleep(timeoutMs, timer.signal).then(
      () => controller.abort(new DOMException(`no response within ${timeoutMs} ms`, "TimeoutError")),
      () => undefined,
    );
  }
  try {
    return { response: await fetchFn(url, { ...init, signal: controller.signal }) };
  } catch (error) {
    callerSignal?.removeEventListener("abort", onCallerAbort);
    return { error };
  } finally {
    timer.abort();
  }
}

/** What a response means for the retry loop. */
async function judge(response: Response, attempts: number, key: string, now: number): Promise<Judgement> {
  const status = response.status;
  if (status === 409) {
    const problem = await readProblem(response);
    const code = problem?.code;
    if (code !== undefined && unknownOutcomeCodes.has(code)) {
      return fail(code as ErrorCode, response, problem, attempts, key);
    }
    // A 409 from a server that did not say why, but asked to come back, is taken as "still in flight".
    if (code === ErrorCode.keyInUse || (code === undefined && response.headers.has(HttpHeader.retryAfter))) {
      return retryAfter(response, now, true, problem);
    }
    return { kind: "final" };
  }
  if (status === 422)
    return fail(ErrorCode.keyConflict, response, await readProblem(response), attempts, key);
  if (status === 400) {
    const problem = await readProblem(response);
    const code = problem?.code;
    if (code !== undefined && keyErrorCodes.has(code))
      return fail(code as ErrorCode, response, problem, attempts, key);
    if (problem && /idempotency/i.test(JSON.stringify(problem))) {
      const missing = /missing|required/i.test(`${problem.title} ${problem.detail ?? ""}`);
      return fail(missing ? ErrorCode.keyMissing : ErrorCode.keyInvalid, response, problem, attempts, key);
    }
    return { kind: "final" };
  }
  if (status >= 500 && status !== 501 && status !== 505) {
    const problem = await readProblem(response);
    if (problem?.code !== undefined && completedCodes.has(problem.code)) return { kind: "final" };
    return retryAfter(response, now, false, problem);
  }
  return { kind: "final" };
}

function retryAfter(
  response: Response,
  now: number,
  inProgress: boolean,
  problem: ProblemDetails | undefined,
): Judgement {
  const retryAfterMs = parseRetryAfter(response.headers.get(HttpHeader.retryAfter), now);
  return { kind: "retry", retryAfterMs, inProgress, problem };
}

function fail(
  code: ErrorCode,
  response: Response,
  problem: ProblemDetails | undefined,
  attempts: number,
  key: string,
): Judgement {
  const said = problem?.detail ?? problem?.title;
  const what: Partial<Record<ErrorCode, string>> = {
    idempotency_key_conflict:
      `Idempotency key "${key}" was already used for a different request. ` +
      "A key names one operation: use a new key for a new intent, never to get past this error.",
    idempotency_key_missing: "The server did not see an Idempotency-Key header (a proxy may drop it).",
    idempotency_key_invalid: `The server rejected idempotency key "${key}".`,
    outcome_unknown: `The server does not know whether the first request with idempotency key "${key}" took effect.`,
    lease_lost: `The server lost track of the request with idempotency key "${key}" while it ran.`,
  };
  const message = `${what[code] ?? code} (HTTP ${response.status}${said ? `: ${said}` : ""})`;
  return {
    kind: "fail",
    error: new IdempotentFetchError(code, message, { attempts, idempotencyKey: key, response, problem }),
  };
}

function result(response: Response, attempts: number, idempotencyKey: string): IdempotentFetchResult {
  const replayed = response.headers.get(HttpHeader.idempotentReplayed)?.trim().toLowerCase();
  return { response, attempts, replayed: replayed === "true" || replayed === "?1", idempotencyKey };
}

/** Free the connection of a response we will not read. */
async function discard(response: Response): Promise<void> {
  try {
    await response.body?.cancel();
  } catch {
    // Nothing left to free.
  }
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
    return `${error.name}: ${error.message}${cause}`;
  }
  return String(error);
}
