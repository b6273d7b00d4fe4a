/**
 * The proxy on the 2026-07-28 revision: a client pinned to it (SDK 2.x, no `initialize`, a `_meta`
 * envelope on every request) in front of a server of either revision: a 1.x McpServer, which only knows
 * `initialize`, or a 2.x McpServer, whose tools may ask for input before they act (multi-round-trip calls).
 * Real SDK clients and servers on both sides, over the SDK's in-memory links; every effect is counted.
 */
import {
  type CallToolResult,
  Client,
  type InMemoryTransport as ClientInMemoryTransport,
  StreamableHTTPClientTransport,
} from "@modelcontextprotocol/client";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { McpServer as McpServerV1 } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { InMemoryTransport, McpServer } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { z as z3 } from "zod/v3";
import { startMcpProxy } from "../src/cli/mcp-proxy.js";
import { type HttpScope, serveHttpProxy } from "../src/cli/proxy-http.js";
import { memoryStore } from "../src/index.js";
import { type IdempotencyInfo, MetaKey } from "../src/mcp/index.js";
import { confirmed, confirmPurchase } from "./fixtures/mcp-v2.js";
import { gate } from "./fixtures/tools.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const envelope = (result: CallToolResult) => result._meta?.[MetaKey.envelope] as IdempotencyInfo | undefined;
const textOf = (result: CallToolResult) =>
  result.content.map((block) => (block.type === "text" ? block.text : `[${block.type}]`)).join("\n");

/**
 * A 1.x McpServer (the 2025 revisions only) whose send_email runs are counted in `sent`, with the `_meta`
 * each run was sent; `before` holds each run before it sends.
 */
function legacyMailServer(sent: string[], metas: unknown[] = [], before?: () => Promise<void>) {
  const server = new McpServerV1({ name: "mail-1x", version: "1.0.0" });
  server.registerTool(
    "send_email",
    { description: "Send an email.", inputSchema: { to: z3.string() } },
    async ({ to }, extra) => {
      await before?.();
      sent.push(to);
      metas.push(extra._meta);
      return { content: [{ type: "text" as const, text: `sent #${sent.length} to ${to}` }] };
    },
  );
  return server;
}

/** A 2.x McpServer on both revisions: send_email, and buy, which asks the client to confirm first. */
function modernShopServer(sent: string[], bought: string[]) {
  const server = new McpServer(
    { name: "shop-2x", version: "1.0.0" },
    { supportedProtocolVersions: ["2026-07-28", "2025-11-25"] },
  );
  server.registerTool(
    "send_email",
    { description: "Send an email.", inputSchema: z.object({ to: z.string() }) },
    async ({ to }) => {
      sent.push(to);
      return { content: [{ type: "text", text: `sent #${sent.length} to ${to}` }] };
    },
  );
  server.registerTool(
    "buy",
    { description: "Buy an item.", inputSchema: z.object({ item: z.string() }) },
    async ({ item }, ctx) => {
      if (!confirmed(ctx.mcpReq.inputResponses)) return confirmPurchase(item);
      bought.push(item);
      return { content: [{ type: "text", text: `bought ${item} (#${bought.length})` }] };
    },
  );
  return server;
}

/**
 * Start the proxy between two fresh in-memory links, the server behind it: a 1.x McpServer connected as
 * such, or a 2.x server factory served as `serveStdio` serves one (each connection's opening message
 * picks the revision).
 */
