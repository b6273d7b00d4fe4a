/**
 * Approvals of Mastra agent tool calls (`requireApproval`) bound to (key, fingerprint): the approved call
 * runs once when the suspended run is resumed from its serialised snapshots on other storages, and a
 * snapshot whose arguments were changed after the approval runs nothing.
 */
import { RequestContext } from "@mastra/core/request-context";
import { describe, expect, it } from "vitest";
import { memoryStore } from "../src/index.js";
import { bindToolApproval, toolApprovalRequest } from "../src/mastra/index.js";
import {
  call,
  type Email,
  mailer,
  savedRuns,
  says,
  scriptedModel,
  storageWith,
} from "./fixtures/mastra-mailer.js";

const alice = { to: "alice@example.com", subject: "Summary", body: "Here it is." };

/** Run the agent until it waits for approval of send_email; return the request and the saved run. */
async function pausedForApproval(store = memoryStore(), sent: Email[] = []) {
  const model = scriptedModel([[call("c1", alice)]]);
  const { agent, sendEmailOptions, storage } = mailer({ store, model, sent, requireApproval: true });
  const output = await agent.generate("Send Alice the summary");
  expect(output.finishReason).toBe("suspended");
  const request = toolApprovalRequest(sendEmailOptions, output);
  return { request, saved: await savedRuns(storage), sent, store };
}

describe("toolApprovalRequest and bindToolApproval", () => {
  it("shows the call with its key and fingerprint, and nothing runs before the approval", async () => {
    const { request, sent } = await pausedForApproval();

    expect(request).toMatchObject({ tool: "send_email", call_id: "c1", args: alice, scope: "default" });
    expect(request.key).toMatch(/^intent_/);
    expect(request.fingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(sent).toEqual([]);
  });

  it("sends the approved email once, though the saved run is approved and resumed twice on other storages", async () => {
    const { request, saved, sent, store } = await pausedForApproval();

    for (const _attempt of [1, 2]) {
      const model = scriptedModel([[says("sent")]]);
      const { agent } = mailer({
        store,
        model,
        sent,
        requireApproval: true,
        storage: await storageWith(saved),
      });
      const output = await agent.approveToolCallGenerate({
        runId: request.run_id,
        toolCallId: request.call_id,
        requestContext: bindToolApproval(new RequestContext(), request),
      });
      expect(output.text).toBe("sent");
    }

    expect(sent).toEqual([alice]);
  });

  it("runs nothing when the saved call's arguments were changed after the approval", async () => {
    const { request, saved, sent, store } = await pausedForApproval();
    const edited = saved.replaceAll("alice@example.com", "mallory@example.com");
    expect(edited).not.toBe(saved);

    const model = scriptedModel([[says("not sent")]]);
    const { agent } = mailer({
      store,
      model,
      sent,
      requireApproval: true,
      storage: await storageWith(edited),
    });
    await agent.approveToolCallGenerate({
      runId: request.run_id,
      toolCallId: request.call_id,
      requestContext: bindToolApproval(new RequestContext(), request),
    });

    expect(sent).toEqual([]);
    expect(JSON.stringify(model.prompts.at(-1))).toContain("differ from the ones a human approved");
  });

  it("refuses options not made by idempotentTool, and a request not made by toolApprovalRequest", async () => {
    expect(() => toolApprovalRequest({}, { runId: "r", suspendPayload: {} })).toThrow(
      /made by idempotentTool/,
    );
    expect(() => bindToolApproval(new RequestContext(), { approved: true } as never)).toThrow(
      /made by toolApprovalRequest/,
    );
  });
});
