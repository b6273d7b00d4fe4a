/**
 * The server behind `idempotool console`: a page and a small JSON API over the review module, for one
 * person on this machine. It listens on loopback only, and everything it answers is guarded three ways:
 * a one-time token in the printed link is exchanged for a session cookie (HttpOnly, SameSite=Strict); the
 * `Host` header must name the server itself (a DNS-rebinding page carries its own host name); and a
 * request that carries an `Origin` (every state-changing request must) must carry the server's own. It
 * sends no CORS headers, and its Content-Security-Policy allows nothing but itself.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Clock } from "../../core/clock.js";
import { isIdempotencyError } from "../../core/errors.js";
import type { IdempotencyStore } from "../../core/store.js";
import { parseDuration } from "../../core/time.js";
import {
  type ResolveToolOptions,
  readRecordStory,
  readTrail,
  resolveRecord,
  reviewCounts,
  reviewQueue,
  type TrailEntry,
} from "../../review/index.js";
import { scrub } from "../redact.js";
import { consoleAssets } from "./console-page.js";

/** Host names the console may listen on: loopback only. */
export const loopbackHosts = ["127.0.0.1", "localhost", "::1"] as const;

export interface ConsoleServerOptions {
  readonly store: IdempotencyStore;
  /** How the page names the store: its URL with the password masked (redactUrl). */
  readonly storeLabel: string;
  /** A loopback host name; default 127.0.0.1. */
  readonly host?: string | undefined;
  /** Default 0: a free port the system picks. */
  readonly port?: number | undefined;
  /** Secrets (the store URL's password) scrubbed from every message sent to the page. */
  readonly secrets?: readonly string[] | undefined;
  /** The tools' storage options by name, for sealed notes and resolutions of encrypted tools. */
  readonly tools?: Readonly<Record<string, ResolveToolOptions>> | undefined;
  readonly clock?: Clock | undefined;
  /** The most a request body may hold; default 1 MiB. */
  readonly maxBodyBytes?: number | undefined;
  /** Told of every resolution applied (the OpenTelemetry hook, `otelResolutions()`). */
  readonly onResolution?: ((entry: TrailEntry) => void) | undefined;
}

export interface ConsoleServer {
  /** The server's own origin, `http://127.0.0.1:<port>`. */
  readonly origin: string;
  readonly port: number;
  /** The link to print: the origin with a fresh one-time token. */
  readonly url: string;
  /** Another one-time link, for a second browser (each link opens one session). */
  issueLink(): string;
  /** Stop listening and drop every connection; the store stays open (its owner closes it). */
  close(): Promise<void>;
}

/** An error the API answers with, as JSON: `{ "error": { "code", "message" } }`. */
class ApiRefusal extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const defaultMaxBodyBytes = 1024 * 1024;
const sessionBytes = 32;

/** 32 random bytes, base64url: a one-time token or a session id. */
function secret(): string {
  return randomBytes(sessionBytes).toString("base64url");
}