async function proxyTo(server: McpServerV1 | (() => McpServer)) {
  const [clientSide, proxyFacingClient] = InMemoryTransport.createLinkedPair();
  const [proxyFacingServer, serverSide] = InMemoryTransport.createLinkedPair();
  // Every message the proxy sends the client, as it went on the wire.
  const toClient: Record<string, unknown>[] = [];
  const send = proxyFacingClient.send.bind(proxyFacingClient);
  proxyFacingClient.send = (message, options) => {
    toClient.push(message as Record<string, unknown>);
    return send(message, options);
  };
  if (typeof server === "function") {
    const served = serveStdio(server, { transport: serverSide });
    cleanups.push(() => served.close());
  } else {
    await server.connect(serverSide as unknown as Transport);
    cleanups.push(() => server.close());
  }
  const log: string[] = [];
  const proxy = await startMcpProxy({
    client: proxyFacingClient as unknown as Transport,
    server: proxyFacingServer as unknown as Transport,
    store: memoryStore(),
    rules: new Map(),
    scope: "default",
    log: (line) => log.push(line),
  });
  cleanups.push(() => proxy.close());
  /** The result the client's `server/discover` got, as sent. */
  const discovery = () =>
    toClient.find((message) => String(message.id).startsWith("server-discover"))?.result as
      | { capabilities?: { tools?: Record<string, unknown> }; supportedVersions?: string[] }
      | undefined;
  return { clientSide, log, discovery };
}

/** `idempotool proxy --http` on a free loopback port; `started` counts the servers it started. */
async function httpProxyTo(
  server: () => McpServerV1 | (() => McpServer) | ((serverSide: InMemoryTransport) => void),
  scope: HttpScope = "shared",
  tuning: { maxSessions?: number; discoveryTimeoutMs?: number } = {},
) {
  const counts = { started: 0 };
  const http = await serveHttpProxy({
    ...tuning,
    port: 0,
    host: "127.0.0.1",
    scope,
    within: (name) => name,
    store: memoryStore(),
    rules: new Map(),
    log: () => {},
    Transport: StreamableHTTPServerTransport,
    startServer: () => {
      counts.started++;
      const [proxySide, serverSide] = InMemoryTransport.createLinkedPair();
      const behind = server();
      if (typeof behind === "function" && behind.length === 1) {
        // A hand-written server on the raw link.
        (behind as (serverSide: InMemoryTransport) => void)(serverSide);
      } else if (typeof behind === "function") {
        const served = serveStdio(behind as () => McpServer, { transport: serverSide });
        cleanups.push(() => served.close());
      } else {
        void behind.connect(serverSide as unknown as Transport);
      }
      return proxySide as unknown as Transport;
    },
  });
  cleanups.push(() => http.close());
  return { url: new URL(http.url), counts };
}

/** A 2.x client pinned to the 2026-07-28 revision, confirming every question. */
async function modernClient(transport: unknown) {
  let asked = 0;
  const client = new Client(
    { name: "agent", version: "1.0.0" },
    { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: "2026-07-28" } } },
  );
  client.setRequestHandler("elicitation/create", async () => {
    asked++;
    return { action: "accept", content: { confirm: true } };
  });
  await client.connect(transport as ClientInMemoryTransport);
  cleanups.push(() => client.close());
  return { client, asked: () => asked };
}

describe("a client on the 2026-07-28 revision, through the proxy", () => {
  it("reaches a 1.x server (2025 revisions only): the proxy answers server/discover, a repeat replays", async () => {
    const sent: string[] = [];
    const metas: unknown[] = [];
    const { clientSide, discovery } = await proxyTo(legacyMailServer(sent, metas));
    const { client } = await modernClient(clientSide);
    expect(client.getProtocolEra()).toBe("modern");
    expect(client.getServerVersion()).toMatchObject({ name: "mail-1x" });
    expect(discovery()?.supportedVersions).toEqual(["2026-07-28"]);
    expect(discovery()?.capabilities?.tools?.idempotency).toEqual({ retentionSeconds: 86_400 });

    const { tools } = await client.listTools();
    const sendEmail = tools.find((tool) => tool.name === "send_email");
    expect(sendEmail?.inputSchema.required).toContain("idempotency_key");

    const call = { name: "send_email", arguments: { to: "ada@example.com", idempotency_key: "k-1" } };
    const first = (await client.callTool(call)) as CallToolResult;
    const repeat = (await client.callTool(call)) as CallToolResult;
    expect(textOf(first)).toBe("sent #1 to ada@example.com");
    expect(envelope(repeat)?.was_replay).toBe(true);
    expect(sent).toEqual(["ada@example.com"]);
    // A 2025 server is sent 2025 requests: the 2026 envelope stays with the proxy.
    expect(JSON.stringify(metas)).not.toContain("io.modelcontextprotocol/");
  });

  it("reaches a 2.x server on the same revision: a repeat replays", async () => {
    const sent: string[] = [];
    const { clientSide, discovery } = await proxyTo(() => modernShopServer(sent, []));
    const { client } = await modernClient(clientSide);
    expect(discovery()?.capabilities?.tools?.idempotency).toEqual({ retentionSeconds: 86_400 });
    const call = { name: "send_email", arguments: { to: "ada@example.com", idempotency_key: "k-1" } };
    const first = (await client.callTool(call)) as CallToolResult;
    const repeat = (await client.callTool(call)) as CallToolResult;
    expect(textOf(first)).toBe("sent #1 to ada@example.com");
    expect(envelope(repeat)?.was_replay).toBe(true);
    expect(sent).toEqual(["ada@example.com"]);
  });

  it("runs a multi-round-trip call once: the question is never recorded, the purchase is replayed", async () => {
    const bought: string[] = [];
    const { clientSide } = await proxyTo(() => modernShopServer([], bought));
    const { client, asked } = await modernClient(clientSide);
    const call = { name: "buy", arguments: { item: "lamp", idempotency_key: "order-1" } };
    const first = (await client.callTool(call)) as CallToolResult;
    const repeat = (await client.callTool(call)) as CallToolResult;
    expect(textOf(first)).toBe("bought lamp (#1)");
    expect(envelope(repeat)?.was_replay).toBe(true);
    expect(bought).toEqual(["lamp"]);
    expect(asked()).toBe(1);
  });
});

