/**
 * OpenAI Agents SDK: a model emits `send_email` twice in one response (two call ids; the SDK runs both).
 * With idempotentTool the email goes out once and the repeat reads `was_replay: true`; the user's next
 * message asking again sends again. Then a tool with `needsApproval`: the run stops for a human, the
 * approval is bound to (key, fingerprint), the run is saved as a string and resumed twice (a retry
 * after a crash, say) on the same SQLite file, and the approved email goes out once.
 *
 * The model is a script (an object with `getResponse`), so this runs offline.
 * Run: node --import tsx examples/openai-agents-send-email.ts   (checks itself; exits non-zero on failure)
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  Agent,
  type Model,
  type ModelResponse,
  RunState,
  run,
  setTracingDisabled,
  tool,
  Usage,
} from "@openai/agents";
import { approvalRequest, approve, idempotentTool } from "idempotool/openai-agents";
import { sqliteStore } from "idempotool/sqlite";
import { z } from "zod";

setTracingDisabled(true);

/** Stands in for an email provider without idempotency keys: every call sends. */
const outbox: { to: string; subject: string }[] = [];
async function deliver(to: string, subject: string): Promise<{ messageId: string }> {
  outbox.push({ to, subject });
  return { messageId: `msg-${outbox.length}` };
}

/** A model that plays `script`: request n gets response n. */
function scripted(script: ModelResponse["output"][]): Model {
  let next = 0;
  return {
    async getResponse() {
      const output = script[next++];
      assert.ok(output, "the script ran out");
      return { usage: new Usage(), output };
    },
    getStreamedResponse() {
      throw new Error("not streamed here");
    },
  };
}

type OutputItem = ModelResponse["output"][number];
const sendCall = (callId: string): OutputItem => ({
  type: "function_call",
  callId,
  name: "send_email",
  arguments: JSON.stringify({ to: "alice@example.com", subject: "Summary", body: "Here it is." }),
  status: "completed",
});
const reply = (text: string): OutputItem => ({
  type: "message",
  role: "assistant",
  status: "completed",
  id: `msg-${text}`,
  content: [{ type: "output_text", text }],
});

const dir = mkdtempSync(join(tmpdir(), "idempotool-openai-agents-"));
const path = join(dir, "idempotency.db");
const store = sqliteStore({ path });

/** The options of tool(), passed through idempotentTool first. */
function sendEmailOptions(needsApproval: boolean) {
  return idempotentTool(
    {
      name: "send_email",
      description: "Send an email",
      parameters: z.object({ to: z.string(), subject: z.string(), body: z.string() }),
      needsApproval,
      execute: async ({ to, subject }) => deliver(to, subject),
    },
    // One user's conversation: keys of two users never meet.
    { store, scope: "user-42", intentFields: ["to", "subject"] },
  );
}

try {
  // 1. The same call twice in one response, then the user asks again in a new run.
  const agent = new Agent({
    name: "mailer",
    model: scripted([
      [sendCall("c1"), sendCall("c2")],
      [reply("sent")],
      [sendCall("c3")],
      [reply("sent again")],
    ]),
    tools: [tool(sendEmailOptions(false))],
  });
  const first = await run(agent, "Send Alice the summary");
  const outputs = first.newItems.filter((item) => item.type === "tool_call_output_item");
  const envelopes = outputs.map((item) => item.output as { was_replay: boolean });
  console.log(
    `run 1: ${outbox.length} email for 2 calls; replays: ${envelopes.map((e) => e.was_replay).join(", ")}`,
  );
  assert.equal(outbox.length, 1);
  assert.deepEqual(envelopes.map((e) => e.was_replay).sort(), [false, true]);

  await run(agent, "Send it to her again, please");
  console.log(`run 2: ${outbox.length} emails (the user asked again)`);
  assert.equal(outbox.length, 2);

  // 2. An approval, saved with the run and resumed twice.
  const options = sendEmailOptions(true);
  const reviewed = new Agent({ name: "mailer", model: scripted([[sendCall("c4")]]), tools: [tool(options)] });
  const paused = await run(reviewed, "Send Alice the summary");
  const [item] = paused.interruptions;
  assert.ok(item, "the run waits for approval");
  const request = approvalRequest(options, paused.state, item);
  console.log(`approval asked for ${request.tool} to ${(request.args as { to: string }).to}`);
  approve(paused.state, item, request);
  const saved = paused.state.toString();

  for (const attempt of [1, 2]) {
    const resumer = new Agent({ name: "mailer", model: scripted([[reply("sent")]]), tools: [tool(options)] });
    const resumed = await run(resumer, await RunState.fromString(resumer, saved));
    console.log(`resume ${attempt}: ${resumed.finalOutput}; ${outbox.length} emails in all`);
  }
  assert.equal(outbox.length, 3);
  console.log("OK: 5 send_email calls, 3 emails, one per intent; the approved one once over two resumes.");
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
