/**
 * Options of the server middleware, resolved and checked once, at configuration time.
 */
import {
  durationOption,
  invalidOption,
  invalidOptionFor,
  maxTimerMs,
  maxTtlMs,
  sizeOption,
} from "../core/option-checks.js";
import { Effect, type RecordOptions } from "../core/options.js";
import { redactionPaths, resolveCodec } from "../core/result-codec.js";
import { compileRoutes, type RouteMatcher } from "./route-pattern.js";
import { defaultReplayHeaders, neverReplayedHeaders } from "./stored-response.js";

const owner = "idempotencyMiddleware()";

/**
 * Options every flavour of the middleware shares; the adapters differ only in how `scope` sees the request.
 * The record options are those of `idempotent()` ({@link RecordOptions}), a response being the result.
 */
export interface SharedMiddlewareOptions
  extends Pick<
    RecordOptions<unknown, unknown>,
    "store" | "ttlMs" | "leaseMs" | "encryption" | "fingerprintKeys" | "clock" | "onEvent"
  > {
  /** Methods that are guarded. Default `["POST", "PATCH"]`. */
  readonly methods?: readonly string[] | undefined;
  /** Paths that are guarded (`["/payments", "/orders/:id"]`), or a predicate. Default: every path. */
  readonly routes?: RouteMatcher | undefined;
  /**
   * Whether a guarded request without `Idempotency-Key` is refused with 400 (`true`, the default) or
   * passed through unguarded (`false`).
   */
  readonly required?: boolean | undefined;
  /**
   * Whether a response is recorded (and replayed to every repeat). Default {@link recordsByDefault}:
   * everything but 5xx and the 4xx that mean the request was refused before it did anything. An unrecorded
   * 4xx releases the key (a repeat runs the handler again); an unrecorded 5xx is a failure, which `effect`
   * judges: released under `owned-store` and `native-key`, an unknown outcome otherwise.
   */
  readonly record?: ((status: number, request: Request) => boolean) | undefined;
  /**
   * Response headers a replay carries (case-insensitive). Default {@link defaultReplayHeaders}.
   * `Set-Cookie`, credentials and framing headers are refused here: they are never stored.
   */
  readonly replayHeaders?: readonly string[] | undefined;
  // `effect`, `waitMs` and `redact` are declared here, not picked: for a request, what a throw means, the
  // default wait and what can be redacted differ from `idempotent()`'s.
  /**
   * What it means when the handler throws, answers 5xx or its worker dies before it answers. Default
   * `"irreversible"`, as for `idempotent()`: the handler may have acted (sent the email), so that request
   * and every repeat get 409 `outcome_unknown` and it never runs again under its key. `"owned-store"`
   * (its writes are one transaction in your database) and `"native-key"` (it passes the key to an API
   * that dedupes) release the key instead, and a retry runs the handler again. See docs/http.md.
   */
  readonly effect?: Effect | undefined;
  /**
   * How long a repeat waits for the first request to finish before answering 409, in whole ms from 0 to
   * 2^31 − 1. Default 0: answer at once, as the draft describes, with `Retry-After`.
   */
  readonly waitMs?: number | undefined;
  /** The `Retry-After` (whole seconds, 0 to 2 147 483) on a 409 for a request in flight. Default 1. */
  readonly retryAfterSeconds?: number | undefined;
  /** The largest response body kept for replay (bytes, a whole number ≥ 1). Default 1 MiB. */
  readonly maxResponseBytes?: number | undefined;
  /**
   * Fields of a JSON response body never stored: dotted paths (`["card.number", "token"]`), stored as
   * `"[redacted]"`. The first caller gets the full response; every replay gets the redacted body
   * (re-serialized). Bodies that are not JSON are stored as they are: encrypt them.
   * See docs/results-at-rest.md.
   */
  readonly redact?: readonly string[] | undefined;
  /**
   * Prefix of problem `type` URIs, e.g. `https://api.example.com/problems/` (the code is appended).
   * Default: `about:blank`, with the status phrase as title.
   */
  readonly problemTypeBase?: string | undefined;
  /** The tool name kept in each record. Default `"http"`. */
  readonly name?: string | undefined;
}

/** Options of the web-standard {@link idempotencyMiddleware}. */
export interface IdempotencyMiddlewareOptions extends SharedMiddlewareOptions {
  /**
   * The authenticated principal of the request (user, API key id, tenant): the namespace its keys live in,
   * so one client can never replay another's response. Required; run authentication before the middleware,
   * and read what it verified, never a header the client chooses. A request for which it gives no
   * principal (undefined, an empty string, `"undefined"`) is refused with 500 before the handler runs.
   */
  readonly scope: (request: Request) => string | undefined | Promise<string | undefined>;
}

