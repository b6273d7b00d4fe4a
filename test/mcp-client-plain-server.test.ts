/**
 * A server that does not deduplicate by the key in `_meta` (a plain McpServer tool, any third-party server):
 * by default the wrapper does not retry, so a lost reply is reported as an unknown outcome instead of
 * becoming a second effect. Retries are for servers that deduplicate, and the caller opts in to them.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { expect, it } from "vitest";
import { z } from "zod";
import { idempotentClient } from "../src/mcp-client/index.js";

it("by default does not retry: one lost reply from a plain server is an unknown outcome, and one email", async () => {
  const sent: string[] = [];
  const server = new McpServer({ name: "mail", version: "1.0.0" });
  server.registerTool(
    "send_email",
    { description: "Send an email.", inputSchema: { to: z.string() } },
    async ({ to }) => {
      sent.push(to);
      return { content: [{ type: "text", text: `sent to ${to}` }] };
    },
  );
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  let drop = 1;
  const fromServer = serverSide.send.bind(serverSide);
  serverSide.send = async (message: JSONRPCMessage, options) => {
    if ("result" in message && drop > 0 && (message.result as { content?: unknown }).content) {
      drop--;
      return;
    }
    await fromServer(message, options);
  };
  await server.connect(serverSide);
  const client = new Client({ name: "agent", version: "1.0.0" });
  await client.connect(clientSide);
  const mcp = idempotentClient(client, { retry: { timeoutMs: 150, initialDelayMs: 0 } });

  const result = await mcp.callTool({ name: "send_email", arguments: { to: "ann" } });

  try {
    expect(sent).toEqual(["ann"]);
    expect(result.isError).toBe(true);
    expect(result._meta?.["idempotool/error"]).toMatchObject({ code: "outcome_unknown", attempts: 1 });
  } finally {
    await client.close();
    await server.close();
  }
});