describe("a client on a 2025 revision, through the proxy", () => {
  it("reaches a 2.x server: a repeat replays", async () => {
    const sent: string[] = [];
    const { clientSide } = await proxyTo(() => modernShopServer(sent, []));
    const client = new ClientV1({ name: "agent", version: "1.0.0" });
    await client.connect(clientSide as unknown as Transport);
    cleanups.push(() => client.close());
    const call = { name: "send_email", arguments: { to: "ada@example.com", idempotency_key: "k-1" } };
    await client.callTool(call);
    const repeat = (await client.callTool(call)) as CallToolResult;
    expect(envelope(repeat)?.was_replay).toBe(true);
    expect(sent).toEqual(["ada@example.com"]);
  });
});

describe("clients on the 2026-07-28 revision, through idempotool proxy --http", () => {
  const overHttp = (url: URL, headers: Record<string, string> = {}) =>
    modernClient(new StreamableHTTPClientTransport(url, { requestInit: { headers } }));
  const call = { name: "send_email", arguments: { to: "ada@example.com", idempotency_key: "k-1" } };

  it("share one copy of a 1.x server, request by request: a repeat from another client replays", async () => {
    const sent: string[] = [];
    const { url, counts } = await httpProxyTo(() => legacyMailServer(sent));
    const { client: first } = await overHttp(url);
    const { client: second } = await overHttp(url);
    expect(first.getProtocolEra()).toBe("modern");

    const original = (await first.callTool(call)) as CallToolResult;
    const repeat = (await second.callTool(call)) as CallToolResult;
    expect(textOf(original)).toBe("sent #1 to ada@example.com");
    expect(envelope(repeat)?.was_replay).toBe(true);
    expect(sent).toEqual(["ada@example.com"]);
    expect(counts.started).toBe(1);
  });

  it("runs a multi-round-trip call on a 2.x server once, and replays the purchase", async () => {
    const bought: string[] = [];
    const { url } = await httpProxyTo(() => () => modernShopServer([], bought));
    const { client, asked } = await overHttp(url);
    const buy = { name: "buy", arguments: { item: "lamp", idempotency_key: "order-1" } };
    const first = (await client.callTool(buy)) as CallToolResult;
    const repeat = (await client.callTool(buy)) as CallToolResult;
    expect(textOf(first)).toBe("bought lamp (#1)");
    expect(envelope(repeat)?.was_replay).toBe(true);
    expect(bought).toEqual(["lamp"]);
    expect(asked()).toBe(1);
  });

  it("run a call whose response was cut once: the client's re-issue, under a new id, gets the original answer", async () => {
    const sent: string[] = [];
    const started = gate();
    const release = gate();
    const { url } = await httpProxyTo(() =>
      legacyMailServer(sent, [], async () => {
        started.open();
        await release.opened;
      }),
    );
    const cut = new AbortController();
    const envelope2026 = {
      "io.modelcontextprotocol/protocolVersion": "2026-07-28",
      "io.modelcontextprotocol/clientCapabilities": {},
    };
    const first = fetch(url, {
      method: "POST",
      signal: cut.signal,
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 7,
        method: "tools/call",
        params: { ...call, _meta: envelope2026 },
      }),
    });
    await started.opened;
    cut.abort();
    await expect(first).rejects.toThrow();

    const { client } = await overHttp(url);
    const reissue = client.callTool(call) as Promise<CallToolResult>;
    release.open();
    expect(textOf(await reissue)).toContain("sent #1 to ada@example.com");
    expect(envelope(await reissue)?.was_replay).toBe(true);
    expect(sent).toEqual(["ada@example.com"]);
  });

  it("under --scope client, keep each credential's keys apart, and refuse a request without one", async () => {
    const sent: string[] = [];
    const { url, counts } = await httpProxyTo(() => legacyMailServer(sent), "client");
    const { client: alice } = await overHttp(url, { authorization: "Bearer alice" });
    const { client: bob } = await overHttp(url, { authorization: "Bearer bob" });
    await alice.callTool(call);
    const fromBob = (await bob.callTool(call)) as CallToolResult;
    const fromAliceAgain = (await alice.callTool(call)) as CallToolResult;
    expect(envelope(fromBob)?.was_replay).toBe(false);
    expect(envelope(fromAliceAgain)?.was_replay).toBe(true);
    expect(sent).toHaveLength(2);
    expect(counts.started).toBe(2);
    await expect(overHttp(url)).rejects.toThrow();
  });

  it("under --scope session, refuse them with a reason: they have no session to key by", async () => {
    const { url, counts } = await httpProxyTo(() => legacyMailServer([]), "session");
    await expect(overHttp(url)).rejects.toThrow();
    const answer = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "server/discover", params: {} }),
    });
    expect(answer.status).toBe(400);
    expect(await answer.text()).toContain("--scope shared or --scope client");
    expect(counts.started).toBe(0);
  });
});

