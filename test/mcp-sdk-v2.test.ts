/**
 * idempotool/mcp and idempotool/mcp-client on the MCP TypeScript SDK 2.x (`@modelcontextprotocol/server`,
 * `@modelcontextprotocol/client`): a real v2 McpServer and Client, over the SDK's in-memory link (the 2025
 * era a v2 client speaks by default) and over HTTP through the SDK's stateless `createMcpHandler`, where a
 * client pinned to the 2026-07-28 revision runs multi-round-trip calls.
 */

import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import {
  Client,
  type InMemoryTransport as ClientInMemoryTransport,
  ProtocolError,
} from "@modelcontextprotocol/client";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport as InMemoryTransportV1 } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer as McpServerV1 } from "@modelcontextprotocol/sdk/server/mcp.js";
import { InMemoryTransport, McpServer } from "@modelcontextprotocol/server";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { memoryStore } from "../src/index.js";
import { registerIdempotentTool } from "../src/mcp/index.js";
import { idempotentClient } from "../src/mcp-client/index.js";
import { cleanups, envelope, mailServer, type Result, textOf } from "./fixtures/mcp-v2.js";

/** A v2 Client connected to `server` over the SDK's in-memory link. */
async function connectInMemory(server: McpServer): Promise<Client> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: "agent", version: "1.0.0" });
  await client.connect(clientSide as unknown as ClientInMemoryTransport);
  cleanups.push(
    () => client.close(),
    () => server.close(),
  );
  return client;
}

describe("registerIdempotentTool on a v2 McpServer", () => {
  it("reads the key from the request's _meta, where v2 puts it (ctx.mcpReq._meta): two calls, one email", async () => {
    const sent: string[] = [];
    const client = await connectInMemory(mailServer(memoryStore(), sent));
    const call = {
      name: "send_email",
      arguments: { to: "ann@example.com" },
      _meta: { idempotency_key: "k-1" },
    };

    const first = await client.callTool(call);
    const again = await client.callTool(call);

    expect(first.isError).toBeFalsy();
    expect(textOf(first)).toBe("sent #1 to ann@example.com");
    expect(envelope(again)?.was_replay).toBe(true);
    expect(sent).toHaveLength(1);
  });

  it("takes a zod object as the input schema, adds idempotency_key to it and keeps it strict", async () => {
    const server = new McpServer({ name: "shop", version: "1.0.0" });
    let runs = 0;
    registerIdempotentTool(
      server,
      "refund",
      { inputSchema: z.object({ order: z.string(), cents: z.number().int() }).strict() },
      async ({ order, cents }) => {
        runs++;
        return { content: [{ type: "text", text: `refunded ${cents} on ${order}` }] };
      },
      { store: memoryStore() },
    );
    const client = await connectInMemory(server);

    const [tool] = (await client.listTools()).tools;
    expect(tool?.inputSchema.required).toEqual(["order", "cents", "idempotency_key"]);
    expect(tool?.inputSchema.additionalProperties).toBe(false);
    const call = { name: "refund", arguments: { order: "o-1", cents: 250, idempotency_key: "r-1" } };
    await client.callTool(call);
    const again = await client.callTool(call);
    const stray = await client.callTool({ name: "refund", arguments: { ...call.arguments, note: "x" } });

    expect(envelope(again)?.was_replay).toBe(true);
    expect(stray.isError).toBe(true);
    expect(runs).toBe(1);
  });
});

describe("input-required answers on a 1.x McpServer", () => {
  it("are a result like any other there: recorded and replayed, since 1.x has no multi-round-trip calls", async () => {
    const server = new McpServerV1({ name: "mail", version: "1.0.0" });
    const sent: string[] = [];
    registerIdempotentTool(
      server,
      "send_email",
      { inputSchema: { to: z.string() } },
      async ({ to }) => {
        sent.push(to);
        // An upstream's raw result passed through, say: on 1.x it is what the client gets.
        return { resultType: "input_required", requestState: "s", content: [{ type: "text", text: "sent" }] };
      },
      { store: memoryStore() },
    );
    const [clientSide, serverSide] = InMemoryTransportV1.createLinkedPair();
    await server.connect(serverSide);
    const client = new ClientV1({ name: "agent", version: "1.0.0" });
    await client.connect(clientSide);
    cleanups.push(
      () => client.close(),
      () => server.close(),
    );
    const call = { name: "send_email", arguments: { to: "ann@example.com", idempotency_key: "k-1" } };

    await client.callTool(call);
    const again = await client.callTool(call);

    expect(envelope(again as Result)?.was_replay).toBe(true);
    expect(sent).toEqual(["ann@example.com"]);
  });
});

