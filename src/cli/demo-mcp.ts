/**
 * The demo's MCP row: an MCP server exposes send_email through `registerIdempotentTool`, and its client
 * re-sends the same `tools/call` (same idempotency_key, a new JSON-RPC id), as a transport retry does.
 * Loaded by a dynamic `import()`: it needs @modelcontextprotocol/sdk and zod.
 * @module
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { type IdempotencyInfo, MetaKey, registerIdempotentTool } from "../mcp/index.js";
import { deliverEmail, type IntegrationContext } from "./demo-integrations.js";

export async function runMcpRow({ store, outbox, scope, email }: IntegrationContext): Promise<string[]> {
  const server = new McpServer({ name: "mail", version: "1.0.0" });
  registerIdempotentTool(
    server,
    "send_email",
    {
      description: "Send an email.",
      inputSchema: { to: z.string(), subject: z.string(), body: z.string() },
    },
    (args, _extra, context) => {
      const { messageId } = deliverEmail(outbox, args, context.scope, context.key);
      return { content: [{ type: "text", text: `Sent ${messageId} to ${args.to}.` }] };
    },
    { store, effect: "irreversible", scope: () => scope },
  );
  const [clientTransport, serverTransport] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: "agent-host", version: "1.0.0" });
  try {
    await server.connect(serverTransport);
    await client.connect(clientTransport);
    return await callTwice(client, {
      name: "send_email",
      arguments: { ...email, idempotency_key: "mcp-turn-7-summary" },
    });
  } finally {
    await client.close();
    await server.close();
  }
}

/**
 * Sends one `tools/call` and then its re-send: each `callTool` is a new JSON-RPC request id, as a
 * transport retry's is. What each got: `sent`, `replay` or `error: …`.
 */
export async function callTwice(client: Client, call: Parameters<Client["callTool"]>[0]): Promise<string[]> {
  const got: string[] = [];
  for (let attempt = 0; attempt < 2; attempt++) {
    got.push(outcomeOf((await client.callTool(call)) as CallToolResult));
  }
  return got;
}

function outcomeOf(result: CallToolResult): string {
  const text = result.content.map((item) => (item.type === "text" ? item.text : "")).join(" ");
  if (result.isError) return `error: ${text}`;
  const info = result._meta?.[MetaKey.envelope] as IdempotencyInfo | undefined;
  return info?.was_replay ? "replay" : "sent";
}
