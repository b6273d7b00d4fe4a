/**
 * `idempotool proxy --http` for a client that only POSTs (it opens no GET stream, as the spec allows): a
 * server on stdio cannot say which request its log lines, sampling or elicitation requests belong to, so
 * the proxy sends them on the stream of the client's open request. Without that they went to a GET stream
 * nobody had opened: the logs were lost and a call that asked the user never finished. The proxy runs in
 * this process; its server is an in-memory MCP server, as a stdio one, with no relation kept.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  ElicitRequestSchema,
  ElicitResultSchema,
  LoggingMessageNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { serveHttpProxy } from "../src/cli/proxy-http.js";
import { memoryStore } from "../src/index.js";
import { gate } from "./fixtures/tools.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/**
 * The proxy in front of a server whose tools log, and whose `send_message` asks the user first (once
 * `ask` lets it); `slow_read` only reads, and answers once `read` lets it. `reached` hears each tool start.
 */
async function proxy(gates: { ask?: Promise<void>; read?: Promise<void>; reached?: () => void } = {}) {
  const sent: string[] = [];
  const http = await serveHttpProxy({
    port: 0,
    host: "127.0.0.1",
    scope: "shared",
    within: (name) => name,
    store: memoryStore(),
    rules: new Map(),
    log: () => {},
    Transport: StreamableHTTPServerTransport,
    startServer: () => {
      const server = new McpServer({ name: "messages", version: "1.0.0" }, { capabilities: { logging: {} } });
      server.registerTool(
        "send_message",
        { description: "Send a message.", inputSchema: { to: z.string() } },
        async ({ to }, extra) => {
          gates.reached?.();
          await gates.ask;
          await extra.sendNotification({
            method: "notifications/message",
            params: { level: "info", data: `about to send to ${to}` },
          });
          const answer = await extra.sendRequest(
            {
              method: "elicitation/create",
              params: {
                message: `Send to ${to}?`,
                requestedSchema: { type: "object", properties: { send: { type: "boolean" } } },
              },
            },
            ElicitResultSchema,
          );
          if (answer.action !== "accept" || answer.content?.send !== true) {
            return { content: [{ type: "text", text: "not sent" }] };
          }
          sent.push(to);
          return { content: [{ type: "text", text: `sent to ${to}` }] };
        },
      );
      server.registerTool(
        "preview_message",
        {
          description: "Show a message.",
          inputSchema: { text: z.string() },
          annotations: { readOnlyHint: true },
        },
        async ({ text }, extra) => {
          await extra.sendNotification({
            method: "notifications/message",
            params: { level: "info", data: `previewing ${text}` },
          });
          return { content: [{ type: "text", text: `preview: ${text}` }] };
        },
      );
      server.registerTool(
        "slow_read",
        { description: "Read slowly.", inputSchema: {}, annotations: { readOnlyHint: true } },
        async () => {
          gates.reached?.();
          await gates.read;
          return { content: [{ type: "text", text: "read" }] };
        },
      );
      const [proxySide, serverSide] = InMemoryTransport.createLinkedPair();
      void server.connect(serverSide);
      return proxySide;
    },
  });
  cleanups.push(() => http.close());
  return { url: new URL(http.url), sent };
}

/** A client that never opens the GET stream: the proxy is asked for one and the answer is 405. */
async function postOnlyClient(url: URL) {
  const transport = new StreamableHTTPClientTransport(url, {
    fetch: (input, init) =>
      init?.method === "GET" ? Promise.resolve(new Response(null, { status: 405 })) : fetch(input, init),
  });
  const client = new Client({ name: "agent", version: "1.0.0" }, { capabilities: { elicitation: {} } });
  const logs: unknown[] = [];
  const questions: string[] = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
    logs.push(notification.params.data);
  });
  client.setRequestHandler(ElicitRequestSchema, (request) => {
    questions.push(request.params.message);
    return { action: "accept", content: { send: true } };
  });
  await client.connect(transport);
  cleanups.push(() => client.close());
  return { client, transport, logs, questions };
}

/** A client with the SDK's defaults: it opens the GET stream after initialize. */
async function streamingClient(url: URL) {
  const transport = new StreamableHTTPClientTransport(url);
  const client = new Client({ name: "agent", version: "1.0.0" }, { capabilities: { elicitation: {} } });
  const questions: string[] = [];
  client.setRequestHandler(ElicitRequestSchema, (request) => {
    questions.push(request.params.message);
    return { action: "accept", content: { send: true } };
  });
  await client.connect(transport);
  cleanups.push(() => client.close());
  return { client, transport, questions };
}

