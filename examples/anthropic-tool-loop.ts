/**
 * A hand-written Anthropic tool loop. Claude emits `send_email` twice in one message (two `tool_use`
 * ids), the agent process restarts between two rounds of the same turn, and Claude re-emits the call with
 * a reworded body. runAnthropicToolUses keys each call per intent (recipient and subject) in the turn: one
 * email, the repeats answered as replays. A different intent in the same turn (a second recipient) runs,
 * and so does the same email asked for in a new turn.
 *
 * The real `@anthropic-ai/sdk` client runs offline: a fake `fetch` plays the model and checks what the
 * SDK sends. Run: node --import tsx examples/anthropic-tool-loop.ts   (checks itself; exits non-zero on failure)
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import type { MessageParam, Tool } from "@anthropic-ai/sdk/resources/messages";
import { type LoopTool, loopTool, runAnthropicToolUses } from "idempotool/loops";
import { type SqliteStore, sqliteStore } from "idempotool/sqlite";

interface Email {
  to: string;
  subject: string;
  body: string;
}
/** Stands in for an email provider without idempotency keys: every call sends. */
const outbox: Email[] = [];

const dir = mkdtempSync(join(tmpdir(), "idempotool-anthropic-"));
const dbPath = join(dir, "idempotency.db");

/** What the agent process builds at start-up: its tools, on the SQLite file every restart shares. */
function startAgent(): { store: SqliteStore; tools: LoopTool[] } {
  const store = sqliteStore({ path: dbPath });
  const sendEmail = loopTool(
    async (email: Email) => {
      outbox.push(email);
      return { messageId: `msg-${outbox.length}`, to: email.to };
    },
    {
      name: "send_email",
      store,
      effect: "irreversible",
      parse: (input) => {
        const { to, subject, body } = (input ?? {}) as Partial<Email>;
        if (typeof to !== "string" || typeof subject !== "string" || typeof body !== "string") {
          throw new TypeError("send_email needs to, subject and body");
        }
        return { to, subject, body };
      },
      // The recipient and subject are the intent; a reworded body in the same turn is the same email.
      intentFields: ["to", "subject"],
      significant: ["to", "subject"],
      // "merge": the model reads the provider's own result, with was_replay beside it.
      output: "merge",
    },
  );
  return { store, tools: [sendEmail] };
}
const toolDefinitions: Tool[] = [
  {
    name: "send_email",
    description: "Send an email",
    input_schema: {
      type: "object",
      properties: { to: { type: "string" }, subject: { type: "string" }, body: { type: "string" } },
      required: ["to", "subject", "body"],
    },
  },
];

// --- A scripted Claude behind a fake fetch ----------------------------------------------------------
const script: unknown[] = [];
const requests: { messages: MessageParam[] }[] = [];
const client = new Anthropic({
  apiKey: "offline",
  baseURL: "https://anthropic.invalid",
  maxRetries: 0,
  fetch: async (_url, init) => {
    requests.push(JSON.parse(String(init?.body)));
    return new Response(JSON.stringify(script.shift()), { headers: { "content-type": "application/json" } });
  },
});
const summary: Email = {
  to: "alice@example.com",
  subject: "Meeting summary",
  body: "Hi Alice, the summary.",
};
const toolUse = (id: string, input: Email) => ({ type: "tool_use", id, name: "send_email", input });
const reply = (content: unknown[], stop: "tool_use" | "end_turn") => ({
  id: "msg_claude",
  type: "message",
  role: "assistant",
  model: "claude-offline",
  content,
  stop_reason: stop,
  stop_sequence: null,
  usage: { input_tokens: 1, output_tokens: 1 },
});

/** One round of the application's loop. Returns whether Claude asked for tools. */
async function round(tools: LoopTool[], messages: MessageParam[], turnId: string): Promise<boolean> {
  const message = await client.messages.create({
    model: "claude-offline",
    max_tokens: 1024,
    tools: toolDefinitions,
    messages,
  });
  messages.push({ role: "assistant", content: message.content });
  if (message.stop_reason !== "tool_use") return false;
  const answer = await runAnthropicToolUses(message, tools, { turnId, scope: "user-42" });
  for (const block of answer.content) {
    const result = JSON.parse(block.content) as { messageId: string; to: string; was_replay: boolean };
    console.log(
      `  ${block.tool_use_id} -> ${result.messageId} to ${result.to}${result.was_replay ? " (was_replay)" : ""}`,
    );
  }
  messages.push(answer);
  return true;
}

// --- Turn 1 ---------------------------------------------------------------------------------------------
script.push(
  reply(
    [{ type: "text", text: "Sending." }, toolUse("toolu_1", summary), toolUse("toolu_2", summary)],
    "tool_use",
  ),
  reply(
    [
      toolUse("toolu_3", { ...summary, body: "Hello Alice, here is the summary." }),
      toolUse("toolu_4", { ...summary, to: "bob@example.com" }),
    ],
    "tool_use",
  ),
  reply([{ type: "text", text: "Sent to Alice and Bob." }], "end_turn"),
);
const messages: MessageParam[] = [{ role: "user", content: "Send the meeting summary to Alice and Bob." }];
console.log("turn 1:");
let agent = startAgent();
assert.equal(await round(agent.tools, messages, "user-msg-1"), true);
// The agent process restarts mid-turn; the records are in the SQLite file.
await agent.store.close();
agent = startAgent();
assert.equal(await round(agent.tools, messages, "user-msg-1"), true);
assert.equal(await round(agent.tools, messages, "user-msg-1"), false);

assert.deepEqual(
  outbox.map((email) => email.to),
  ["alice@example.com", "bob@example.com"],
  "one email per intent: Alice once, Bob once",
);
// What the SDK sent Claude: one tool_result per tool_use id, in order, replays marked.
const round1 = requests[1]!.messages.at(-1)!.content as { tool_use_id: string; content: string }[];
assert.deepEqual(
  round1.map((block) => [block.tool_use_id, JSON.parse(block.content).was_replay]),
  [
    ["toolu_1", false],
    ["toolu_2", true],
  ],
);
const round2 = requests[2]!.messages.at(-1)!.content as { tool_use_id: string; content: string }[];
assert.deepEqual(
  round2.map((block) => [block.tool_use_id, JSON.parse(block.content).was_replay]),
  [
    ["toolu_3", true],
    ["toolu_4", false],
  ],
);

// --- Turn 2: the user asks again -----------------------------------------------------------------------
script.push(
  reply([toolUse("toolu_5", summary)], "tool_use"),
  reply([{ type: "text", text: "Sent again." }], "end_turn"),
);
messages.push({ role: "user", content: "Alice lost it. Send her the summary again." });
console.log("turn 2:");
while (await round(agent.tools, messages, "user-msg-2"));
assert.equal(outbox.length, 3, "a new turn is a new intent: Alice gets it again");

await agent.store.close();
rmSync(dir, { recursive: true, force: true });
console.log(`OK: 5 send_email calls over 2 turns and a restart, ${outbox.length} emails, one per intent.`);
