/**
 * An MCP client that retries tool calls safely. The server's `send_invoice` takes its idempotency key
 * from the request's `_meta` (the model never sees it); the connection between client and server loses
 * replies, so the client times out and sends the call again. idempotentClient gives each logical call one
 * key and sends it on every retry: each invoice goes out once, and a retry gets the original outcome.
 *
 * Run: node --import tsx examples/mcp-client-retries.ts   (checks itself; exits non-zero on failure)
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult, JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { memoryStore } from "idempotool";
import { type IdempotencyErrorInfo, type IdempotencyInfo, registerIdempotentTool } from "idempotool/mcp";
import { idempotentClient } from "idempotool/mcp-client";
import { z } from "zod";

// --- The server: an invoice tool whose key comes from _meta. ----------------------------------------
const invoices: { customer: string; key: string }[] = [];
const server = new McpServer({ name: "billing", version: "1.0.0" });
registerIdempotentTool(
  server,
  "send_invoice",
  { description: "Email an invoice to a customer.", inputSchema: { customer: z.string() } },
  async ({ customer }, _extra, { key }) => {
    invoices.push({ customer, key });
    return { content: [{ type: "text", text: `Invoice #${invoices.length} sent to ${customer}.` }] };
  },
  // A memory store keeps the example short; use SQLite, PostgreSQL or Redis in a real server.
  { store: memoryStore(), keyFrom: { argument: "hidden" } },
);

// --- A connection that loses the next `lose` replies to tools/call (the requests still arrive). -------
const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
let lose = 0;
let sent = 0;
const toServer = clientSide.send.bind(clientSide);
clientSide.send = async (message: JSONRPCMessage, options) => {
  if ("method" in message && message.method === "tools/call") sent++;
  await toServer(message, options);
};
const toClient = serverSide.send.bind(serverSide);
serverSide.send = async (message: JSONRPCMessage, options) => {
  const isReply =
    "id" in message && !("method" in message) && "result" in message && "content" in message.result;
  if (isReply && lose > 0) {
    lose--;
    return;
  }
  await toClient(message, options);
};
await server.connect(serverSide);
const client = new Client({ name: "agent", version: "1.0.0" });
await client.connect(clientSide);

// --- The client: one key per logical call, the same on every retry. ----------------------------------
const billing = idempotentClient(client, { retry: { maxAttempts: 3, timeoutMs: 200, initialDelayMs: 50 } });
const text = (result: CallToolResult) =>
  result.content.map((item) => (item.type === "text" ? item.text : "")).join(" ");
const info = (result: CallToolResult) => result._meta?.["idempotool/envelope"] as IdempotencyInfo | undefined;

try {
  // 1. No reply is lost: sent once, answered at once.
  const first = await billing.callTool({ name: "send_invoice", arguments: { customer: "Acme" } });
  assert.equal(info(first)?.was_replay, false);
  console.log(`call 1 (no loss): ${text(first)}`);

  // 2. Two replies are lost: the third attempt, under the same key, gets the original outcome back.
  lose = 2;
  const second = await billing.callTool({ name: "send_invoice", arguments: { customer: "Globex" } });
  assert.equal(info(second)?.was_replay, true);
  assert.match(text(second), /^Invoice #2 sent to Globex\./);
  console.log(`call 2 (2 replies lost, ${sent - 1} requests so far): ${text(second)}`);

  // 3. Every reply is lost: the model is told the outcome is unknown, with the key to retry under.
  lose = 3;
  const third = await billing.callTool({ name: "send_invoice", arguments: { customer: "Initech" } });
  const error = third._meta?.["idempotool/error"] as IdempotencyErrorInfo;
  assert.equal(third.isError, true);
  assert.equal(error.code, "outcome_unknown");
  assert.match(text(third), /may or may not have happened/);
  console.log(`call 3 (every reply lost): ${text(third).slice(0, 120)}…`);

  // 4. Later, a retry under that key learns what happened: it had, once.
  const checked = await billing.callTool(
    { name: "send_invoice", arguments: { customer: "Initech" } },
    { idempotencyKey: error.idempotency_key },
  );
  assert.equal(info(checked)?.was_replay, true);
  console.log(`call 4 (retry of call 3 under its key): ${text(checked)}`);

  assert.deepEqual(
    invoices.map((invoice) => invoice.customer),
    ["Acme", "Globex", "Initech"],
  );
  assert.equal(new Set(invoices.map((invoice) => invoice.key)).size, 3);
  console.log(`OK: ${sent} requests, ${invoices.length} invoices, one per logical call.`);
} finally {
  await client.close();
  await server.close();
}
