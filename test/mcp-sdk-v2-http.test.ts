/**
 * idempotool/mcp on the MCP TypeScript SDK 2.x over HTTP, through the SDK's stateless `createMcpHandler`
 * (a new McpServer per request), with a v2 Client pinned to the 2026-07-28 revision: multi-round-trip
 * calls, and the scope of a key taken from the authenticated client.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { type IdempotencyStore, memoryStore } from "../src/index.js";
import { registerIdempotentTool } from "../src/mcp/index.js";
import { idempotentClient } from "../src/mcp-client/index.js";
import { cleanups, confirmed, confirmPurchase, envelope, mailServer, textOf } from "./fixtures/mcp-v2.js";

/**
 * The SDK's stateless HTTP handler on a local port, a new McpServer per request from `factory`. A request's
 * `x-client` header stands in for its verified OAuth client, as a real auth layer would set `authInfo`.
 * `replace` may swap the server's response for another on its way out (a gateway's error, say).
 */
async function serveStateless(
  factory: () => McpServer,
  replace: (request: Request, response: Response) => Promise<Response> = async (_, response) => response,
): Promise<URL> {
  const handler = createMcpHandler(factory);
  const server = serve({
    fetch: async (request: Request) => {
      const clientId = request.headers.get("x-client");
      const response = await handler.fetch(
        request.clone(),
        clientId === null ? {} : { authInfo: { token: clientId, clientId, scopes: [] } },
      );
      return replace(request, response);
    },
    port: 0,
    hostname: "127.0.0.1",
    createServer,
  });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  cleanups.push(async () => {
    await handler.close();
    await new Promise((resolve) => server.close(resolve));
  });
  return new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`);
}

/** A v2 Client on the 2026-07-28 revision (multi-round-trip calls), answering elicitations with `answer`. */
async function modernClient(
  url: URL,
  answer: () => Record<string, string | number | boolean>,
  headers: Record<string, string> = {},
) {
  const client = new Client(
    { name: "agent", version: "1.0.0" },
    { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: "2026-07-28" } } },
  );
  client.setRequestHandler("elicitation/create", async () => ({ action: "accept", content: answer() }));
  await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers } }));
  cleanups.push(() => client.close());
  return client;
}

describe("stateless HTTP on the 2026-07-28 revision (createMcpHandler)", () => {
  /** A purchase tool that asks the client to confirm (a multi-round-trip call) before it buys. */
  function shopFactory(store: IdempotencyStore, bought: string[]) {
    return () => {
      const server = new McpServer(
        { name: "shop", version: "1.0.0" },
        { supportedProtocolVersions: ["2026-07-28", "2025-11-25"] },
      );
      registerIdempotentTool(
        server,
        "buy",
        { description: "Buy an item.", inputSchema: z.object({ item: z.string() }) },
        async ({ item }, ctx) => {
          if (!confirmed(ctx.mcpReq.inputResponses)) return confirmPurchase(item);
          bought.push(item);
          return { content: [{ type: "text", text: `bought ${item} (#${bought.length})` }] };
        },
        { store },
      );
      return server;
    };
  }

  it("never records the input-required answer: the continuation buys once, a repeat replays the purchase", async () => {
    const bought: string[] = [];
    const url = await serveStateless(shopFactory(memoryStore(), bought));
    let asked = 0;
    const client = await modernClient(url, () => {
      asked++;
      return { confirm: true };
    });
    expect(client.getProtocolEra()).toBe("modern");
    const call = { name: "buy", arguments: { item: "lamp", idempotency_key: "order-1" } };

    const first = await client.callTool(call);
    const repeat = await client.callTool(call);

    expect(textOf(first)).toBe("bought lamp (#1)");
    expect(envelope(first)?.was_replay).toBe(false);
    expect(envelope(repeat)?.was_replay).toBe(true);
    expect(textOf(repeat)).toContain("bought lamp (#1)");
    expect(bought).toEqual(["lamp"]);
    expect(asked).toBe(1);
  });

  it("scopes keys by the authenticated client the handler was given (ctx.http.authInfo)", async () => {
    const sent: string[] = [];
    const store = memoryStore();
    const url = await serveStateless(() => mailServer(store, sent));
    const alice = await modernClient(url, () => ({}), { "x-client": "alice" });
    const bob = await modernClient(url, () => ({}), { "x-client": "bob" });
    const call = {
      name: "send_email",
      arguments: { to: "team@example.com" },
      _meta: { idempotency_key: "k-1" },
    };

    const fromAlice = await alice.callTool(call);
    const fromBob = await bob.callTool(call);
    const fromAliceAgain = await alice.callTool(call);

    expect(envelope(fromAlice)?.was_replay).toBe(false);
    expect(envelope(fromBob)?.was_replay).toBe(false);
    expect(envelope(fromAliceAgain)?.was_replay).toBe(true);
    expect(sent).toHaveLength(2);
    expect(await store.get({ scope: "client:alice", key: "k-1" }, Date.now())).toBeDefined();
    expect(await store.get({ scope: "client:bob", key: "k-1" }, Date.now())).toBeDefined();
  });
});

describe("idempotentClient against stateless HTTP", () => {
  it("retries a call whose reply a gateway turned into HTTP 502 under the same key: one email, replayed", async () => {
    const sent: string[] = [];
    const store = memoryStore();
    let failed = 0;
    const url = await serveStateless(
      () => mailServer(store, sent),
      async (request, response) => {
        const body = await request.text();
        if (!body.includes('"tools/call"') || failed > 0) return response;
        failed++;
        await response.text(); // the tool ran and its outcome is recorded; its reply is lost
        return new Response("Bad Gateway", { status: 502 });
      },
    );
    const client = await modernClient(url, () => ({}));
    const mail = idempotentClient(client, {
      retry: { maxAttempts: 3, initialDelayMs: 1 },
      clock: { now: () => Date.now(), sleep: async () => {} },
    });

    const result = await mail.callTool({ name: "send_email", arguments: { to: "ann@example.com" } });

    expect(failed).toBe(1);
    expect(result.isError).toBeFalsy();
    expect(envelope(result)?.was_replay).toBe(true);
    expect(sent).toHaveLength(1);
  });
});