type Raw = Record<string, unknown>;

/** The 2026-07-28 envelope of a client called `name`. */
const envelopeOf2026 = (name: string, capabilities: Raw = {}) => ({
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientInfo": { name, version: "1.0.0" },
  "io.modelcontextprotocol/clientCapabilities": capabilities,
});

/** A raw POST to the proxy, and the messages of its answer (server-sent events or one JSON body). */
async function post(url: URL, body: Raw, headers: Record<string, string> = {}) {
  const response = await fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...headers,
    },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  const messages = text.startsWith("{")
    ? [JSON.parse(text) as Raw]
    : text
        .split("\n")
        .filter((line) => line.startsWith("data: "))
        .map((line) => JSON.parse(line.slice(6)) as Raw);
  return { status: response.status, messages, last: messages.at(-1), headers: response.headers };
}

const overHttpClient = (url: URL) => modernClient(new StreamableHTTPClientTransport(url));

describe("the 2026-07-28 bridge, against what an unlucky or hostile peer does", () => {
  it("never sends one client's log lines or progress to another client of the shared relay", async () => {
    const alicePaid = gate();
    const bobAsked = gate();
    const reached = { alice: gate(), bob: gate() };
    const { url } = await httpProxyTo(() => {
      const server = new McpServerV1({ name: "bank", version: "1.0.0" }, { capabilities: { logging: {} } });
      server.registerTool(
        "charge_card",
        { description: "Charge a card.", inputSchema: { owner: z3.string() } },
        async ({ owner }, extra) => {
          reached.alice.open();
          await alicePaid.opened;
          // A 2025 server says which call a log line is about only in its text.
          await extra.sendNotification({
            method: "notifications/message",
            params: { level: "info", data: `charging the card of ${owner}` },
          });
          const token = extra._meta?.progressToken;
          if (token !== undefined) {
            await extra.sendNotification({
              method: "notifications/progress",
              params: { progressToken: token, progress: 1, message: `card of ${owner} charged` },
            });
          }
          return { content: [{ type: "text" as const, text: `charged ${owner}` }] };
        },
      );
      server.registerTool(
        "get_balance",
        {
          description: "Read a balance.",
          inputSchema: { owner: z3.string() },
          annotations: { readOnlyHint: true },
        },
        async ({ owner }) => {
          reached.bob.open();
          await bobAsked.opened;
          return { content: [{ type: "text" as const, text: `balance of ${owner}: 0` }] };
        },
      );
      return server;
    });
    const call = (id: string, name: string, args: Raw, meta: Raw, auth: string, signal?: AbortSignal) =>
      fetch(url, {
        method: "POST",
        signal: signal ?? null,
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          authorization: auth,
        },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id,
          method: "tools/call",
          params: { name, arguments: args, _meta: meta },
        }),
      }).then((response) => response.text());
    // Alice asks for progress, then her connection drops while her call runs on; Bob asks for every log line.
    const dropped = new AbortController();
    const alice = call(
      "1",
      "charge_card",
      { owner: "alice", idempotency_key: "a-1" },
      { ...envelopeOf2026("alice-agent"), progressToken: "alice-progress" },
      "Bearer alice",
      dropped.signal,
    ).catch(() => "dropped");
    await reached.alice.opened;
    const bob = call(
      "1",
      "get_balance",
      { owner: "bob" },
      {
        ...envelopeOf2026("bob-agent"),
        "io.modelcontextprotocol/logLevel": "debug",
        progressToken: "bob-progress",
      },
      "Bearer bob",
    );
    await reached.bob.opened;
    dropped.abort();
    expect(await alice).toBe("dropped");
    alicePaid.open();
    // The server's log line and progress about Alice's call come while only Bob's request is open.
    await new Promise((resolve) => setTimeout(resolve, 100));
    bobAsked.open();
    const bobHeard = await bob;
    expect(bobHeard).toContain("balance of bob: 0");
    expect(bobHeard).not.toContain("alice");
  });

  it("passes a 2025 server's log lines only to a request that asked, at or above its level", async () => {
    const server = new McpServerV1({ name: "chatty", version: "1.0.0" }, { capabilities: { logging: {} } });
    server.registerTool(
      "send_email",
      { description: "Send an email.", inputSchema: { to: z3.string() } },
      async ({ to }, extra) => {
        for (const level of ["debug", "warning"] as const) {
          await extra.sendNotification({ method: "notifications/message", params: { level, data: level } });
        }
        return { content: [{ type: "text" as const, text: `sent to ${to}` }] };
      },
    );
    const { clientSide } = await proxyTo(server);
    const heard: Raw[] = [];
    const answered = new Map<unknown, () => void>();
    clientSide.onmessage = (message) => {
      heard.push(message as Raw);
      answered.get((message as Raw).id)?.();
    };
    await clientSide.start();
    const logLines = async (key: string, logLevel?: string) => {
      heard.length = 0;
      const meta = {
        ...envelopeOf2026("agent"),
        ...(logLevel ? { "io.modelcontextprotocol/logLevel": logLevel } : {}),
      };
      const answer = new Promise<void>((resolve) => answered.set(key, resolve));
      await clientSide.send({
        jsonrpc: "2.0",
        id: key,
        method: "tools/call",
        params: {
          name: "send_email",
          arguments: { to: "ada@example.com", idempotency_key: key },
          _meta: meta,
        },
      });
      await answer;
      return heard
        .filter((message) => message.method === "notifications/message")
        .map((message) => (message.params as Raw).data);
    };
    // The revision forbids log lines for a request that names no level; a 2025 server sends them all.
    expect(await logLines("quiet")).toEqual([]);
    expect(await logLines("warnings", "warning")).toEqual(["warning"]);
    expect(await logLines("everything", "debug")).toEqual(["debug", "warning"]);
  });

  it("sends each client's guarded call with that client's own envelope, whoever spoke last", async () => {
    const seenBy: string[] = [];
    const bought: string[] = [];
    const listed = gate();
    const release = gate();
    const { url } = await httpProxyTo(() => (serverSide: InMemoryTransport) => {
      // The answer to the proxy's first tools/list is held, so the calls below wait for it.
      const send = serverSide.send.bind(serverSide);
      let held = false;
      serverSide.send = async (message, options) => {
        const raw = message as Raw;
        if (
          !held &&
          String(raw.id).startsWith("idempotool-proxy-") &&
          Array.isArray((raw.result as Raw)?.tools)
        ) {
          held = true;
          listed.open();
          await release.opened;
        }
        return send(message, options);
      };
      const served = serveStdio(
        () => {
          const server = modernShopServer([], bought);
          server.registerTool(
            "create_note",
            { description: "Create a note.", inputSchema: z.object({ text: z.string() }) },
            async ({ text }, ctx) => {
              const envelope = ctx.mcpReq.envelope as Record<string, { name?: string }> | undefined;
              const info = envelope?.["io.modelcontextprotocol/clientInfo"];
              seenBy.push(String(info?.name));
              return { content: [{ type: "text", text: `note ${text} by ${info?.name}` }] };
            },
          );
          return server;
        },
        { transport: serverSide },
      );
      cleanups.push(() => served.close());
    });
    const alice = envelopeOf2026("alice", { elicitation: { form: {} } });
    const call = (id: number, name: string, args: Raw) =>
      post(url, {
        jsonrpc: "2.0",
        id,
        method: "tools/call",
        params: { name, arguments: args, _meta: alice },
      });
    const note = call(1, "create_note", { text: "hi", idempotency_key: "n-1" });
    const buy = call(2, "buy", { item: "lamp", idempotency_key: "order-1" });
    await listed.opened;
    // Bob, who declared no elicitation, speaks while Alice's calls wait.
    const ping = await post(url, {
      jsonrpc: "2.0",
      id: 9,
      method: "ping",
      params: { _meta: envelopeOf2026("bob") },
    });
    expect(ping.status).toBe(200);
    release.open();

    expect(textOf((await note).last?.result as CallToolResult)).toBe("note hi by alice");
    expect(seenBy).toEqual(["alice"]);
    // Alice's purchase is a question for her, not an unknown outcome recorded under her key.
    expect((await buy).last?.result).toMatchObject({ resultType: "input_required" });
    const again = await call(3, "buy", { item: "lamp", idempotency_key: "order-1" });
    expect(again.last?.result).toMatchObject({ resultType: "input_required" });
    expect(bought).toEqual([]);
  });

  it("stops the idlest relay when --max-sessions is reached, instead of refusing everyone after", async () => {
    const { url, counts } = await httpProxyTo(() => legacyMailServer([]), "client", { maxSessions: 2 });
    const discover = (token: string) =>
      post(
        url,
        { jsonrpc: "2.0", id: 1, method: "server/discover", params: { _meta: envelopeOf2026(token) } },
        { authorization: `Bearer ${token}` },
      );
    expect((await discover("a")).status).toBe(200);
    expect((await discover("b")).status).toBe(200);
    expect((await discover("c")).status).toBe(200);
    const initialize = await post(
      url,
      {
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: {
          protocolVersion: "2025-06-18",
          capabilities: {},
          clientInfo: { name: "old", version: "1" },
        },
      },
      { authorization: "Bearer d" },
    );
    expect(initialize.status).toBe(200);
    expect(counts.started).toBe(4);
  });

  it("takes a server that never answers server/discover for a 2025 one, and initializes it", async () => {
    const seen: string[] = [];
    const { url } = await httpProxyTo(
      () => (serverSide: InMemoryTransport) => {
        serverSide.onmessage = (message) => {
          const raw = message as Raw;
          if (typeof raw.method === "string") seen.push(raw.method);
          // It answers what it knows, and nothing else.
          if (raw.method !== "initialize" && raw.method !== "tools/list") return;
          const result =
            raw.method === "tools/list"
              ? { tools: [] }
              : {
                  protocolVersion: "2025-11-25",
                  capabilities: { tools: {} },
                  serverInfo: { name: "quiet", version: "1" },
                };
          void serverSide.send({ jsonrpc: "2.0", id: raw.id as number, result });
        };
        void serverSide.start();
      },
      "shared",
      { discoveryTimeoutMs: 100 },
    );
    const answer = await post(url, {
      jsonrpc: "2.0",
      id: 1,
      method: "server/discover",
      params: { _meta: envelopeOf2026("a") },
    });
    expect(answer.status).toBe(200);
    expect(answer.last?.result).toMatchObject({ supportedVersions: ["2026-07-28"] });
    expect(seen.slice(0, 2)).toEqual(["server/discover", "initialize"]);
  });

  it("treats a 2026 envelope on a session that initialized as _meta: the server is initialized once", async () => {
    const seen: string[] = [];
    const { url } = await httpProxyTo(() => (serverSide: InMemoryTransport) => {
      serverSide.onmessage = (message) => {
        const raw = message as Raw;
        if (typeof raw.method === "string") seen.push(raw.method);
        if (raw.id === undefined) return;
        const result =
          raw.method === "initialize"
            ? {
                protocolVersion: "2025-06-18",
                capabilities: { tools: {} },
                serverInfo: { name: "s", version: "1" },
              }
            : raw.method === "tools/list"
              ? { tools: [] }
              : raw.method === "ping"
                ? {}
                : undefined;
        const id = raw.id as number;
        // A 2025 server: it does not know server/discover.
        void serverSide.send(
          result === undefined
            ? { jsonrpc: "2.0", id, error: { code: -32601, message: "Method not found" } }
            : { jsonrpc: "2.0", id, result },
        );
      };
      void serverSide.start();
    });
    const opened = await post(url, {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "old", version: "1" } },
    });
    const session = {
      "mcp-session-id": opened.headers.get("mcp-session-id") ?? "",
      "mcp-protocol-version": "2025-06-18",
    };
    await post(url, { jsonrpc: "2.0", method: "notifications/initialized" }, session);
    const ping = await post(
      url,
      { jsonrpc: "2.0", id: 2, method: "ping", params: { _meta: envelopeOf2026("x") } },
      session,
    );
    expect(ping.last?.result).toEqual({});
    expect(seen.filter((method) => method === "initialize")).toHaveLength(1);
  });

  it("refuses an initialize carrying the 2026 envelope: the relay other clients share stays theirs", async () => {
    const sent: string[] = [];
    const { url } = await httpProxyTo(() => legacyMailServer(sent));
    const hostile = await post(url, {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "mallory", version: "1" },
        _meta: envelopeOf2026("mallory"),
      },
    });
    expect(hostile.last?.error).toMatchObject({ code: -32600 });
    const { client } = await overHttpClient(url);
    const call = { name: "send_email", arguments: { to: "ada@example.com", idempotency_key: "k-1" } };
    await client.callTool(call);
    expect(envelope((await client.callTool(call)) as CallToolResult)?.was_replay).toBe(true);
    expect(sent).toEqual(["ada@example.com"]);
  });

  it("records a 2025 server's result that says resultType: input_required like any other", async () => {
    const sent: string[] = [];
    const server = new McpServerV1({ name: "mail-1x", version: "1.0.0" });
    server.registerTool(
      "send_email",
      { description: "Send an email.", inputSchema: { to: z3.string() } },
      async ({ to }) => {
        sent.push(to);
        // A 2025 server knows no questions: the field is part of what it answered.
        return {
          content: [{ type: "text" as const, text: `sent #${sent.length}` }],
          resultType: "input_required",
        };
      },
    );
    const { clientSide } = await proxyTo(server);
    const client = new ClientV1({ name: "agent", version: "1.0.0" });
    await client.connect(clientSide as unknown as Transport);
    cleanups.push(() => client.close());
    const call = { name: "send_email", arguments: { to: "ada@example.com", idempotency_key: "k-1" } };
    await client.request({ method: "tools/call", params: call }, z3.object({}).passthrough());
    await client.request({ method: "tools/call", params: call }, z3.object({}).passthrough());
    expect(sent).toEqual(["ada@example.com"]);
  });
});