export interface ResolvedMiddlewareOptions {
  readonly methods: ReadonlySet<string>;
  readonly routes: (request: Request) => boolean;
  readonly required: boolean;
  readonly record: (status: number, request: Request) => boolean;
  readonly replayHeaders: ReadonlySet<string>;
  readonly retryAfterSeconds: number;
  readonly problemTypeBase: string | undefined;
  /** `redact`, each path split into its segments. */
  readonly redact: readonly (readonly string[])[];
}

/**
 * Statuses that say the request was refused before it did anything (malformed, unauthenticated,
 * forbidden, no such resource or method, too large, unsupported, invalid, rate limited): by default they
 * release the key, so the corrected retry runs.
 */
const refusedStatuses: ReadonlySet<number> = new Set([
  400, 401, 403, 404, 405, 406, 408, 411, 413, 414, 415, 416, 417, 421, 422, 426, 428, 429, 431,
]);

/**
 * The default `record`: 1xx–3xx, and the 4xx that are an outcome (402 payment declined, 409 business
 * conflict, 410 gone, …) are recorded; 5xx and the 4xx that refused the request are not.
 * @example
 * recordsByDefault(201); // true
 * recordsByDefault(402); // true
 * recordsByDefault(422); // false
 * recordsByDefault(503); // false
 */
export function recordsByDefault(status: number): boolean {
  if (status >= 500) return false;
  return !refusedStatuses.has(status);
}

export function resolveMiddlewareOptions(options: SharedMiddlewareOptions): ResolvedMiddlewareOptions {
  if (typeof options !== "object" || options === null) invalidOption(owner, "options", "must be an object");
  const methods = options.methods ?? ["POST", "PATCH"];
  if (
    !Array.isArray(methods) ||
    methods.length === 0 ||
    methods.some((m) => typeof m !== "string" || m === "")
  ) {
    invalidOption(owner, "methods", "must be a non-empty array of method names");
  }
  if (options.required !== undefined && typeof options.required !== "boolean") {
    invalidOption(owner, "required", "must be a boolean");
  }
  if (options.record !== undefined && typeof options.record !== "function")
    invalidOption(owner, "record", "must be a function");
  const replayHeaders = options.replayHeaders ?? defaultReplayHeaders;
  if (!Array.isArray(replayHeaders) || replayHeaders.some((h) => typeof h !== "string" || h === "")) {
    invalidOption(owner, "replayHeaders", "must be an array of header names");
  }
  const refused = replayHeaders.filter((h) => neverReplayedHeaders.has(h.toLowerCase()));
  if (refused.length > 0) {
    invalidOption(
      owner,
      "replayHeaders",
      `must not name ${refused.join(", ")}: cookies, credentials and framing headers are never stored`,
    );
  }
  // Checked here too, though the core checks them again, so an error names the middleware's option.
  durationOption(owner, "ttlMs", options.ttlMs, undefined, { max: maxTtlMs });
  durationOption(owner, "leaseMs", options.leaseMs);
  durationOption(owner, "waitMs", options.waitMs, undefined, { min: 0 });
  sizeOption(owner, "maxResponseBytes", options.maxResponseBytes);
  const retryAfterSeconds = sizeOption(owner, "retryAfterSeconds", options.retryAfterSeconds, 1, {
    min: 0,
    max: Math.floor(maxTimerMs / 1000),
  });
  if (options.problemTypeBase !== undefined && typeof options.problemTypeBase !== "string") {
    invalidOption(owner, "problemTypeBase", "must be a string");
  }
  if (options.effect !== undefined && !Object.values(Effect).includes(options.effect)) {
    invalidOption(owner, "effect", `must be one of ${Object.values(Effect).join(", ")}`);
  }
  // Checked here to name this function; the core tool resolves them again.
  resolveCodec(undefined, options.encryption, invalidOptionFor(owner), options.fingerprintKeys);
  return {
    methods: new Set(methods.map((m) => m.toUpperCase())),
    routes: compileRoutes(options.routes, "routes"),
    required: options.required ?? true,
    record: options.record ?? recordsByDefault,
    replayHeaders: new Set(replayHeaders.map((h) => h.toLowerCase())),
    retryAfterSeconds,
    problemTypeBase: options.problemTypeBase,
    redact: redactionPaths(options.redact, invalidOptionFor(owner)),
  };
}

/** The `scope` option of every flavour, checked when the middleware is made: it has no default. */
export function scopeOption<F extends (...args: never[]) => unknown>(scope: F): F {
  if (typeof scope !== "function") {
    invalidOption(
      owner,
      "scope",
      "must be a function returning the request's authenticated principal, so one client can never replay another's response",
    );
  }
  return scope;
}
