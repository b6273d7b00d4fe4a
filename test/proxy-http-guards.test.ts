/**
 * `idempotool proxy --http` refuses before it starts anything: a request from a web page or through a
 * rebound DNS name, a body that is not JSON, a session too many. And under `--scope client` a session's
 * replays are its credential's alone. The proxy runs in this process; each session's "server process" is
 * an in-memory MCP server whose starts are counted.
 */
import { request } from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { type HttpProxy, type HttpScope, serveHttpProxy } from "../src/cli/proxy-http.js";
import { memoryStore } from "../src/index.js";
import { MetaKey } from "../src/mcp/index.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The proxy on a free loopback port; `started` counts the servers it started, `sent` the messages sent. */
async function proxy(scope: HttpScope = "shared", maxSessions?: number) {
  const counts = { started: 0 };
  const sent: string[] = [];
  const http: HttpProxy = await serveHttpProxy({
    port: 0,
    host: "127.0.0.1",
    scope,
    within: (name) => name,
    store: memoryStore(),
    rules: new Map(),
    log: () => {},
    Transport: StreamableHTTPServerTransport,
    ...(maxSessions === undefined ? {} : { maxSessions }),
    startServer: () => {
      counts.started++;
      const server = new McpServer({ name: "messages", version: "1.0.0" });
      server.registerTool(
        "send_message",
        { description: "Send a message.", inputSchema: { to: z.string() } },
        async ({ to }) => {
          sent.push(to);
          return { content: [{ type: "text", text: `sent to ${to}` }] };
        },
      );
      const [proxySide, serverSide] = InMemoryTransport.createLinkedPair();
      void server.connect(serverSide);
      return proxySide;
    },
  });
  cleanups.push(() => http.close());
  return { url: new URL(http.url), counts, sent };
}

const initialize = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "page", version: "1" } },
});
const jsonAndStream = { "content-type": "application/json", accept: "application/json, text/event-stream" };

/** A POST with exactly these headers (Host included, which fetch() will not set). */
function rawPost(url: URL, headers: Record<string, string>, body: string): Promise<{ status: number }> {
  return new Promise((resolve, reject) => {
    const sent = request(url, { method: "POST", headers }, (response) => {
      response.resume();
      resolve({ status: response.statusCode ?? 0 });
    });
    sent.on("error", reject);
    sent.end(body);
  });
}

async function connect(url: URL, headers: Record<string, string> = {}) {
  const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers } });
  const client = new Client({ name: "agent", version: "1.0.0" });
  await client.connect(transport);
  cleanups.push(() => client.close());
  return { client, transport };
}

describe("idempotool proxy --http, before it starts a server", () => {
  it("refuses a web page's no-cors POST (another Origin, text/plain) without starting one", async () => {
    const { url, counts } = await proxy();
    const fromPage = await fetch(url, {
      method: "POST",
      headers: { origin: "https://evil.example", "content-type": "text/plain" },
      body: initialize,
    });
    const plainText = await fetch(url, {
      method: "POST",
      headers: { "content-type": "text/plain", accept: jsonAndStream.accept },
      body: initialize,
    });
    expect(fromPage.status).toBe(403);
    expect(plainText.status).toBe(415);
    expect(counts.started).toBe(0);
  });

  it("refuses a rebound DNS name (a Host that is not the proxy's) and a bad Accept without starting one", async () => {
    const { url, counts } = await proxy();
    // fetch() will not send another Host; a browser on a rebound name does.
    const rebound = await rawPost(
      url,
      { ...jsonAndStream, host: `attacker.example:${url.port}` },
      initialize,
    );
    const noStream = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json" },
      body: initialize,
    });
    expect(rebound.status).toBe(403);
    expect(noStream.status).toBe(406);
    expect(counts.started).toBe(0);
  });

  it("starts no more servers than maxSessions, and one more once a session ends", async () => {
    const { url, counts } = await proxy("shared", 2);
    const first = await connect(url);
    await connect(url);
    const third = await fetch(url, { method: "POST", headers: jsonAndStream, body: initialize });
    expect(third.status).toBe(503);
    expect(counts.started).toBe(2);
    await first.transport.terminateSession();
    await first.client.close();
    await expect
      .poll(
        async () => (await fetch(url, { method: "POST", headers: jsonAndStream, body: initialize })).status,
      )
      .toBe(200);
    expect(counts.started).toBe(3);
  });
});

describe("idempotool proxy --http --scope client", () => {
  it("answers a request on a session only to the credential that opened it", async () => {
    const { url, sent } = await proxy("client");
    const alice = await connect(url, { authorization: "Bearer alice" });
    const send = { name: "send_message", arguments: { to: "carol", idempotency_key: "k-1" } };
    await alice.client.callTool(send);
    const sessionId = alice.transport.sessionId ?? "";

    const asBob = await fetch(url, {
      method: "POST",
      headers: { ...jsonAndStream, "mcp-session-id": sessionId, authorization: "Bearer bob" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: send }),
    });
    const withNone = await fetch(url, {
      method: "POST",
      headers: { ...jsonAndStream, "mcp-session-id": sessionId },
      body: JSON.stringify({ jsonrpc: "2.0", id: 3, method: "tools/call", params: send }),
    });
    const again = await alice.client.callTool(send);

    expect(asBob.status).toBe(403);
    expect(await asBob.text()).not.toContain("sent to carol");
    expect(withNone.status).toBe(403);
    expect((again._meta?.[MetaKey.envelope] as { was_replay?: boolean } | undefined)?.was_replay).toBe(true);
    expect(sent).toEqual(["carol"]);
  });
});
