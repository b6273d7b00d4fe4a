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
import { z } from "zod";
import { deliverEmail, type IntegrationContext } from "./demo-integrations.js";
import { callTwice } from "./demo-mcp.js";
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
    return await callTwice(client, {
      name: "send_email",
      arguments: { ...email, idempotency_key: "proxy-turn-7-summary" },
    });
  } finally {
    await client.close();
    await proxy.close();
    await server.close();
  }
}
