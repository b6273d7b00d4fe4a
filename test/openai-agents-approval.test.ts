/**
 * Human approval on the real OpenAI Agents SDK: `needsApproval` interrupts the run, the approval is bound
 * to (key, fingerprint) and travels in the saved `RunState`, and the process that resumes it runs the
 * approved call once, or nothing at all when the arguments are not the approved ones.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RunState, run } from "@openai/agents";
import { afterEach, describe, expect, it } from "vitest";
import { ApprovalMismatchError, isIdempotencyError, memoryStore } from "../src/index.js";
import { approvalRequest, approve } from "../src/openai-agents/index.js";
import { call, type Email, mailer, says, scriptedModel } from "./fixtures/openai-agents-mailer.js";
import { startWorker } from "./fixtures/worker-process.js";

const alice = { to: "alice@example.com", subject: "Summary", body: "Here it is." };

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "idempotool-openai-agents-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** What the resuming process printed. */
interface Resumed {
  readonly sent: Email[];
  readonly seen?: Record<string, unknown>;
  readonly error?: string;
  readonly cause?: string;
}

/** Resume the saved run in a new Node process on the shared SQLite file; what it sent and read. */
async function resumeElsewhere(state: string, database: string): Promise<Resumed> {
  const statePath = join(tempDir(), "state.json");
  writeFileSync(statePath, state);
  const { code, stdout, stderr } = await startWorker("openai-agents-resume.ts", [statePath, database]).exited;
  expect(code, stderr).toBe(0);
  return JSON.parse(stdout.trim().split("\n").at(-1) ?? "{}") as Resumed;
}

/**
 * The saved run with the approved call's recipient changed everywhere it appears, the SDK's own record of
 * the approved invocation included: code that rewrote the call and approved it again, say.
 */
function toMallory(saved: string): string {
  const edited = saved.replaceAll("alice@example.com", "mallory@example.com");
  expect(edited).not.toBe(saved);
  return edited;
}