function digest(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

/** Constant-time membership: a token is compared by its hash, so its length tells nothing either. */
function takeMatch(set: Set<string>, candidate: string, consume: boolean): boolean {
  const wanted = digest(candidate);
  let found: string | undefined;
  for (const held of set) if (timingSafeEqual(digest(held), wanted)) found = held;
  if (found !== undefined && consume) set.delete(found);
  return found !== undefined;
}

/**
 * Start the console's server.
 * @example
 * const server = await startConsoleServer({ store, storeLabel: "sqlite:///var/lib/idempotool.db" });
 * console.log(server.url); // http://127.0.0.1:53211/?token=…
 */
export async function startConsoleServer(options: ConsoleServerOptions): Promise<ConsoleServer> {
  const host = options.host ?? "127.0.0.1";
  if (!(loopbackHosts as readonly string[]).includes(host)) {
    throw new Error(
      `the console listens on loopback only (${loopbackHosts.join(", ")}), not ${JSON.stringify(host)}`,
    );
  }
  const maxBodyBytes = options.maxBodyBytes ?? defaultMaxBodyBytes;
  const secrets = options.secrets ?? [];
  const tokens = new Set<string>();
  const sessions = new Set<string>();
  let port = 0;
  let cookieName = "idempotool_console";
  const allowedHosts = () => [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`];
  const originOf = (hostHeader: string) => `http://${hostHeader}`;

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const hostHeader = request.headers.host ?? "";
    if (!allowedHosts().includes(hostHeader.toLowerCase())) {
      throw new ApiRefusal(403, "host_refused", "this console answers only requests to its own address");
    }
    const origin = request.headers.origin;
    // A request that says where it comes from must come from here; a browser always says so on a POST.
    if (origin !== undefined && origin !== originOf(hostHeader.toLowerCase())) {
      throw new ApiRefusal(403, "origin_refused", "this console answers only its own page");
    }
    // A browser says where a request comes from: another site, or another port of this machine (the same
    // site, to a cookie), gets nothing; "none" is the operator opening the link.
    const fetchSite = request.headers["sec-fetch-site"];
    if (fetchSite !== undefined && fetchSite !== "same-origin" && fetchSite !== "none") {
      throw new ApiRefusal(403, "origin_refused", "this console answers only its own page");
    }
    const url = new URL(request.url ?? "/", "http://console.invalid");
    const method = request.method ?? "GET";
    const asset = consoleAssets[url.pathname];
    if (asset !== undefined) {
      if (method !== "GET" && method !== "HEAD")
        throw new ApiRefusal(405, "method_not_allowed", `${method} is not served here`);
      send(response, 200, asset.type, asset.body);
      return;
    }
    if (!url.pathname.startsWith("/api/")) throw new ApiRefusal(404, "not_found", "no such page");
    if (method === "POST") {
      if (origin === undefined) {
        throw new ApiRefusal(
          403,
          "origin_refused",
          "a request that changes something must come from this page",
        );
      }
      if (!(request.headers["content-type"] ?? "").startsWith("application/json")) {
        throw new ApiRefusal(415, "unsupported_media_type", "send JSON (Content-Type: application/json)");
      }
    }
    const route = `${method} ${url.pathname}`;
    if (route === "POST /api/session") {
      const body = await readJson(request, maxBodyBytes);
      const token = typeof body.token === "string" ? body.token : "";
      if (token === "" || !takeMatch(tokens, token, true)) {
        throw new ApiRefusal(
          403,
          "token_refused",
          "this link's token is not valid or was used already: open the link idempotool console printed, once",
        );
      }
      const session = secret();
      sessions.add(session);
      response.setHeader("Set-Cookie", `${cookieName}=${session}; HttpOnly; SameSite=Strict; Path=/`);
      sendJson(response, 200, { ok: true });
      return;
    }
    const session = cookieOf(request.headers.cookie, cookieName);
    if (session === undefined || !takeMatch(sessions, session, false)) {
      throw new ApiRefusal(
        401,
        "session_required",
        "no console session: open the link idempotool console printed (its token works once)",
      );
    }
    const store = options.store;
    const clock = options.clock;
    const common = { store, ...(clock ? { clock } : {}), ...(options.tools ? { tools: options.tools } : {}) };
    switch (route) {
      case "GET /api/info":
        sendJson(response, 200, { store: options.storeLabel });
        return;
      case "GET /api/queue": {
        const q = url.searchParams;
        const olderThan = q.get("olderThan") ?? "";
        const olderThanMs = olderThan === "" ? undefined : parseDuration(olderThan);
        if (olderThan !== "" && olderThanMs === undefined) {
          throw new ApiRefusal(
            400,
            "invalid_arguments",
            "older than must be a duration like 90s, 10m, 2h or 7d",
          );
        }
        const text = (name: string) => {
          const value = q.get(name)?.trim();
          return value ? value : undefined;
        };
        const queue = await reviewQueue({
          ...common,
          tool: text("tool"),
          scope: text("scope"),
          keyPrefix: text("keyPrefix"),
          olderThanMs,
          limit: 200,
        });
        sendJson(response, 200, queue);
        return;
      }
      case "GET /api/record": {
        const scope = url.searchParams.get("scope") ?? "";
        const key = url.searchParams.get("key") ?? "";
        sendJson(response, 200, await readRecordStory({ ...common, scope, key }));
        return;
      }
      case "GET /api/counts":
        sendJson(response, 200, await reviewCounts({ store, ...(clock ? { clock } : {}) }));
        return;
      case "POST /api/resolve": {
        const body = await readJson(request, maxBodyBytes);
        const str = (name: string) => (typeof body[name] === "string" ? (body[name] as string) : "");
        const scope = str("scope");
        const key = str("key");
        // Read first, and fail if it fails: without the record's tool, its encryption would be left out.
        const current = await readRecordStory({ ...common, scope, key });
        const tool = current?.record ? options.tools?.[current.record.tool] : undefined;
        const entry = await resolveRecord({
          store,
          ...(clock ? { clock } : {}),
          scope,
          key,
          as: body.as as "completed",
          ...("result" in body ? { result: body.result } : {}),
          ...("error" in body ? { error: body.error as string } : {}),
          evidence: body.evidence as string,
          by: body.by as string,
          // Always fenced: the page resolves the record the operator saw, or nothing.
          expectVersion: str("expectVersion"),
          ...(tool ? { tool } : {}),
          via: "console",
          onResolution: options.onResolution,
        });
        const trail = await readTrail({ store, scope, key });
        sendJson(response, 200, { entry, trail });
        return;
      }
      default:
        throw new ApiRefusal(404, "not_found", `no such API: ${method} ${url.pathname}`);
    }
  };

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      if (response.headersSent) {
        response.destroy();
        return;
      }
      const { status, code, message } = refusalOf(error);
      sendJson(response, status, { error: { code, message: scrub(message, secrets) } });
    });
  });
  // A slow or stuck client must not hold the console.
  server.requestTimeout = 30_000;
  server.headersTimeout = 10_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  port = (server.address() as AddressInfo).port;
  cookieName = `idempotool_console_${port}`;
  const shownHost = host === "::1" ? "[::1]" : host;
  const origin = `http://${shownHost}:${port}`;
  const issueLink = () => {
    const token = secret();
    tokens.add(token);
    return `${origin}/?token=${token}`;
  };
  return {
    origin,
    port,
    url: issueLink(),
    issueLink,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function refusalOf(error: unknown): { status: number; code: string; message: string } {
  if (error instanceof ApiRefusal) return { status: error.status, code: error.code, message: error.message };
  if (isIdempotencyError(error)) {
    return { status: error.httpStatus, code: error.code, message: error.message };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { status: 500, code: "internal_error", message: `the console failed: ${message}` };
}

const securityHeaders: Readonly<Record<string, string>> = {
  "Content-Security-Policy":
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
    "font-src 'none'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "X-Content-Type-Options": "nosniff",
  "X-Frame-Options": "DENY",
  // The first address carries the token: no page it links to may see it (it links to none, but still).
  "Referrer-Policy": "no-referrer",
  "Cross-Origin-Opener-Policy": "same-origin",
  "Cross-Origin-Resource-Policy": "same-origin",
  "Cache-Control": "no-store",
};

function send(response: ServerResponse, status: number, type: string, body: string): void {
  response.writeHead(status, {
    ...securityHeaders,
    "Content-Type": type,
    "Content-Length": Buffer.byteLength(body),
  });
  response.end(body);
}

function sendJson(response: ServerResponse, status: number, value: unknown): void {
  send(response, status, "application/json; charset=utf-8", JSON.stringify(value));
}

function cookieOf(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? "").split(";")) {
    const [k, ...v] = part.trim().split("=");
    if (k === name) return v.join("=");
  }
  return undefined;
}

/** The request's JSON object body, refused past `maxBytes` before it is all read. */
async function readJson(request: IncomingMessage, maxBytes: number): Promise<Record<string, unknown>> {
  const tooLarge = () =>
    new ApiRefusal(413, "body_too_large", `a request body may hold at most ${maxBytes} bytes`);
  if (Number(request.headers["content-length"] ?? 0) > maxBytes) {
    request.resume();
    throw tooLarge();
  }
  const text = await new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        // Stop keeping it, but read the rest away so the refusal can still be answered.
        request.off("data", onData);
        request.resume();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    };
    request.on("data", onData);
    request.once("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    request.once("error", reject);
  });
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ApiRefusal(400, "invalid_arguments", "the request body is not JSON");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new ApiRefusal(400, "invalid_arguments", "the request body must be a JSON object");
  }
  return parsed as Record<string, unknown>;
}
