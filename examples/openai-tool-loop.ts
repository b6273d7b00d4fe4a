/**
 * A hand-written OpenAI tool loop (Chat Completions, then the Responses API). The model emits the same
 * `create_ticket` call twice in one response, with two tool-call ids and the arguments in another key
 * order, then again in the next round. runOpenAIToolCalls keys each call per intent in the turn: one
 * ticket, three answers, the repeats marked `was_replay`. A new user message is a new turn and runs again.
 *
 * The real `openai` client runs offline: a fake `fetch` plays the model and checks what the SDK sends.
 * Run: node --import tsx examples/openai-tool-loop.ts   (checks itself; exits non-zero on failure)
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loopTool, runOpenAIResponsesCalls, runOpenAIToolCalls } from "idempotool/loops";
import { sqliteStore } from "idempotool/sqlite";
import OpenAI from "openai";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import type { ResponseInputItem } from "openai/resources/responses/responses";

// --- The tool: creating a ticket is an effect; a second call makes a second ticket. --------------------
interface TicketArgs {
  title: string;
  priority: "low" | "high";
}
const tickets: TicketArgs[] = [];

const dir = mkdtempSync(join(tmpdir(), "idempotool-openai-"));
const store = sqliteStore({ path: join(dir, "idempotency.db") });

const createTicket = loopTool(
  async (args: TicketArgs) => {
    tickets.push(args);
    return { ticketId: `T-${100 + tickets.length}` };
  },
  {
    name: "create_ticket",
    store,
    effect: "irreversible",
    parse: (input) => {
      const { title, priority } = (input ?? {}) as Partial<TicketArgs>;
      if (typeof title !== "string" || (priority !== "low" && priority !== "high")) {
        throw new TypeError('create_ticket needs a title and a priority of "low" or "high"');
      }
      return { title, priority };
    },
  },
);
const toolDefinitions: ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "create_ticket",
      description: "Open a support ticket",
      parameters: {
        type: "object",
        properties: { title: { type: "string" }, priority: { type: "string", enum: ["low", "high"] } },
        required: ["title", "priority"],
      },
    },
  },
];

// --- A scripted model behind a fake fetch ---------------------------------------------------------------
const script: unknown[] = [];
const sent: { messages?: ChatCompletionMessageParam[]; input?: ResponseInputItem[] }[] = [];
const client = new OpenAI({
  apiKey: "sk-offline",
  baseURL: "https://openai.invalid/v1",
  maxRetries: 0,
  fetch: async (_url, init) => {
    sent.push(JSON.parse(String(init?.body)));
    return new Response(JSON.stringify(script.shift()), { headers: { "content-type": "application/json" } });
  },
});

const args = { title: "Printer on fire", priority: "high" };
const toolCalls = (...ids: string[]) => ({
  id: "chatcmpl-1",
  object: "chat.completion",
  created: 0,
  model: "gpt-offline",
  choices: [
    {
      index: 0,
      finish_reason: "tool_calls",
      message: {
        role: "assistant",
        content: null,
        refusal: null,
        tool_calls: ids.map((id, i) => ({
          id,
          type: "function",
          // The second emission writes the same arguments in another key order.
          function: {
            name: "create_ticket",
            arguments:
              i % 2 ? JSON.stringify({ priority: args.priority, title: args.title }) : JSON.stringify(args),
          },
        })),
      },
    },
  ],
});
const answer = (content: string) => ({
  id: "chatcmpl-2",
  object: "chat.completion",
  created: 0,
  model: "gpt-offline",
  choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content, refusal: null } }],
});

/** One line per answer the model reads. */
function summary(json: string): string {
  const answer = JSON.parse(json) as { result?: { ticketId: string }; was_replay?: boolean; error?: unknown };
  if (answer.error) return `error ${JSON.stringify(answer.error)}`;
  return `${answer.result?.ticketId}${answer.was_replay ? " (was_replay: the tool did not run again)" : ""}`;
}