describe("approvals", () => {
  it("asks once per intent: the same call emitted twice gets two interruptions with one key, and sends once", async () => {
    const sent: Email[] = [];
    const model = scriptedModel([[call("c1", alice), call("c2", alice)], [says("sent")]]);
    const { agent, sendEmailOptions } = mailer({ store: memoryStore(), model, sent, needsApproval: true });

    const first = await run(agent, "Send Alice the summary");
    expect(sent).toEqual([]);
    const requests = first.interruptions.map((item) => approvalRequest(sendEmailOptions, first.state, item));
    expect(requests.map((request) => request.call_id)).toEqual(["c1", "c2"]);
    expect(requests[0]?.key).toBe(requests[1]?.key);
    expect(requests[0]?.args).toEqual(alice);
    for (const [index, item] of first.interruptions.entries()) {
      const request = requests[index];
      if (request === undefined) throw new Error("expected a request per interruption");
      approve(first.state, item, request);
    }

    const resumed = await run(agent, first.state);

    expect(resumed.finalOutput).toBe("sent");
    expect(sent).toEqual([alice]);
  });

  it("approves a tool whose records go under another name than the one the model calls", async () => {
    const sent: Email[] = [];
    const model = scriptedModel([[call("c1", alice)], [says("sent")]]);
    const { agent, sendEmailOptions } = mailer({
      store: memoryStore(),
      model,
      sent,
      needsApproval: true,
      idempotency: { name: "outbound_email" },
    });

    const first = await run(agent, "Send Alice the summary");
    const [item] = first.interruptions;
    if (item === undefined) throw new Error("expected an interruption");
    const request = approvalRequest(sendEmailOptions, first.state, item);
    expect([request.tool, request.call_name]).toEqual(["outbound_email", "send_email"]);
    approve(first.state, item, request);
    await run(agent, first.state);

    expect(sent).toEqual([alice]);
  });

  it("does not carry an approval into the next run that uses the same context object", async () => {
    const sent: Email[] = [];
    const model = scriptedModel([
      [call("c1", alice)],
      [says("sent")],
      [call("c1", alice)],
      [says("sent again")],
    ]);
    const { agent, sendEmailOptions } = mailer({ store: memoryStore(), model, sent, needsApproval: true });
    const context = { user: "u-1" };

    const first = await run(agent, "Send Alice the summary", { context });
    const [item] = first.interruptions;
    if (item === undefined) throw new Error("expected an interruption");
    approve(first.state, item, approvalRequest(sendEmailOptions, first.state, item));
    await run(agent, first.state);
    expect(sent).toHaveLength(1);

    // The next message, with the same context object; this script reuses the call id.
    const second = await run(agent, "Send it again", { context });
    expect(second.interruptions).toHaveLength(1);
    second.state.approve(second.interruptions[0] as never);
    await run(agent, second.state);

    expect(sent).toEqual([alice, alice]);
  });

  it("resumes in another process and sends the approved email exactly once, even when the resume is retried", async () => {
    const database = join(tempDir(), "idempotency.db");
    const model = scriptedModel([[call("c1", alice)]]);
    const { agent, sendEmailOptions } = mailer({
      store: memoryStore(),
      model,
      sent: [],
      needsApproval: true,
    });
    const first = await run(agent, "Send Alice the summary");
    const [item] = first.interruptions;
    if (item === undefined) throw new Error("expected an interruption");
    approve(first.state, item, approvalRequest(sendEmailOptions, first.state, item));
    const saved = first.state.toString();

    const resumed = await resumeElsewhere(saved, database);
    expect(resumed.sent).toEqual([alice]);
    expect(resumed.seen).toMatchObject({ c1: { result: { messageId: "m-1" }, was_replay: false } });

    // The first resume crashed after sending, say: the same saved state is resumed again.
    const retried = await resumeElsewhere(saved, database);
    expect(retried.sent).toEqual([]);
    expect(retried.seen).toMatchObject({ c1: { result: { messageId: "m-1" }, was_replay: true } });
  });

  it("control: without the bound approval, a retried resume in another process sends again", async () => {
    const database = join(tempDir(), "idempotency.db");
    const model = scriptedModel([[call("c1", alice)]]);
    const { agent } = mailer({ store: memoryStore(), model, sent: [], needsApproval: true });
    const first = await run(agent, "Send Alice the summary");
    const [item] = first.interruptions;
    if (item === undefined) throw new Error("expected an interruption");
    first.state.approve(item);
    const saved = first.state.toString();

    expect((await resumeElsewhere(saved, database)).sent).toEqual([alice]);
    expect((await resumeElsewhere(saved, database)).sent).toEqual([alice]);
  });

  it("refuses, and sends nothing, when the saved run's arguments differ from the approved ones", async () => {
    const database = join(tempDir(), "idempotency.db");
    const model = scriptedModel([[call("c1", alice)]]);
    const { agent, sendEmailOptions } = mailer({
      store: memoryStore(),
      model,
      sent: [],
      needsApproval: true,
    });
    const first = await run(agent, "Send Alice the summary");
    const [item] = first.interruptions;
    if (item === undefined) throw new Error("expected an interruption");
    approve(first.state, item, approvalRequest(sendEmailOptions, first.state, item));

    const resumed = await resumeElsewhere(toMallory(first.state.toString()), database);

    expect(resumed).toEqual({ sent: [], error: "ToolCallError", cause: "ApprovalMismatchError" });
  });

  it("control: the SDK's own approval runs whatever recipient the saved run names", async () => {
    const database = join(tempDir(), "idempotency.db");
    const model = scriptedModel([[call("c1", alice)]]);
    const { agent } = mailer({ store: memoryStore(), model, sent: [], needsApproval: true });
    const first = await run(agent, "Send Alice the summary");
    const [item] = first.interruptions;
    if (item === undefined) throw new Error("expected an interruption");
    first.state.approve(item);

    const resumed = await resumeElsewhere(toMallory(first.state.toString()), database);

    expect(resumed.sent).toEqual([{ ...alice, to: "mallory@example.com" }]);
  });

  it("refuses an approval given for other arguments than the interruption's, and approves nothing", async () => {
    const sent: Email[] = [];
    const model = scriptedModel([[call("c1", alice)], [call("c2", { ...alice, body: "Changed." })]]);
    const { agent, sendEmailOptions } = mailer({ store: memoryStore(), model, sent, needsApproval: true });
    const shown = await run(agent, "Send Alice the summary");
    const other = await run(agent, "Send Alice the summary");
    const [shownItem] = shown.interruptions;
    const [otherItem] = other.interruptions;
    if (shownItem === undefined || otherItem === undefined) throw new Error("expected interruptions");
    const request = approvalRequest(sendEmailOptions, shown.state, shownItem);

    let refused: unknown;
    try {
      approve(other.state, otherItem, request);
    } catch (error) {
      refused = error;
    }

    expect(refused).toBeInstanceOf(ApprovalMismatchError);
    expect(isIdempotencyError(refused, "idempotency_key_conflict")).toBe(true);
    const saved = JSON.parse(other.state.toString()) as { context: { approvals: Record<string, unknown> } };
    expect(saved.context.approvals).toEqual({});
    const restored = await RunState.fromString(agent, other.state.toString());
    expect(restored.getInterruptions()).toHaveLength(1);
  });
});
