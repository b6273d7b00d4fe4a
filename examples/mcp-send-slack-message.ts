/**
 * Case 4 of docs/operation-models.md: an MCP server exposes `send_slack_message`; the client's transport
 * retries on timeout, and Slack's `chat.postMessage` does not dedupe. With registerIdempotentTool the
 * tool requires an `idempotency_key`, the server dedupes on it (SQLite, so it survives restarts), and
 * every repeat of one intent posts once.
 *
 * Run: node --import tsx examples/mcp-send-slack-message.ts   (checks itself; exits non-zero on failure)
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { type IdempotencyInfo, registerIdempotentTool } from "idempotool/mcp";
import { sqliteStore } from "idempotool/sqlite";
import { z } from "zod";

/** Stands in for Slack's Web API: like `chat.postMessage`, it posts every time it is called. */
class FakeSlack {
  readonly posts: { channel: string; text: string; ts: string }[] = [];
  latencyMs = 0;

  async postMessage(channel: string, text: string): Promise<{ ts: string }> {
    await new Promise((resolve) => setTimeout(resolve, this.latencyMs));
    const ts = `1700000000.${String(this.posts.length + 1).padStart(6, "0")}`;
    this.posts.push({ channel, text, ts });
    return { ts };
  }
}

const dir = mkdtempSync(join(tmpdir(), "idempotool-example-"));
const store = sqliteStore({ path: join(dir, "idempotency.db") });
const slack = new FakeSlack();

// --- The server: one side-effectful tool, registered idempotently. ---------------------------------
const server = new McpServer({ name: "slack", version: "1.0.0" });
registerIdempotentTool(
  server,
  "send_slack_message",
  {
    title: "Send a Slack message",
    description: "Post a message to a Slack channel.",
    inputSchema: { channel: z.string().describe("Channel name, like #deploys"), text: z.string() },
    outputSchema: { channel: z.string(), ts: z.string() },
    annotations: { destructiveHint: false, openWorldHint: true },
  },
  async ({ channel, text }) => {
    const { ts } = await slack.postMessage(channel, text);
    const output = { channel, ts };
    return {
      content: [{ type: "text", text: `Posted to ${channel} (ts ${ts}).` }],
      structuredContent: output,
    };
  },
  // A posted message cannot be unposted: if the tool dies mid-call, fail closed rather than post twice.
  { store, effect: "irreversible" },
);

// --- The client: what an agent host does on the model's behalf. -----------------------------------
const [clientTransport, serverTransport] = InMemoryTransport.createLinkedPair();
const client = new Client({ name: "agent-host", version: "1.0.0" });
await server.connect(serverTransport);
await client.connect(clientTransport);

async function send(args: Record<string, unknown>, timeout?: number): Promise<CallToolResult> {
  const options = timeout === undefined ? undefined : { timeout };
  return (await client.callTool(
    { name: "send_slack_message", arguments: args },
    undefined,
    options,
  )) as CallToolResult;
}
const text = (result: CallToolResult) =>
  result.content.map((item) => (item.type === "text" ? item.text : `[${item.type}]`)).join(" | ");
const wasReplay = (result: CallToolResult) =>
  (result.structuredContent?._idempotency as IdempotencyInfo | undefined)?.was_replay;

try {
  // 1. What the model sees in tools/list.
  const { tools } = await client.listTools();
  const tool = tools.find((t) => t.name === "send_slack_message");
  assert.ok(tool);
  assert.ok(tool.inputSchema.required?.includes("idempotency_key"));
  assert.equal(tool.annotations?.idempotentHint, true);
  assert.equal(tool.annotations?.destructiveHint, false);
  const keySchema = tool.inputSchema.properties?.idempotency_key as { description: string };
  assert.match(keySchema.description, /dedupes within 24 hours/);
  console.log(`tools/list: idempotency_key is required. "${keySchema.description}"`);

  // 2. The model picks a key for its intent and calls. Slack is slow today; the transport gives up
  //    after 100 ms and re-sends the same tools/call (a new JSON-RPC id) while the first one still runs.
  const announce = { channel: "#deploys", text: "v2.3.1 is live", idempotency_key: "turn-3-announce-v2.3.1" };
  slack.latencyMs = 300;
  await assert.rejects(send(announce, 100), /Request timed out/);
  console.log("call 1: the client timed out after 100 ms (the server is still posting)");
  const retried = await send(announce);
  slack.latencyMs = 0;
  assert.equal(slack.posts.length, 1);
  assert.equal(wasReplay(retried), true);
  console.log(`call 2 (transport retry, same key): ${text(retried)}`);

  // 3. The model emits the same call again in its next step.
  const duplicate = await send(announce);
  assert.equal(wasReplay(duplicate), true);
  assert.deepEqual(duplicate.structuredContent?.ts, retried.structuredContent?.ts);
  console.log(`call 3 (model repeats itself): replay, ts ${String(duplicate.structuredContent?.ts)}`);

  // 4. Same key, different text: a caller bug, refused, nothing posted.
  const conflict = await send({ ...announce, text: "v2.3.1 is live!" });
  assert.equal(conflict.isError, true);
  assert.match(text(conflict), /Do not retry with new arguments under this key/);
  console.log(`call 4 (same key, new text): ${text(conflict)}`);

  // 5. No key at all: the SDK's input validation refuses it before the tool runs.
  const { idempotency_key: _, ...noKey } = announce;
  const missing = await send(noKey);
  assert.equal(missing.isError, true);
  assert.match(text(missing), /idempotency_key is required/);
  console.log(`call 5 (no key): ${text(missing)}`);

  // 6. A new intent gets a new key, and posts.
  const followUp = await send({
    channel: "#deploys",
    text: "Rollout at 100%",
    idempotency_key: "turn-4-rollout",
  });
  assert.equal(wasReplay(followUp), false);
  console.log(`call 6 (new intent, new key): ${text(followUp)}`);

  assert.deepEqual(
    slack.posts.map((post) => post.text),
    ["v2.3.1 is live", "Rollout at 100%"],
  );
  console.log(`OK: 6 calls, ${slack.posts.length} Slack messages, one per intent.`);
} finally {
  await client.close();
  await server.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
