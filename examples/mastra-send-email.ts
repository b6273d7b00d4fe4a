/**
 * Mastra: a model emits `send_email` twice in one response (two tool call ids; Mastra runs both). With
 * idempotentTool the email goes out once and the repeat reads `was_replay: true`; the user's next message
 * asking again sends again. Then a workflow step that sends a reminder and suspends for a human's approval
 * of the email: Mastra runs the step again from the top on resume, the reminder goes out once (keyFromStep),
 * and the approved email goes out once although the saved run is resumed twice, each time on a fresh
 * storage loaded from its serialised snapshot (a retry after a crash, on another machine, say).
 *
 * The model is a script (the AI SDK's MockLanguageModelV3), so this runs offline.
 * Run: node --import tsx examples/mastra-send-email.ts   (checks itself; exits non-zero on failure)
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent } from "@mastra/core/agent";
import type { MastraModelConfig } from "@mastra/core/llm";
import { Mastra } from "@mastra/core/mastra";
import { InMemoryStore } from "@mastra/core/storage";
import { createTool } from "@mastra/core/tools";
import { createStep, createWorkflow } from "@mastra/core/workflows";
import { MockLanguageModelV3 } from "ai/test";
import { idempotent } from "idempotool";
import { approve, isApprovalRequest } from "idempotool/langgraph";
import { approvalRequest, idempotentStep, idempotentTool, keyFromStep, runApproved } from "idempotool/mastra";
import { sqliteStore } from "idempotool/sqlite";
import { z } from "zod";

/** Stands in for an email provider without idempotency keys: every call sends. */
const outbox: { to: string; subject: string }[] = [];
async function deliver(to: string, subject: string): Promise<{ messageId: string }> {
  outbox.push({ to, subject });
  return { messageId: `msg-${outbox.length}` };
}

type Part =
  | { type: "tool-call"; toolCallId: string; toolName: string; input: string }
  | { type: "text"; text: string };
const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};
/**
 * A model that plays `script`: request n gets response n. Mastra keeps its own copy of the model
 * specification's types, which a mock from another AI SDK release does not match by name, though it
 * runs: hence the cast.
 */
function scripted(script: Part[][]): MastraModelConfig {
  let next = 0;
  const model = new MockLanguageModelV3({
    doGenerate: async () => {
      const content = script[next++];
      assert.ok(content, "the script ran out");
      const calls = content.some((part) => part.type === "tool-call");
      return {
        content,
        finishReason: { unified: calls ? "tool-calls" : "stop", raw: undefined },
        usage,
        warnings: [],
      };
    },
  });
  return model as unknown as MastraModelConfig;
}
const email = { to: "alice@example.com", subject: "Summary", body: "Here it is." };
const sendCall = (toolCallId: string): Part => ({
  type: "tool-call",
  toolCallId,
  toolName: "send_email",
  input: JSON.stringify(email),
});

const dir = mkdtempSync(join(tmpdir(), "idempotool-mastra-"));
const store = sqliteStore({ path: join(dir, "idempotency.db") });

try {
  // 1. The same call twice in one response, then the user asks again in a new run.
  const sendEmail = createTool(
    idempotentTool(
      {
        id: "send_email",
        description: "Send an email",
        inputSchema: z.object({ to: z.string(), subject: z.string(), body: z.string() }),
        execute: async ({ to, subject }) => deliver(to, subject),
      },
      // One user's conversation: keys of two users never meet.
      { store, scope: "user-42", intentFields: ["to", "subject"] },
    ),
  );
  const agent = new Agent({
    id: "mailer",
    name: "mailer",
    instructions: "Send what the user asks for.",
    model: scripted([
      [sendCall("c1"), sendCall("c2")],
      [{ type: "text", text: "sent" }],
      [sendCall("c3")],
      [{ type: "text", text: "sent again" }],
    ]),
    tools: { send_email: sendEmail },
  });
  const first = await agent.generate("Send Alice the summary");
  const replays = first.toolResults.map(
    (part) => (part.payload.result as { was_replay: boolean }).was_replay,
  );
  console.log(`run 1: ${outbox.length} email for 2 calls; replays: ${replays.join(", ")}`);
  assert.equal(outbox.length, 1);
  assert.deepEqual(replays.sort(), [false, true]);

  await agent.generate("Send it to her again, please");
  console.log(`run 2: ${outbox.length} emails (the user asked again)`);
  assert.equal(outbox.length, 2);

  // 2. A workflow step: a reminder before the suspend, the approved email after it.
  const send = idempotent(async (args: { to: string; subject: string }) => deliver(args.to, args.subject), {
    name: "send_email",
    store,
  });
  const review = idempotentStep(
    createStep({
      id: "review_and_send",
      inputSchema: z.object({ to: z.string() }),
      outputSchema: z.object({ status: z.string() }),
      execute: async (params) => {
        const { to } = params.inputData;
        // Runs on the first pass and again on every resume: the key makes the re-runs replays.
        await send(
          { to: "me@example.com", subject: `Review the email to ${to}` },
          { key: keyFromStep(params, "remind") },
        );
        const args = { to, subject: "Summary" };
        const key = keyFromStep(params, "send_email");
        if (params.resumeData === undefined) return params.suspend(approvalRequest(send, args, { key }));
        if ((params.resumeData as { approved?: unknown }).approved !== true) return { status: "rejected" };
        const sent = await runApproved(send, args, params.resumeData, { key });
        return { status: sent.was_replay ? "already sent" : "sent" };
      },
    }),
  );
  const workflow = createWorkflow({
    id: "review",
    inputSchema: z.object({ to: z.string() }),
    outputSchema: z.object({ status: z.string() }),
  })
    .then(review)
    .commit();
  const onStorage = (storage: InMemoryStore) =>
    new Mastra({ workflows: { review: workflow }, storage, logger: false }).getWorkflow("review");

  const storage = new InMemoryStore();
  const run = await onStorage(storage).createRun();
  const paused = await run.start({ inputData: { to: "alice@example.com" } });
  assert.equal(paused.status, "suspended");
  const request = paused.suspendPayload.review_and_send;
  assert.ok(isApprovalRequest(request), "the step suspends with an approval request");
  console.log(
    `approval asked for ${request.tool} to ${(request.args as { to: string }).to}; ${outbox.length} emails`,
  );

  // What the run left in storage, as another process would read it.
  const workflows = await storage.getStore("workflows");
  assert.ok(workflows);
  const saved = JSON.stringify((await workflows.listWorkflowRuns({})).runs);

  for (const attempt of [1, 2]) {
    const fresh = new InMemoryStore();
    const target = await fresh.getStore("workflows");
    assert.ok(target);
    for (const row of JSON.parse(saved) as { workflowName: string; runId: string; snapshot: unknown }[]) {
      const snapshot = typeof row.snapshot === "string" ? JSON.parse(row.snapshot) : row.snapshot;
      await target.persistWorkflowSnapshot({ workflowName: row.workflowName, runId: row.runId, snapshot });
    }
    const again = await onStorage(fresh).createRun({ runId: run.runId });
    const resumed = await again.resume({ step: "review_and_send", resumeData: approve(request) });
    assert.ok(resumed.status === "success", `resume ${attempt} ended ${resumed.status}`);
    const { status } = resumed.result as { status: string };
    console.log(`resume ${attempt}: ${status}; ${outbox.length} emails in all`);
  }
  assert.equal(outbox.length, 4);
  console.log(
    "OK: 3 send_email calls by the model, 2 emails; the reminder and the approved email once each over a suspend and two resumes.",
  );
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