const text = (result: unknown) => (result as { content: { text: string }[] }).content[0]?.text;

describe("idempotool proxy --http, a request whose connection was cut", () => {
  for (const kind of ["has a GET stream", "only POSTs"] as const) {
    it(`does not take a server's question with it, for a client that ${kind}`, async () => {
      const ask = gate();
      const read = gate();
      const started: (() => void)[] = [];
      const { url, sent } = await proxy({
        ask: ask.opened,
        read: read.opened,
        reached: () => started.shift()?.(),
      });
      const { client, transport, questions } =
        kind === "only POSTs" ? await postOnlyClient(url) : await streamingClient(url);
      cleanups.push(async () => read.open());
      const sendStarted = new Promise<void>((resolve) => started.push(resolve));
      const call = client.callTool(
        { name: "send_message", arguments: { to: "carol", idempotency_key: "streams-cut" } },
        undefined,
        { timeout: 10_000 },
      );
      await sendStarted;
      // A newer request on the session, whose connection is cut while it runs (an idle timeout, a blip).
      const readStarted = new Promise<void>((resolve) => started.push(resolve));
      const cut = new AbortController();
      const newer = fetch(url, {
        method: "POST",
        signal: cut.signal,
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "mcp-session-id": transport.sessionId ?? "",
          "mcp-protocol-version": "2025-06-18",
        },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: "newer",
          method: "tools/call",
          params: { name: "slow_read", arguments: {} },
        }),
      }).catch(() => undefined);
      await readStarted;
      cut.abort();
      await newer;
      // A request sent after the cut is answered after the proxy has seen the cut connection close.
      await client.ping();
      // The question comes now: the cut request is the newest, but its stream reaches nobody.
      ask.open();
      expect(text(await call)).toBe("sent to carol");
      expect(questions).toEqual(["Send to carol?"]);
      expect(sent).toEqual(["carol"]);
    });
  }

  it("delivers a log line the server sends before it answers initialize", async () => {
    const http = await serveHttpProxy({
      port: 0,
      host: "127.0.0.1",
      scope: "shared",
      within: (name) => name,
      store: memoryStore(),
      rules: new Map(),
      log: () => {},
      Transport: StreamableHTTPServerTransport,
      startServer: () => {
        // A hand-written server that logs while it starts, before its answer to initialize.
        const [proxySide, serverSide] = InMemoryTransport.createLinkedPair();
        serverSide.onmessage = (raw) => {
          const message = raw as {
            id?: string | number;
            method?: string;
            params?: { protocolVersion?: string };
          };
          if (message.method === "initialize" && message.id !== undefined) {
            void serverSide.send({
              jsonrpc: "2.0",
              method: "notifications/message",
              params: { level: "info", data: "booting" },
            });
            void serverSide.send({
              jsonrpc: "2.0",
              id: message.id,
              result: {
                protocolVersion: message.params?.protocolVersion ?? "2025-06-18",
                capabilities: { logging: {}, tools: {} },
                serverInfo: { name: "raw", version: "1.0.0" },
              },
            });
          } else if (message.method === "tools/list" && message.id !== undefined) {
            void serverSide.send({ jsonrpc: "2.0", id: message.id, result: { tools: [] } });
          }
        };
        void serverSide.start();
        return proxySide;
      },
    });
    cleanups.push(() => http.close());
    const { logs } = await postOnlyClient(new URL(http.url));
    expect(logs).toEqual(["booting"]);
  });
});

describe("idempotool proxy --http, a client that only POSTs", () => {
  it("gets a guarded call's log lines and elicitation on the call's own stream; the effect runs once", async () => {
    const { url, sent } = await proxy();
    const { client, logs, questions } = await postOnlyClient(url);
    const call = { name: "send_message", arguments: { to: "carol", idempotency_key: "streams-1" } };
    // Without the stream of its own, the question never reached the client and the call never finished.
    expect(text(await client.callTool(call, undefined, { timeout: 10_000 }))).toBe("sent to carol");
    expect(questions).toEqual(["Send to carol?"]);
    expect(logs).toEqual(["about to send to carol"]);
    expect(text(await client.callTool(call, undefined, { timeout: 10_000 }))).toBe("sent to carol");
    expect(questions).toHaveLength(1);
    expect(sent).toEqual(["carol"]);
  });

  it("gets the log lines of a tool the proxy passes through", async () => {
    const { url } = await proxy();
    const { client, logs } = await postOnlyClient(url);
    const preview = { name: "preview_message", arguments: { text: "hello" } };
    expect(text(await client.callTool(preview))).toBe("preview: hello");
    expect(logs).toEqual(["previewing hello"]);
  });
});
