// Run inside a fresh project that holds the latest release of every peer and the packed idempotool:
// one counted repeat through the AI SDK, node-redis and @ai-sdk/mcp integrations, as a user would write it.
// Prints one JSON line with what ran; exits non-zero when an assertion fails.
import assert from "node:assert/strict";
import { createMCPClient } from "@ai-sdk/mcp";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { generateText, stepCountIs, tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { idempotent, memoryStore } from "idempotool";
import { idempotentTools } from "idempotool/ai-sdk";
import { registerIdempotentTool } from "idempotool/mcp";
import { idempotentMcpTools } from "idempotool/mcp-client";
import { redisStore } from "idempotool/redis";
import { createClient } from "redis";
import { z } from "zod";

const versions = {};
for (const name of ["ai", "redis", "@ai-sdk/mcp", "idempotool"]) {
  versions[name] = (await import(`${name}/package.json`, { with: { type: "json" } })).default.version;
}

// AI SDK: the model emits the same call twice in one step and again in the next.
const sent = [];
const tools = idempotentTools(
  {
    send_email: tool({
      inputSchema: z.object({ to: z.string() }),
      execute: async ({ to }) => {
        sent.push(to);
        return { messageId: `m-${sent.length}` };
      },
    }),
  },
  { store: memoryStore() },
);
const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};
const call = (id) => ({ type: "tool-call", toolCallId: id, toolName: "send_email", input: '{"to":"ann"}' });
const step = (content, unified) => ({
  content,
  finishReason: { unified, raw: unified },
  usage,
  warnings: [],
});
await generateText({
  model: new MockLanguageModelV3({
    doGenerate: [
      step([call("a"), call("b")], "tool-calls"),
      step([call("c")], "tool-calls"),
      step([{ type: "text", text: "sent" }], "stop"),
    ],
  }),
  tools,
  stopWhen: stepCountIs(5),
  prompt: "Email Ann",
});
assert.equal(sent.length, 1, "the AI SDK integration ran the tool once for three identical calls");

// node-redis: a repeat under the same key replays.
const redis = createClient({ url: process.env.REDIS_URL ?? "redis://127.0.0.1:6379" });
await redis.connect();
let charges = 0;
const charge = idempotent(
  async ({ cents }) => {
    charges++;
    return { charged: cents };
  },
  { name: "charge", store: redisStore({ client: redis, prefix: `peers-app:${process.pid}:${Date.now()}:` }) },
);
const first = await charge({ cents: 500 }, { key: "order-1" });
const again = await charge({ cents: 500 }, { key: "order-1" });
await redis.close();
assert.equal(charges, 1, "the node-redis store ran the tool once");
assert.equal(again.was_replay, true);
assert.deepEqual(again.result, first.result);

// @ai-sdk/mcp: the first reply is lost; the client retries under the same key and gets a replay.
const server = new McpServer({ name: "mail", version: "1.0.0" });
let emails = 0;
registerIdempotentTool(
  server,
  "send_email",
  { description: "Send an email.", inputSchema: { to: z.string() } },
  async ({ to }) => {
    emails++;
    return { content: [{ type: "text", text: `sent to ${to}` }] };
  },
  { store: memoryStore(), keyFrom: { argument: "hidden" } },
);
const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
const reply = serverSide.send.bind(serverSide);
let dropped = 0;
serverSide.send = async (message, options) => {
  const answersCall =
    "id" in message && "result" in message && JSON.stringify(message.result).includes("sent to");
  if (answersCall && dropped === 0) {
    dropped++;
    return;
  }
  await reply(message, options);
};
await server.connect(serverSide);
const mcp = idempotentMcpTools({ retry: { maxAttempts: 3, timeoutMs: 200, initialDelayMs: 0 } });
const client = await createMCPClient({ transport: mcp.transport(clientSide) });
const mcpTools = mcp.tools(await client.tools());
const result = await mcpTools.send_email.execute(
  { to: "ann" },
  { toolCallId: "t1", messages: [], context: undefined },
);
await client.close();
assert.equal(dropped, 1, "one reply was lost");
assert.equal(emails, 1, "the @ai-sdk/mcp client's retry replayed instead of sending again");
assert.match(JSON.stringify(result), /sent to ann/);

console.log(JSON.stringify({ versions, sent: sent.length, charges, emails }));