describe("idempotentClient around a v2 Client", () => {
  it("passes its per-attempt timeout to the v2 callTool(params, options): the retry replays, one email", async () => {
    const sent: string[] = [];
    const server = new McpServer({ name: "mail", version: "1.0.0" });
    let release: () => void = () => {};
    const slowFirstRun = new Promise<void>((resolve) => {
      release = resolve;
    });
    registerIdempotentTool(
      server,
      "send_email",
      { inputSchema: { to: z.string() } },
      async ({ to }) => {
        sent.push(to);
        await slowFirstRun;
        return { content: [{ type: "text", text: `sent to ${to}` }] };
      },
      { store: memoryStore(), keyFrom: { argument: "hidden" } },
    );
    const client = await connectInMemory(server);
    let attempts = 0;
    const mcp = idempotentClient(client, {
      retry: { maxAttempts: 3, timeoutMs: 50, initialDelayMs: 1 },
      // The first attempt times out while the tool runs; the email finishes before the second is sent.
      clock: {
        now: () => Date.now(),
        sleep: async () => {
          attempts++;
          release();
        },
      },
    });

    const result = await mcp.callTool({ name: "send_email", arguments: { to: "ann@example.com" } });

    expect(attempts).toBe(1);
    expect(textOf(result as Result)).toContain("sent to ann@example.com");
    expect(envelope(result as Result)?.was_replay).toBe(true);
    expect(sent).toEqual(["ann@example.com"]);
  });

  it("takes a v2 ProtocolError as the server's definite answer: passed on at once, not retried", async () => {
    const server = new McpServer({ name: "mail", version: "1.0.0" });
    registerIdempotentTool(
      server,
      "send_email",
      { inputSchema: { to: z.string() } },
      async () => ({ content: [{ type: "text", text: "sent" }] }),
      { store: memoryStore() },
    );
    const client = await connectInMemory(server);
    let retries = 0;
    const mcp = idempotentClient(client, {
      retry: { maxAttempts: 3 },
      clock: {
        now: () => Date.now(),
        sleep: async () => {
          retries++;
        },
      },
    });

    const call = mcp.callTool({ name: "send_mail_typo", arguments: { to: "ann@example.com" } });

    await expect(call).rejects.toBeInstanceOf(ProtocolError);
    await expect(call).rejects.toThrow("Tool send_mail_typo not found");
    expect(retries).toBe(0);
  });
});

describe("the types of idempotool/mcp and idempotool/mcp-client", () => {
  /** What the non-test sources of `folder` import (types included), by file. */
  const importsOf = (folder: string) =>
    readdirSync(folder)
      .filter((file) => file.endsWith(".ts") && !file.endsWith(".test.ts"))
      .map((file) => {
        const text = readFileSync(join(folder, file), "utf8");
        const specifiers = [...text.matchAll(/^(?:import|export|\})[^\n]*from "([^"]+)"/gm)].map((m) => m[1]);
        return { file: join(folder, file), specifiers };
      });

  it("import neither SDK, so a project with only one of them compiles against them", () => {
    const importing = [...importsOf("src/mcp"), ...importsOf("src/mcp-client")].filter(({ specifiers }) =>
      specifiers.some((specifier) => specifier?.startsWith("@modelcontextprotocol/")),
    );
    expect(importing).toEqual([]);
  });

  it("leave the client's types free of the AI SDK and of zod, which a client-only project may lack", () => {
    // What idempotool/mcp-client reaches in idempotool/mcp: the result types, nothing of schemas.
    const reached = [
      ...importsOf("src/mcp-client"),
      ...importsOf("src/mcp").filter(({ file }) => file.endsWith("mcp-types.ts")),
    ];
    const offending = reached.filter(({ specifiers }) =>
      specifiers.some(
        (specifier) => specifier === "ai" || specifier?.startsWith("zod") || specifier?.includes("/ai-sdk/"),
      ),
    );
    expect(offending).toEqual([]);
  });
});
