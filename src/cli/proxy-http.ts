/**
 * `idempotool proxy --http <port>`: the proxy served over Streamable HTTP at `/mcp`. A stdio server
 * speaks to one client, so each HTTP session starts its own copy of the server and its own relay; the
 * records they write are one store's.
 */
import { createHash, randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { type McpProxy, type McpProxyOptions, startMcpProxy } from "./mcp-proxy.js";

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
}

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
  const sessions = new Map<string, { transport: StreamableHTTPServerTransport; proxy: McpProxy }>();
  let port = options.port;

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
    const credential = request.headers.authorization;
    const scope =
      options.scope === "shared"
        ? options.within("default")
        : options.scope === "client"
          ? // Keyed by the credential the client presents, never by a name it could claim.
            options.within(
              `client:${createHash("sha256")
                .update(credential ?? "")
                .digest("hex")
                .slice(0, 32)}`,
            )
          : () => options.within(`session:${transport.sessionId ?? ""}`);
    let proxy: McpProxy;
    try {
      proxy = await startMcpProxy({
        ...options,
        client: transport,
        server: options.startServer(),
        scope,
      });
    } catch (error) {
      log(`could not start the MCP server for a new session: ${String(error)}`);
      answer(response, 502, -32603, `idempotool proxy: could not start the MCP server: ${String(error)}`);
      return;
    }
    await transport.handleRequest(request, response, body);
    const id = transport.sessionId;
    if (id === undefined) {
      await proxy.close();
      return;
    }
    sessions.set(id, { transport, proxy });
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
      await session.transport.handleRequest(request, response, body);
      return;
    }
    if (request.method === "POST" && isInitialize(body)) {
      if (options.scope === "client" && !request.headers.authorization) {
        // Every client without one would share a namespace, and replay each other's results.
        answer(
          response,
          401,
          -32001,
          "idempotool proxy --scope client needs an Authorization header: each credential gets its own keys",
        );
        return;
      }
      await startSession(request, response, body);
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
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
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
