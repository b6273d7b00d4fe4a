/**
 * The server side of draft-ietf-httpapi-idempotency-key-header on web-standard Request/Response: the
 * first request with a key runs, its response is recorded, and every repeat gets that response again.
 * The framework adapters (Hono, Express, Fastify) are thin shells around {@link createIdempotencyHandler}.
 */
import { ErrorCode, IdempotencyError, ResultTooLargeError } from "../core/errors.js";
import type { IdempotencyEvent } from "../core/events.js";
import { type IdempotentTool, idempotent } from "../core/idempotent.js";
import { Effect } from "../core/options.js";
import { notExecuted } from "../core/outcomes.js";
import { HttpHeader, parseIdempotencyKey } from "./idempotency-key-header.js";
import {
  type IdempotencyMiddlewareOptions,
  type ResolvedMiddlewareOptions,
  resolveMiddlewareOptions,
  type SharedMiddlewareOptions,
  scopeOption,
} from "./middleware-options.js";
import { problemResponse, responseTooLarge } from "./problem-details.js";
import { type RequestPrint, requestPrint } from "./request-fingerprint.js";
import { rebuildResponse, replayResponse, type StoredResponse, storeResponse } from "./stored-response.js";

/** Runs the rest of the chain (the route handler) for a request and gives back its response. */
export type NextHandler = (request: Request) => Promise<Response>;

/** The web-standard middleware: answer `request` itself, or through `next`. */
export type IdempotencyMiddleware = (request: Request, next: NextHandler) => Promise<Response>;

/** What an adapter knows of one request that the web-standard Request does not carry. */
export interface RequestContext {
  /**
   * The request's principal, read from the framework's request (where authentication left it); anything
   * but 1–255 characters (undefined, empty, `"undefined"`) refuses the request before the handler runs.
   */
  readonly scope: () => string | undefined | Promise<string | undefined>;
  /** The body a framework already parsed (see {@link requestPrint}); omit to read the Request's own body. */
  readonly body?: () => unknown;
}

/** The core of every flavour of the middleware. */
export interface IdempotencyHandler {
  (request: Request, next: NextHandler, context: RequestContext): Promise<Response>;
  /**
   * Whether the middleware takes `request` in hand (its method and route are guarded, and it carries a key
   * or one is required). Adapters pass other requests straight on, unbuffered.
   */
  guards(request: Request): boolean;
}

/** One guarded request, as the core's tool sees it; only `print` is fingerprinted. */
interface HttpCall {
  readonly print: RequestPrint;
  readonly request: Request;
  readonly next: NextHandler;
  /** The handler's full response (cookies included) for the caller that ran it; never stored. */
  live: Response | undefined;
}

/**
 * Thrown through the core when a response is not recorded: as "not executed" it releases the key (the
 * response is the caller's); as a plain throw, the effect class decides, as for a handler that threw.
 */
class UnrecordedResponse extends Error {
  override name = "UnrecordedResponse";
  constructor(readonly response: Response) {
    super(`the handler answered ${response.status}, which is not recorded`);
  }
}

/** The effect classes under which a failed handler certainly did nothing, so a retry may run it. */
const retryableEffects: ReadonlySet<Effect> = new Set([Effect.nativeKey, Effect.ownedStore]);

/**
 * The Idempotency-Key middleware on web-standard Request/Response (Deno, Bun, Cloudflare Workers, or any
 * framework that hands you a Request), following draft-ietf-httpapi-idempotency-key-header:
 *
 * - a guarded request (`methods`, `routes`) without the header gets 400 (unless `required: false`), with
 *   a malformed one 400; the key is an sf-string (`"…"`) or, for compatibility, a bare token;
 * - the first request with a key runs; its status, body and allow-listed headers are recorded under the
 *   request's `scope` (its principal) and replayed to every repeat with `Idempotent-Replayed: true`;
 * - the same key with another method, path or body gets 422; a repeat while the first still runs gets
 *   409 with `Retry-After`;
 * - errors are RFC 9457 problem+json with idempotool's `code`;
 * - a handler that throws, answers 5xx or dies while it runs may have acted: by default (the
 *   `irreversible` effect) that request and its repeats get 409 `outcome_unknown`, and it never runs again
 *   under that key. Declare `effect: "owned-store"` (or `"native-key"`) for handlers whose failure
 *   certainly left nothing behind: then the key is released and a retry runs (see docs/http.md);
 * - 4xx refusals (400, 401, 422, …) are not recorded by default (`record`): the key is released and the
 *   corrected retry runs.
 *
 * Request headers are never stored, nor `Set-Cookie`. The request body is read from a clone to fingerprint
 * it, so put your body-size limit in front of the middleware.
 *
 * @example
 * import { memoryStore } from "idempotool";
 * import { idempotencyMiddleware } from "idempotool/http";
 *
 * // Your authentication: the API key's id, verified, or undefined (never a header the client picks).
 * declare function apiKeyIdOf(request: Request): Promise<string | undefined>;
 *
 * const guard = idempotencyMiddleware({
 *   store: memoryStore(),
 *   routes: ["/payments"],
 *   scope: (request) => apiKeyIdOf(request),
 * });
 * const handler = (request: Request) =>
 *   guard(request, async () => Response.json({ id: "pay_1" }, { status: 201 }));
 */
export function idempotencyMiddleware(options: IdempotencyMiddlewareOptions): IdempotencyMiddleware {
  const scopeOf = scopeOption(options?.scope);
  const handle = createIdempotencyHandler(options);
  return (request, next) => handle(request, next, { scope: () => scopeOf(request) });
}

