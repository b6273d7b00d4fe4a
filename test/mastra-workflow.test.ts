/**
 * `idempotool/mastra` in real Mastra workflows: a step's body runs again from the top on resume, so an
 * effect before `suspend()` repeats in a plain step and runs once under `keyFromStep`; an approval given
 * at a step's suspend runs exactly the approved call, once, also when the run is resumed from its
 * serialised snapshot on another storage, and other arguments run nothing.
 */
import { Mastra } from "@mastra/core/mastra";
import { InMemoryStore, type InMemoryStore as MastraStorage } from "@mastra/core/storage";
import { createStep, createWorkflow, type Step } from "@mastra/core/workflows";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ApprovalMismatchError, idempotent, memoryStore } from "../src/index.js";
import { approve, isApprovalRequest, reject } from "../src/langgraph/index.js";
import { approvalRequest, idempotentStep, keyFromStep, runApproved } from "../src/mastra/index.js";
import { savedRuns, storageWith } from "./fixtures/mastra-mailer.js";

const input = z.object({ to: z.string() });
const output = z.object({ status: z.string(), messageId: z.string().optional() });

/** A one-step workflow on a Mastra instance with storage, so runs can suspend and resume. */
type MailStep = Step<string, unknown, z.infer<typeof input>, z.infer<typeof output>, unknown, unknown>;

function workflowOf(step: MailStep, storage: MastraStorage = new InMemoryStore()) {
  const workflow = createWorkflow({ id: "mail", inputSchema: input, outputSchema: output })
    .then(step)
    .commit();
  const mastra = new Mastra({ workflows: { mail: workflow }, storage, logger: false });
  return mastra.getWorkflow("mail");
}

describe("effects in workflow steps", () => {
  it("control: a plain step sends again when the run resumes, since its body runs from the top", async () => {
    const sent: string[] = [];
    const step = createStep({
      id: "notify",
      inputSchema: input,
      outputSchema: output,
      execute: async (params) => {
        sent.push(params.inputData.to);
        if (params.resumeData === undefined) return params.suspend({});
        return { status: "done" };
      },
    });
    const run = await workflowOf(step).createRun();

    expect((await run.start({ inputData: { to: "alice" } })).status).toBe("suspended");
    expect((await run.resume({ step: "notify", resumeData: { go: true } })).status).toBe("success");

    expect(sent).toEqual(["alice", "alice"]);
  });

  it("sends once over a suspend and a resume when the effect runs under keyFromStep", async () => {
    const sent: string[] = [];
    const sendEmail = idempotent(
      async (args: { to: string }) => {
        sent.push(args.to);
        return { id: `m-${sent.length}` };
      },
      { name: "send_email", store: memoryStore() },
    );
    const step = idempotentStep(
      createStep({
        id: "notify",
        inputSchema: input,
        outputSchema: output,
        execute: async (params) => {
          const mail = await sendEmail(
            { to: params.inputData.to },
            { key: keyFromStep(params, "send_email") },
          );
          if (params.resumeData === undefined) return params.suspend({});
          return { status: mail.was_replay ? "replayed" : "sent", messageId: mail.result.id };
        },
      }),
    );
    const workflow = workflowOf(step);
    const run = await workflow.createRun();

    await run.start({ inputData: { to: "alice" } });
    const resumed = await run.resume({ step: "notify", resumeData: { go: true } });

    expect(sent).toEqual(["alice"]);
    expect(resumed.status === "success" && resumed.result).toEqual({ status: "replayed", messageId: "m-1" });

    // Another run of the same workflow is another operation.
    const next = await workflow.createRun();
    await next.start({ inputData: { to: "alice" } });
    expect(sent).toEqual(["alice", "alice"]);
  });

  it("refuses to make a key outside a step made with idempotentStep", async () => {
    const errors: unknown[] = [];
    const step = createStep({
      id: "notify",
      inputSchema: input,
      outputSchema: output,
      execute: async (params) => {
        try {
          keyFromStep(params, "send_email");
        } catch (error) {
          errors.push(error);
        }
        return { status: "done" };
      },
    });
    await (await workflowOf(step).createRun()).start({ inputData: { to: "alice" } });

    expect(errors).toEqual([expect.objectContaining({ code: "idempotency_key_missing" })]);
  });
});