/** The application's loop: ask, run the tool calls, answer them, until the model stops calling tools. */
async function chatTurn(messages: ChatCompletionMessageParam[], turnId: string): Promise<string> {
  for (let round = 0; round < 5; round++) {
    const completion = await client.chat.completions.create({
      model: "gpt-offline",
      messages,
      tools: toolDefinitions,
    });
    const message = completion.choices[0]!.message;
    messages.push(message);
    if (!message.tool_calls?.length) return message.content ?? "";
    const results = await runOpenAIToolCalls(message, [createTicket], { turnId, scope: "user-42" });
    for (const result of results) console.log(`  ${result.tool_call_id} -> ${summary(result.content)}`);
    messages.push(...results);
  }
  throw new Error("the model kept calling tools");
}

// --- Chat Completions: turn 1 ----------------------------------------------------------------------------
script.push(toolCalls("call_1", "call_2"), toolCalls("call_3"), answer("Ticket T-101 is open."));
const chat: ChatCompletionMessageParam[] = [
  { role: "user", content: "The printer is on fire, open a ticket" },
];
console.log("chat, turn 1:");
await chatTurn(chat, "user-msg-1");
assert.equal(tickets.length, 1, "one ticket for three calls of one intent");
// What the SDK sent the model after round 1: one tool message per call id, the second a replay.
const afterRound1 = sent[1]!.messages!.filter((m) => m.role === "tool");
assert.deepEqual(
  afterRound1.map((m) =>
    m.role === "tool" ? [m.tool_call_id, JSON.parse(String(m.content)).was_replay] : [],
  ),
  [
    ["call_1", false],
    ["call_2", true],
  ],
);
const afterRound2 = sent[2]!.messages!.at(-1)!;
assert.equal(afterRound2.role, "tool");
assert.equal(JSON.parse(String(afterRound2.content)).result.ticketId, "T-101");

// --- Chat Completions: turn 2, the user asks for another ticket -------------------------------------------
script.push(toolCalls("call_9"), answer("Opened T-102."));
chat.push({ role: "user", content: "It caught fire again. Open another one." });
console.log("chat, turn 2:");
await chatTurn(chat, "user-msg-2");
assert.equal(tickets.length, 2, "a new turn is a new intent");

// --- The Responses API: function_call items in, function_call_output items out ---------------------------
const functionCall = (callId: string) => ({
  type: "function_call",
  id: `fc_${callId}`,
  call_id: callId,
  name: "create_ticket",
  arguments: JSON.stringify(args),
  status: "completed",
});
const response = (output: unknown[]) => ({ id: "resp_1", object: "response", status: "completed", output });
script.push(
  response([functionCall("fc_call_1"), functionCall("fc_call_2")]),
  response([{ type: "message", role: "assistant", content: [{ type: "output_text", text: "Done." }] }]),
);
const input: ResponseInputItem[] = [{ role: "user", content: "Open a ticket: the printer is on fire" }];
console.log("responses, turn 3:");
for (let round = 0; round < 5; round++) {
  const result = await client.responses.create({ model: "gpt-offline", input });
  input.push(...(result.output as ResponseInputItem[]));
  const outputs = await runOpenAIResponsesCalls(result, [createTicket], {
    turnId: "user-msg-3",
    scope: "user-42",
  });
  if (outputs.length === 0) break;
  for (const output of outputs) console.log(`  ${output.call_id} -> ${summary(output.output)}`);
  input.push(...outputs);
}
assert.equal(tickets.length, 3, "one more ticket for the new turn, not two");
const outputs = sent.at(-1)!.input!.filter((item) => "type" in item && item.type === "function_call_output");
assert.equal(outputs.length, 2);

await store.close();
rmSync(dir, { recursive: true, force: true });
console.log(`OK: 6 tool calls over 3 turns, ${tickets.length} tickets, one per intent.`);