/**
 * The shared core of {@link idempotencyMiddleware} and the framework adapters, for writing another
 * adapter (Koa, NestJS): options resolved once, one core tool. Call `guards(request)` first and pass
 * other requests on untouched; for guarded ones, `next` must run the rest of the chain and resolve to its
 * complete response, and `context.scope` must read the principal from the framework's request.
 * @example
 * import { memoryStore } from "idempotool";
 * import { createIdempotencyHandler } from "idempotool/http";
 *
 * const handle = createIdempotencyHandler({ store: memoryStore(), routes: ["/payments"] });
 * const request = new Request("http://api.test/payments", { method: "POST", headers: { "Idempotency-Key": "k-1" } });
 * const response = handle.guards(request)
 *   ? await handle(request, async () => new Response("ok"), { scope: () => "tenant-1" })
 *   : new Response("not guarded");
 */
export function createIdempotencyHandler(options: SharedMiddlewareOptions): IdempotencyHandler {
  const o = resolveMiddlewareOptions(options);
  const effect = options.effect ?? Effect.irreversible;
  const onEvent = options.onEvent;
  const tool = idempotent<HttpCall, StoredResponse>(
    async (call) => {
      const response = await call.next(call.request);
      const body = new Uint8Array(await response.arrayBuffer());
      call.live = rebuildResponse(response, body);
      if (!o.record(response.status, call.request)) {
        const unrecorded = new UnrecordedResponse(call.live);
        // A 5xx is how frameworks answer a handler that threw: it says nothing of what the handler did.
        if (response.status >= 500 && !retryableEffects.has(effect)) throw unrecorded;
        throw notExecuted(unrecorded);
      }
      return storeResponse(response, body, o.replayHeaders, o.redact);
    },
    {
      name: options.name ?? "http",
      store: options.store,
      effect,
      significant: (call) => call.print,
      waitMs: options.waitMs ?? 0,
      ...(options.ttlMs === undefined ? {} : { ttlMs: options.ttlMs }),
      ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
      ...(options.maxResponseBytes === undefined ? {} : { maxResultBytes: options.maxResponseBytes }),
      ...(options.encryption === undefined ? {} : { encryption: options.encryption }),
      ...(options.fingerprintKeys === undefined ? {} : { fingerprintKeys: options.fingerprintKeys }),
      ...(options.clock === undefined ? {} : { clock: options.clock }),
      ...(onEvent === undefined ? {} : { onEvent: (event) => onEvent(inHttpTerms(event)) }),
    },
  );
  const guards = (request: Request) =>
    o.methods.has(request.method.toUpperCase()) &&
    o.routes(request) &&
    (o.required || request.headers.has(HttpHeader.idempotencyKey));
  const handle = (request: Request, next: NextHandler, context: RequestContext) =>
    guards(request) ? guard(o, tool, request, next, context) : next(request);
  return Object.assign(handle, { guards });
}

async function guard(
  o: ResolvedMiddlewareOptions,
  tool: IdempotentTool<HttpCall, StoredResponse>,
  request: Request,
  next: NextHandler,
  context: RequestContext,
): Promise<Response> {
  const header = request.headers.get(HttpHeader.idempotencyKey);
  if (header === null) {
    return problemResponse(
      new IdempotencyError(
        ErrorCode.keyMissing,
        `${request.method} ${new URL(request.url).pathname} requires an Idempotency-Key header: a unique key ` +
          'chosen by the client, the same on every retry of this request (Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324").',
      ),
      o,
    );
  }
  const parsed = parseIdempotencyKey(header);
  if (!parsed.ok) return problemResponse(new IdempotencyError(ErrorCode.keyInvalid, parsed.problem), o);

  const scope = principalOf(await context.scope());
  // A server bug, not the client's: the request is refused before the handler runs, and nothing is stored.
  if (scope instanceof IdempotencyError) return problemResponse(scope, o);
  try {
    const print = await requestPrint(request, context.body);
    const call: HttpCall = { print, request, next, live: undefined };
    const envelope = await tool(call, { key: parsed.key, scope });
    if (!envelope.was_replay && call.live) return call.live;
    return replayResponse(envelope.result);
  } catch (error) {
    if (error instanceof UnrecordedResponse) return error.response;
    if (error instanceof ResultTooLargeError) return problemResponse(responseTooLarge(error), o);
    if (error instanceof IdempotencyError && error.code !== ErrorCode.invalidOptions) {
      return problemResponse(error, o);
    }
    throw error;
  }
}

/** Strings that are what `String()` or a template makes of a missing value, never a real principal. */
const placeholderScopes: ReadonlySet<string> = new Set(["undefined", "null", "[object Object]"]);

/**
 * The principal `scope()` gave, or the error that refuses the request when it gave none. Without this
 * check, requests without a user would share one scope, and each could replay another's responses.
 */
function principalOf(scope: unknown): string | IdempotencyError {
  let unusable: string | undefined;
  if (typeof scope !== "string") unusable = scope === null ? "null" : typeof scope;
  else if (scope.trim() === "") unusable = "an empty string";
  else if (scope.length > 255) unusable = `${scope.length} characters`;
  else if (placeholderScopes.has(scope)) unusable = `"${scope}"`;
  else return scope;
  return new IdempotencyError(
    ErrorCode.invalidOptions,
    `The server could not tell whose request this is: the Idempotency-Key middleware's scope() gave ${unusable}, ` +
      "not the authenticated principal (1–255 characters), so the request was not processed. This is a server " +
      "configuration error: run authentication before the middleware and take the scope from the authenticated user.",
  );
}

/** The core's events with its size error told in the middleware's terms (`maxResponseBytes`). */
function inHttpTerms(event: IdempotencyEvent): IdempotencyEvent {
  return event.error instanceof ResultTooLargeError
    ? { ...event, error: responseTooLarge(event.error) }
    : event;
}
