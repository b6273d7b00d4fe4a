/**
 * Vercel AI SDK: a model emits `send_email` twice in one step (two tool-call ids, executed concurrently)
 * and again in the next step. With idempotentTools the email goes out once per intent, every repeat
 * reads `was_replay: true`, and a new user message asking again sends again (Case 2 in
 * docs/operation-models.md), with a hint that a similar email just went out.
 *
 * The model is the AI SDK's MockLanguageModelV3 playing a script, so this runs offline.
 * Run: node --import tsx examples/ai-sdk-send-email.ts   (checks itself; exits non-zero on failure)
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateText, type ModelMessage, stepCountIs, tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { idempotentTools } from "idempotool/ai-sdk";
import { sqliteStore } from "idempotool/sqlite";
import { z } from "zod";

/** Stands in for an email provider without idempotency keys: every call sends. */
const outbox: { to: string; subject: string }[] = [];
async function deliver(to: string, subject: string): Promise<{ messageId: string }> {
  await new Promise((resolve) => setTimeout(resolve, 20));
  outbox.push({ to, subject });
  return { messageId: `msg-${outbox.length}` };
}

const dir = mkdtempSync(join(tmpdir(), "idempotool-ai-sdk-"));
const store = sqliteStore({ path: join(dir, "idempotency.db") });

const tools = idempotentTools(
  {
    send_email: tool({
      description: "Send an email",
      inputSchema: z.object({ to: z.string(), subject: z.string(), body: z.string() }),
      execute: async ({ to, subject }) => deliver(to, subject),
    }),
    get_time: tool({
      description: "The current time",
      inputSchema: z.object({}),
      execute: async () => ({ now: new Date().toISOString() }),
    }),
  },
  {
    store,
    // One user's conversation: keys of two users never meet.
    scope: "user-42",
    only: ["send_email"],
    perTool: {
      send_email: {
        // The recipient and subject name the intent; a reworded body in the same turn is the same email.
        intentFields: ["to", "subject"],
        significant: ["to", "subject"],
        // A new turn that emails the same person within 5 minutes still sends, but the model is told.
        similar: { fields: ["to"], windowMs: 5 * 60_000 },
      },
    },
  },
);

// --- A scripted model -------------------------------------------------------------------------------
const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};
const email = { to: "alice@example.com", subject: "Meeting summary", body: "Hi Alice, here is the summary." };
const sendEmailCall = (id: string, body = email.body) => ({
  type: "tool-call" as const,
  toolCallId: id,
  toolName: "send_email",
  input: JSON.stringify({ ...email, body }),
});
const toolStep = (...content: ReturnType<typeof sendEmailCall>[]) => ({
  content,
  finishReason: { unified: "tool-calls" as const, raw: "tool_calls" },
  usage,
  warnings: [],
});
const textStep = (text: string) => ({
  content: [{ type: "text" as const, text }],
  finishReason: { unified: "stop" as const, raw: "stop" },
  usage,
  warnings: [],
});

const model = new MockLanguageModelV3({
  doGenerate: [
    // Turn 1, step 1: the same call twice in one step, with two ids.
    toolStep(sendEmailCall("call_a"), sendEmailCall("call_b")),
    // Turn 1, step 2: the model re-emits it, reworded.
    toolStep(sendEmailCall("call_c", "Hello Alice, the summary is below.")),
    textStep("I sent Alice the meeting summary."),
    // Turn 2: the user asks again; the model sends again.
    toolStep(sendEmailCall("call_d")),
    textStep("Sent it to Alice again."),
  ],
});

// --- Turn 1 -----------------------------------------------------------------------------------------
const messages: ModelMessage[] = [{ role: "user", content: "Send Alice the meeting summary." }];
const turn1 = await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
messages.push(...turn1.response.messages);

const turn1Outputs = turn1.steps.flatMap((step) =>
  step.toolResults.flatMap((result) =>
    result.dynamic || result.toolName !== "send_email" ? [] : [result.output],
  ),
);
for (const [i, output] of turn1Outputs.entries()) {
  console.log(
    `turn 1, call ${i + 1}: ${output.result.messageId}${output.was_replay ? ` (replay: ${output.note})` : ""}`,
  );
}
assert.equal(outbox.length, 1, "turn 1 sends one email");
assert.equal(turn1Outputs.length, 3);
assert.deepEqual(
  turn1Outputs.map((output) => output.was_replay).sort(),
  [false, true, true],
  "two of the three calls are replays",
);
assert.ok(
  turn1Outputs.every((output) => output.result.messageId === "msg-1"),
  "every call reads the original result",
);

// --- Turn 2: the user asks again --------------------------------------------------------------------
messages.push({ role: "user", content: "Alice says she did not get it. Please send it again." });
const turn2 = await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
const [resent] = turn2.steps[0]!.toolResults.flatMap((result) =>
  result.dynamic || result.toolName !== "send_email" ? [] : [result.output],
);
assert.ok(resent, "turn 2 calls send_email");
console.log(`turn 2: ${resent.result.messageId}; ${resent.note}`);
assert.equal(outbox.length, 2, "a new turn is a new intent: it sends again");
assert.equal(resent.was_replay, false);
assert.equal(resent.recent_similar_call?.idempotency_key, turn1Outputs[0]!.idempotency_key);

await store.close();
rmSync(dir, { recursive: true, force: true });
console.log(`OK: 4 send_email calls over 2 turns, ${outbox.length} emails, one per intent.`);
