/**
 * `idempotool proxy --http <port>`: the proxy served over Streamable HTTP at `/mcp`. A stdio server
 * speaks to one client, so each HTTP session starts its own copy of the server and its own relay; the
 * records they write are one store's. Clients on the 2026-07-28 revision have no sessions: their requests
 * share one relay (one per credential under `--scope client`), answered request by request.
 */
import { createHash, randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { RequestId } from "@modelcontextprotocol/sdk/types.js";
import { isObject } from "../mcp/mcp-types.js";
import { type McpProxy, type McpProxyOptions, startMcpProxy } from "./mcp-proxy.js";
import { RequestFront } from "./proxy-http-requests.js";
import { envelopeOf } from "./proxy-revisions.js";

/** How each session's keys are namespaced over HTTP. */
export type HttpScope = "shared" | "session" | "client";

export interface HttpProxyOptions extends Omit<McpProxyOptions, "client" | "server" | "scope"> {
  readonly port: number;
  readonly host: string;
  readonly scope: HttpScope;
  /** The scope as the proxy's `--namespace` makes it (a prefix, or none). */
  readonly within: (scope: string) => string;
  /** A fresh connection to a fresh copy of the server, for one session. */
  readonly startServer: () => Transport;
  /** The SDK's Node transport class, loaded by the caller (the SDK is an optional peer). */
  readonly Transport: typeof StreamableHTTPServerTransport;
  /**
   * The most sessions (each one a copy of the server) alive or starting at once; a new one past it is
   * refused with 503. Default {@link defaultMaxSessions}.
   */
  readonly maxSessions?: number | undefined;
}

/** How many sessions, each with its own server process, the proxy runs at once unless told. */
export const defaultMaxSessions = 32;

export interface HttpProxy {
  /** Where clients connect: `http://127.0.0.1:<port>/mcp`. */
  readonly url: string;
  /** End every session (their servers stop) and stop listening. */
  close(): Promise<void>;
}

const path = "/mcp";
const maxBodyBytes = 4 * 1024 * 1024;
const loopback = new Set(["127.0.0.1", "localhost", "::1"]);

/**
 * Serve the proxy over Streamable HTTP until `close()`.
 * @example
 * const http = await serveHttpProxy({ port: 8080, host: "127.0.0.1", scope: "shared", within: (scope) => scope, startServer, Transport, store, rules, log });
 */
export async function serveHttpProxy(options: HttpProxyOptions): Promise<HttpProxy> {
  const { log } = options;
  const sessions = new Map<
    string,
    { transport: StreamableHTTPServerTransport; proxy: McpProxy; credential: string; streams: Streams }
  >();
  // The relays of 2026-07-28 clients, by the namespace their keys live in.
  const relays = new Map<string, Promise<{ front: RequestFront; proxy: McpProxy }>>();
  const maxSessions = options.maxSessions ?? defaultMaxSessions;
  let starting = 0;
  let port = options.port;

  // The relays started, for finding an idle one to stop.
  const running = new Map<string, { front: RequestFront; proxy: McpProxy }>();

  /** The relay for requests whose keys live in `scope`, started (with its server) on first use. */
  const relayFor = (scope: string) => {
    let relay = relays.get(scope);
    if (relay) return relay;
    const front = new RequestFront();
    const started = startMcpProxy({
      ...options,
      client: front,
      server: options.startServer(),
      scope,
      sharedByClients: true,
    }).then((proxy) => ({ front, proxy }));
    relay = started;
    relays.set(scope, started);
    const forget = () => {
      if (relays.get(scope) === started) relays.delete(scope);
      if (running.get(scope)?.front === front) running.delete(scope);
    };
    started.then((relay) => {
      running.set(scope, relay);
      void relay.proxy.ended.then((end) => {
        forget();
        log(`the relay for 2026-07-28 requests ended: ${end.reason}`);
      });
    }, forget);
    return started;
  };

  /**
   * Whether one more session or relay may start: below `--max-sessions`, or once the relay that has
   * waited longest with no request open is stopped (its server finishes the calls it runs first). A
   * 2026-07-28 client has nothing to close, so its relay would otherwise hold its place forever.
   */
  const makeRoom = (): boolean => {
    if (sessions.size + relays.size + starting < maxSessions) return true;
    let idlest: [string, { front: RequestFront; proxy: McpProxy }] | undefined;
    for (const entry of running) {
      if (entry[1].front.idle() && (!idlest || entry[1].front.lastUsed < idlest[1].front.lastUsed))
        idlest = entry;
    }
    if (!idlest) return false;
    const [scope, relay] = idlest;
    relays.delete(scope);
    running.delete(scope);
    log("stopping the idlest relay for 2026-07-28 requests to make room");
    void relay.proxy.close();
    return true;
  };

  /** A POST of a 2026-07-28 client: checked as a session's first request is, then relayed. */
  const serveRequest = async (request: IncomingMessage, response: ServerResponse, body: unknown) => {
    const refused = refusal(request, port, loopback.has(options.host));
    if (refused) {
      answer(response, refused.status, -32000, refused.message);
      return;
    }
    if (options.scope === "session") {
      answer(
        response,
        400,
        -32600,
        "idempotool proxy --scope session keys each session apart, and a 2026-07-28 client has no session: " +
          "use --scope shared or --scope client",
      );
      return;
    }
    if (options.scope === "client" && !request.headers.authorization) {
      noCredential(response);
      return;
    }
    const scope = options.within(options.scope === "client" ? `client:${credentialOf(request)}` : "default");
    if (!relays.has(scope) && !makeRoom()) {
      answer(response, 503, -32000, `idempotool proxy: ${maxSessions} sessions are open; close one first`);
      return;
    }
    let relay: Awaited<ReturnType<typeof relayFor>>;
    try {
      relay = await relayFor(scope);
    } catch (error) {
      log(`could not start the MCP server for 2026-07-28 requests: ${String(error)}`);
      answer(response, 502, -32603, `idempotool proxy: could not start the MCP server: ${String(error)}`);
      return;
    }
    // Checked above: the client accepts server-sent events.
    relay.front.deliver(body as Record<string, unknown>, response);
  };

  const startSession = async (request: IncomingMessage, response: ServerResponse, body: unknown) => {
    // A browser page on another site must not reach a server on this machine by a DNS name it controls.
    const local = loopback.has(options.host);
    const transport: StreamableHTTPServerTransport = new options.Transport({
      sessionIdGenerator: () => randomUUID(),
      ...(local
        ? {
            enableDnsRebindingProtection: true,
            allowedHosts: [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`],
          }
        : {}),
    });
    const streams = watchStreams(transport);
    const credential = credentialOf(request);
    const scope =
      options.scope === "shared"
        ? options.within("default")
        : options.scope === "client"
          ? // Keyed by the credential the client presents, never by a name it could claim.
            options.within(`client:${credential}`)
          : () => options.within(`session:${transport.sessionId ?? ""}`);
    let proxy: McpProxy;
    try {
      proxy = await startMcpProxy({
        ...options,
        client: transport,
        server: options.startServer(),
        scope,
        reachable: streams.reachable,
      });
    } catch (error) {
      log(`could not start the MCP server for a new session: ${String(error)}`);
      answer(response, 502, -32603, `idempotool proxy: could not start the MCP server: ${String(error)}`);
      return;
    }
    // The server may log before it answers initialize: on this POST's stream.
    streams.watch(request, response, body);
    await transport.handleRequest(request, response, body);
    const id = transport.sessionId;
    if (id === undefined) {
      await proxy.close();
      return;
    }
    sessions.set(id, { transport, proxy, credential, streams });
    void proxy.ended.then((end) => {
      sessions.delete(id);
      log(`session ${id} ended: ${end.reason}`);
    });
  };

  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    if (new URL(request.url ?? "/", "http://localhost").pathname !== path) {
      answer(response, 404, -32600, `idempotool proxy serves MCP at ${path}`);
      return;
    }
    let body: unknown;
    if (request.method === "POST") {
      try {
        body = JSON.parse(await readBody(request));
      } catch (error) {
        answer(response, 400, -32700, `Parse error: ${String(error)}`);
        return;
      }
    }
    const sessionId = request.headers["mcp-session-id"];
    if (typeof sessionId === "string") {
      const session = sessions.get(sessionId);
      if (!session) {
        answer(response, 404, -32001, "Session not found: start a new one with initialize");
        return;
      }
      if (options.scope === "client" && credentialOf(request) !== session.credential) {
        // The session's keys are its credential's: another credential, or none, must not read its replays.
        answer(response, 403, -32001, "Forbidden: this session belongs to another credential");
        return;
      }
      session.streams.watch(request, response, body);
      await session.transport.handleRequest(request, response, body);
      return;
    }
    if (request.method === "POST" && isRevision2026(body)) {
      await serveRequest(request, response, body);
      return;
    }
    if (request.method === "POST" && isInitialize(body)) {
      // Every check comes before the server is started: a request that would be refused must not cost a
      // process. A web page can send a no-cors POST here, and a rebound DNS name can point here.
      const refused = refusal(request, port, loopback.has(options.host));
      if (refused) {
        answer(response, refused.status, -32000, refused.message);
        return;
      }
      if (!makeRoom()) {
        answer(response, 503, -32000, `idempotool proxy: ${maxSessions} sessions are open; close one first`);
        return;
      }
      if (options.scope === "client" && !request.headers.authorization) {
        noCredential(response);
        return;
      }
      starting++;
      try {
        await startSession(request, response, body);
      } finally {
        starting--;
      }
      return;
    }
    answer(response, 400, -32000, "Bad Request: no Mcp-Session-Id; start a session with initialize");
  };

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      log(`HTTP request failed: ${String(error)}`);
      if (!response.headersSent) answer(response, 500, -32603, "idempotool proxy: internal error");
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  port = (server.address() as AddressInfo).port;
  const host = options.host.includes(":") ? `[${options.host}]` : options.host;
  return {
    url: `http://${host}:${port}${path}`,
    close: async () => {
      await Promise.allSettled([...sessions.values()].map(({ proxy }) => proxy.close()));
      await Promise.allSettled([...relays.values()].map(async (relay) => (await relay).proxy.close()));
      await Promise.allSettled([...running.values()].map(({ proxy }) => proxy.close()));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** What a session knows of its client's streams. */
interface Streams {
  /** Notes a request of the session: its POST stream, or its GET stream, open until its response closes. */
  watch(request: IncomingMessage, response: ServerResponse, body: unknown): void;
  /** Whether the POST that carried this request is still open, so its stream reaches the client. */
  reachable(id: RequestId): boolean;
}

/**
 * Keeps a session's guessed messages on streams that reach its client. The proxy relates a log line or a
 * question of the server's, which names no request, to the client's newest request whose POST is still
 * open (`reachable`); while the client has a GET stream open, such a message goes there instead, as it
 * would from a server that relates nothing. Progress names its request by its token, and is left alone.
 */
function watchStreams(transport: StreamableHTTPServerTransport): Streams {
  // The response that carries each request, by a key that keeps 1 and "1" apart; the latest wins.
  const posts = new Map<string, ServerResponse>();
  const gets = new Set<ServerResponse>();
  const idKey = (id: unknown) => `${typeof id}:${String(id)}`;
  // A GET the transport refused (a second one, a bad version) is no stream.
  const getOpen = () =>
    [...gets].some(
      (get) => get.headersSent && get.statusCode === 200 && !get.writableEnded && !get.destroyed,
    );
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    const guessed =
      options?.relatedRequestId !== undefined &&
      "method" in message &&
      message.method !== "notifications/progress";
    return guessed && getOpen() ? send(message) : send(message, options);
  };
  return {
    watch(request, response, body) {
      if (request.method === "GET") {
        gets.add(response);
        response.once("close", () => gets.delete(response));
        return;
      }
      if (request.method !== "POST") return;
      const keys = (Array.isArray(body) ? body : [body]).flatMap((message: unknown) =>
        isObject(message) && typeof message.method === "string" && message.id !== undefined
          ? [idKey(message.id)]
          : [],
      );
      for (const key of keys) posts.set(key, response);
      response.once("close", () => {
        for (const key of keys) if (posts.get(key) === response) posts.delete(key);
      });
    },
    reachable: (id) => posts.has(idKey(id)),
  };
}

/** The credential a request presents, hashed: what a `--scope client` session and its keys belong to. */
function credentialOf(request: IncomingMessage): string {
  return createHash("sha256")
    .update(request.headers.authorization ?? "")
    .digest("hex")
    .slice(0, 32);
}

/**
 * Why a request that would start a session is refused, before anything is started: a Host or Origin that
 * is not this proxy's own (when it listens on loopback), a body that is not JSON, an Accept header without
 * both answers Streamable HTTP may give.
 */
function refusal(
  request: IncomingMessage,
  port: number,
  local: boolean,
): { status: number; message: string } | undefined {
  if (local) {
    const hosts = [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`];
    if (!hosts.includes(request.headers.host ?? "")) {
      return {
        status: 403,
        message: `Forbidden: Host ${JSON.stringify(request.headers.host ?? "")} is not this proxy`,
      };
    }
    const origin = request.headers.origin;
    if (origin !== undefined && !hosts.some((host) => origin === `http://${host}`)) {
      return { status: 403, message: `Forbidden: requests from ${JSON.stringify(origin)} are not served` };
    }
  }
  const mediaType = (request.headers["content-type"] ?? "").split(";")[0]?.trim().toLowerCase();
  if (mediaType !== "application/json") {
    return { status: 415, message: "Unsupported Media Type: the body must be application/json" };
  }
  const accept = request.headers.accept ?? "";
  if (!accept.includes("application/json") || !accept.includes("text/event-stream")) {
    return {
      status: 406,
      message: "Not Acceptable: Accept must list application/json and text/event-stream",
    };
  }
  return undefined;
}

/** One message of a 2026-07-28 client: a discovery, or a request carrying that revision's envelope. */
function isRevision2026(body: unknown): boolean {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return false;
  const message = body as { method?: unknown; params?: unknown };
  return message.method === "server/discover" || envelopeOf(message.params) !== undefined;
}

function isInitialize(body: unknown): boolean {
  const messages = Array.isArray(body) ? body : [body];
  return messages.some(
    (message) =>
      typeof message === "object" &&
      message !== null &&
      (message as { method?: unknown }).method === "initialize",
  );
}

/**
 * A request under `--scope client` without an Authorization header: every client without one would share
 * a namespace, and replay each other's results.
 */
function noCredential(response: ServerResponse): void {
  answer(
    response,
    401,
    -32001,
    "idempotool proxy --scope client needs an Authorization header: each credential gets its own keys",
  );
}

function answer(response: ServerResponse, status: number, code: number, message: string): void {
  response.writeHead(status, { "content-type": "application/json" });
  response.end(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }));
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > maxBodyBytes) throw new Error(`the request body is over ${maxBodyBytes} bytes`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}
