/**
 * The demo's proxy row: an MCP server that takes no idempotency key (its send_email sends every time it
 * is called) behind `idempotool proxy`'s relay, and a client that re-sends the same `tools/call` with
 * the idempotency_key the proxy asks for. Loaded by a dynamic `import()`: it needs @modelcontextprotocol/sdk
 * and zod.
 * @module
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { type IdempotencyInfo, MetaKey } from "../mcp/index.js";
import { deliverEmail, type IntegrationContext } from "./demo-integrations.js";
import { startMcpProxy } from "./mcp-proxy.js";

export async function runProxyRow({ store, outbox, scope, email }: IntegrationContext): Promise<string[]> {
  // A server as published: no key, no dedup.
  const server = new McpServer({ name: "mail", version: "1.0.0" });
  server.registerTool(
    "send_email",
    {
      description: "Send an email.",
      inputSchema: { to: z.string(), subject: z.string(), body: z.string() },
    },
    (args) => {
      const { messageId } = deliverEmail(outbox, args, scope, "(the server takes no key)");
      return { content: [{ type: "text", text: `Sent ${messageId} to ${args.to}.` }] };
    },
  );
  const [clientSide, proxyFacingClient] = InMemoryTransport.createLinkedPair();
  const [proxyFacingServer, serverSide] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: "agent-host", version: "1.0.0" });
  await server.connect(serverSide);
  const proxy = await startMcpProxy({
    client: proxyFacingClient,
    server: proxyFacingServer,
    store,
    rules: new Map(),
    scope,
    log: () => undefined,
  });
  try {
    await client.connect(clientSide);
    const call = { name: "send_email", arguments: { ...email, idempotency_key: "proxy-turn-7-summary" } };
    const got: string[] = [];
    // Each callTool is a new JSON-RPC request id; the second one is the client's re-send of the first.
    for (let attempt = 0; attempt < 2; attempt++) {
      got.push(outcomeOf((await client.callTool(call)) as CallToolResult));
    }
    return got;
  } finally {
    await client.close();
    await proxy.close();
    await server.close();
  }
}

function outcomeOf(result: CallToolResult): string {
  const text = result.content.map((item) => (item.type === "text" ? item.text : "")).join(" ");
  if (result.isError) return `error: ${text}`;
  const info = result._meta?.[MetaKey.envelope] as IdempotencyInfo | undefined;
  return info?.was_replay ? "replay" : "sent";
}
