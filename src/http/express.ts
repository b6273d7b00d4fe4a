/**
 * `idempotool/http/express`: the Idempotency-Key middleware for Express (and Connect-style servers).
 * It needs no Express import: it works on Node's request and response, which Express extends.
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { createIdempotencyHandler } from "./idempotency-middleware.js";
import { type SharedMiddlewareOptions, scopeOption } from "./middleware-options.js";
import { bytesOf, nodeHeadersOf, webHeadersOf, webRequestOf } from "./node-request.js";
import { isNullBodyStatus } from "./stored-response.js";

/** The part of an Express request the middleware reads. */
export interface ExpressLikeRequest extends IncomingMessage {
  readonly originalUrl?: string;
  /** Left by a body parser (`express.json()`, `express.raw()`, `express.text()`). */
  body?: unknown;
}

/** Express's `next`. */
export type ExpressLikeNext = (error?: unknown) => void;

/** Options of {@link expressIdempotency}: the shared ones, with `scope` reading the Express request. */
export interface ExpressIdempotencyOptions<Req extends ExpressLikeRequest> extends SharedMiddlewareOptions {
  /**
   * The authenticated principal (`req.user?.id`, as your authentication left it); mount authentication
   * first. A request for which it gives none is refused with 500 before the handler runs.
   */
  readonly scope: (req: Req) => string | undefined | Promise<string | undefined>;
}

/**
 * Idempotency-Key middleware for Express (draft-ietf-httpapi-idempotency-key-header); see
 * `idempotencyMiddleware` in `idempotool/http` for what it answers.
 *
 * Mount it after your body parser: it fingerprints `req.body`. Without one it reads the raw body itself and
 * leaves it on `req.body` as a Buffer, as `express.raw()` would. The handler's response is buffered until
 * it is recorded, then sent, so do not put streaming routes behind it.
 * @example
 * import express from "express";
 * import { memoryStore } from "idempotool";
 * import { expressIdempotency } from "idempotool/http/express";
 *
 * // What your authentication (passport, express-jwt, …) verified and left on the request.
 * type AuthenticatedRequest = express.Request & { user?: { id: string } };
 * declare const authenticate: express.RequestHandler; // sets req.user, or answers 401
 *
 * const app = express();
 * app.use(express.json());
 * app.use(authenticate);
 * app.use(
 *   expressIdempotency<AuthenticatedRequest>({ store: memoryStore(), routes: ["/payments"], scope: (req) => req.user?.id }),
 * );
 * app.post("/payments", (req, res) => { res.status(201).json({ id: "pay_1" }); });
 */
export function expressIdempotency<Req extends ExpressLikeRequest = ExpressLikeRequest>(
  options: ExpressIdempotencyOptions<Req>,
): (req: Req, res: ServerResponse, next: ExpressLikeNext) => void {
  const scopeOf = scopeOption(options?.scope);
  const handle = createIdempotencyHandler(options);
  return (req, res, next) => {
    const request = webRequestOf(req.method ?? "GET", req.originalUrl ?? req.url ?? "/", req.headers);
    if (!handle.guards(request)) {
      next();
      return;
    }
    void (async () => {
      let capture: ResponseCapture | undefined;
      try {
        const response = await handle(
          request,
          () => {
            capture = captureResponse(res);
            next();
            return capture.response;
          },
          { scope: () => scopeOf(req), body: () => bodyOf(req) },
        );
        capture?.restore();
        await sendResponse(res, response, capture !== undefined);
      } catch (error) {
        capture?.restore();
        if (capture === undefined) {
          next(error);
        } else if (!res.headersSent) {
          // The chain already ran once: Express's next() must not be called twice.
          res.statusCode = 500;
          res.end();
        } else {
          res.destroy(error instanceof Error ? error : undefined);
        }
      }
    })();
  };
}

async function bodyOf(req: ExpressLikeRequest): Promise<unknown> {
  if (req.body !== undefined) return req.body;
  const length = req.headers["content-length"];
  if (req.headers["transfer-encoding"] === undefined && (length === undefined || length === "0"))
    return undefined;
  const raw = Buffer.from(await bytesOf(req));
  // The stream is spent: leave the bytes where a body parser would (body parsers skip a finished request).
  req.body = raw;
  return raw;
}

interface ResponseCapture {
  /** What the handler sent, once it ends the response. */
  readonly response: Promise<Response>;
  restore(): void;
}

/** Hold back what the handler writes, so it can be recorded before anything is sent. */
function captureResponse(res: ServerResponse): ResponseCapture {
  const original = { writeHead: res.writeHead, write: res.write, end: res.end };
  const chunks: Buffer[] = [];
  let resolve!: (response: Response) => void;
  const response = new Promise<Response>((r) => {
    resolve = r;
  });
  const push = (chunk: unknown, encoding: unknown) => {
    if (chunk === undefined || chunk === null || typeof chunk === "function") return;
    chunks.push(
      typeof chunk === "string"
        ? Buffer.from(chunk, typeof encoding === "string" ? (encoding as BufferEncoding) : "utf8")
        : Buffer.from(chunk as Uint8Array),
    );
  };
  const callLater = (args: unknown[]) => {
    const callback = args.find((arg) => typeof arg === "function") as (() => void) | undefined;
    if (callback) process.nextTick(callback);
  };

  res.writeHead = ((status: number, ...rest: unknown[]) => {
    res.statusCode = status;
    for (const arg of rest) {
      if (typeof arg === "string") res.statusMessage = arg;
      else if (Array.isArray(arg)) {
        for (let i = 0; i + 1 < arg.length; i += 2) res.setHeader(String(arg[i]), String(arg[i + 1]));
      } else if (typeof arg === "object" && arg !== null) {
        for (const [name, value] of Object.entries(arg)) {
          if (value !== undefined) res.setHeader(name, value as string | string[]);
        }
      }
    }
    return res;
  }) as typeof res.writeHead;
  res.write = ((chunk: unknown, ...rest: unknown[]) => {
    push(chunk, rest[0]);
    callLater(rest);
    return true;
  }) as typeof res.write;
  res.end = ((chunk?: unknown, ...rest: unknown[]) => {
    push(chunk, rest[0]);
    callLater(rest);
    const status = res.statusCode;
    const body = Buffer.concat(chunks);
    resolve(
      new Response(isNullBodyStatus(status) || body.length === 0 ? null : body, {
        status,
        statusText: res.statusMessage ?? "",
        headers: webHeadersOf(res.getHeaders()),
      }),
    );
    return res;
  }) as typeof res.end;

  return {
    response,
    restore() {
      res.writeHead = original.writeHead;
      res.write = original.write;
      res.end = original.end;
    },
  };
}

async function sendResponse(res: ServerResponse, response: Response, replaceHeaders: boolean): Promise<void> {
  // After the handler ran, `response` is complete; before, headers set by earlier middleware (CORS) stay.
  if (replaceHeaders) for (const name of res.getHeaderNames()) res.removeHeader(name);
  res.statusCode = response.status;
  if (response.statusText) res.statusMessage = response.statusText;
  for (const [name, value] of nodeHeadersOf(response.headers)) res.setHeader(name, value);
  const body = response.body === null ? undefined : Buffer.from(await response.arrayBuffer());
  res.end(body);
}