describe("approvals at a step's suspend", () => {
  /** A step that drafts an email, suspends for approval and sends what was approved. */
  function reviewedSend(draftOf: (to: string) => string) {
    const sent: { to: string; body: string }[] = [];
    const sendEmail = idempotent(
      async (args: { to: string; body: string }) => {
        sent.push(args);
        return { id: `m-${sent.length}` };
      },
      { name: "send_email", store: memoryStore() },
    );
    const step = idempotentStep(
      createStep({
        id: "review_and_send",
        inputSchema: input,
        outputSchema: output,
        execute: async (params) => {
          const args = { to: params.inputData.to, body: draftOf(params.inputData.to) };
          const key = keyFromStep(params, "send_email");
          if (params.resumeData === undefined)
            return params.suspend(approvalRequest(sendEmail, args, { key }));
          if ((params.resumeData as { approved?: unknown }).approved !== true) return { status: "rejected" };
          const mail = await runApproved(sendEmail, args, params.resumeData, { key });
          return { status: "sent", messageId: mail.result.id };
        },
      }),
    );
    return { sent, step };
  }

  it("sends the approved email once, though the snapshot is resumed twice on other storages", async () => {
    const { sent, step } = reviewedSend((to) => `Hello ${to}`);
    const first = workflowOf(step);
    const run = await first.createRun();
    const paused = await run.start({ inputData: { to: "alice" } });
    expect(paused.status).toBe("suspended");
    const request = paused.status === "suspended" ? paused.suspendPayload.review_and_send : undefined;
    expect(isApprovalRequest(request)).toBe(true);
    if (!isApprovalRequest(request)) return;
    expect(request.args).toEqual({ to: "alice", body: "Hello alice" });
    const saved = await savedRuns(first.mastra?.getStorage() as InMemoryStore);

    for (const attempt of [1, 2]) {
      const elsewhere = workflowOf(step, await storageWith(saved));
      const resumed = await (await elsewhere.createRun({ runId: run.runId })).resume({
        step: "review_and_send",
        resumeData: approve(request),
      });
      expect([attempt, resumed.status]).toEqual([attempt, "success"]);
    }

    expect(sent).toEqual([{ to: "alice", body: "Hello alice" }]);
  });

  it("runs nothing when the re-run computes other arguments than the approved ones", async () => {
    let drafts = 0;
    const { sent, step } = reviewedSend((to) => `Draft ${++drafts} for ${to}`);
    const workflow = workflowOf(step);
    const run = await workflow.createRun();
    const paused = await run.start({ inputData: { to: "alice" } });
    const request = paused.status === "suspended" ? paused.suspendPayload.review_and_send : undefined;
    if (!isApprovalRequest(request)) throw new Error("no approval request");

    const resumed = await run.resume({ step: "review_and_send", resumeData: approve(request) });

    expect(sent).toEqual([]);
    expect(resumed.status).toBe("failed");
    const error = resumed.status === "failed" ? resumed.error : undefined;
    expect(String((error as Error | undefined)?.message)).toContain("differ from the ones a human approved");
  });

  it("runs nothing on a rejection, or on a bare { approved: true } that names no key and fingerprint", async () => {
    const { sent, step } = reviewedSend((to) => `Hello ${to}`);
    const workflow = workflowOf(step);
    const rejected = await workflow.createRun();
    const paused = await rejected.start({ inputData: { to: "alice" } });
    const request = paused.status === "suspended" ? paused.suspendPayload.review_and_send : undefined;
    if (!isApprovalRequest(request)) throw new Error("no approval request");
    const declined = await rejected.resume({ step: "review_and_send", resumeData: reject(request, "tone") });
    expect(declined.status === "success" && declined.result).toEqual({ status: "rejected" });

    const bare = await workflow.createRun();
    await bare.start({ inputData: { to: "alice" } });
    const blind = await bare.resume({ step: "review_and_send", resumeData: { approved: true } });
    expect(blind.status).toBe("failed");
    expect(sent).toEqual([]);
  });

  it("runApproved refuses arguments other than the approved ones with an ApprovalMismatchError", async () => {
    const sendEmail = idempotent(async (args: { to: string }) => args.to, {
      name: "send_email",
      store: memoryStore(),
    });
    const request = approvalRequest(sendEmail, { to: "alice" }, { key: "k-1" });

    await expect(
      runApproved(sendEmail, { to: "mallory" }, approve(request), { key: "k-1" }),
    ).rejects.toBeInstanceOf(ApprovalMismatchError);
    await expect(
      runApproved(sendEmail, { to: "alice" }, approve(request), { key: "k-2" }),
    ).rejects.toBeInstanceOf(ApprovalMismatchError);
    expect((await runApproved(sendEmail, { to: "alice" }, approve(request), { key: "k-1" })).result).toBe(
      "alice",
    );
  });
});
