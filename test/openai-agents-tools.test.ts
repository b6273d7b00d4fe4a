/**
 * `idempotool/openai-agents` on the real OpenAI Agents SDK with a scripted model: duplicate function calls
 * in one response run once, a later run's new request runs, and what the model reads when a call cannot
 * be answered is the text every integration gives.
 */
import { Agent, run, tool } from "@openai/agents";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { idempotent } from "../src/core/idempotent.js";
import { memoryStore } from "../src/index.js";
import { idempotentTool, toolContextOf } from "../src/openai-agents/index.js";
import {
  call,
  type Email,
  mailer,
  says,
  scriptedModel,
  toolOutputsSeen,
} from "./fixtures/openai-agents-mailer.js";

const alice = { to: "alice@example.com", subject: "Summary", body: "Here it is." };

describe("idempotentTool", () => {
  it("control: a plain tool() sends twice when one response emits the same call twice", async () => {
    const sent: unknown[] = [];
    const sendEmail = tool({
      name: "send_email",
      description: "Send an email",
      parameters: z.object({ to: z.string(), subject: z.string(), body: z.string() }),
      execute: async (email) => sent.push(email),
    });
    const model = scriptedModel([[call("c1", alice), call("c2", alice)], [says("sent")]]);
    const agent = new Agent({ name: "mailer", model, tools: [sendEmail] });

    await run(agent, "Send Alice the summary");

    expect(sent).toEqual([alice, alice]);
  });

  it("sends once when one response emits the same call twice, and tells the model the second was a replay", async () => {
    const sent: Email[] = [];
    const model = scriptedModel([
      [call("c1", alice), call("c2", { body: alice.body, subject: alice.subject, to: alice.to })],
      [says("sent")],
    ]);
    const { agent } = mailer({ store: memoryStore(), model, sent });

    const result = await run(agent, "Send Alice the summary");

    expect(result.finalOutput).toBe("sent");
    expect(sent).toEqual([alice]);
    const seen = toolOutputsSeen(model) as Record<
      string,
      { result: unknown; was_replay: boolean; note?: string }
    >;
    expect(seen.c1?.result).toEqual({ messageId: "m-1" });
    expect(seen.c2?.result).toEqual({ messageId: "m-1" });
    expect([seen.c1?.was_replay, seen.c2?.was_replay].sort()).toEqual([false, true]);
    const replay = seen.c1?.was_replay ? seen.c1 : seen.c2;
    expect(replay?.note).toMatch(/^send_email already ran for this same request at .*; it did not run again/);
  });

  it("sends once when a later step of the same run emits the call again", async () => {
    const sent: Email[] = [];
    const model = scriptedModel([[call("c1", alice)], [call("c2", alice)], [says("sent")]]);
    const { agent } = mailer({ store: memoryStore(), model, sent });

    await run(agent, "Send Alice the summary");

    expect(sent).toHaveLength(1);
    expect(toolOutputsSeen(model)).toMatchObject({ c2: { was_replay: true } });
  });

  it("sends again for the same request in a later run: the user asked again", async () => {
    const sent: Email[] = [];
    const store = memoryStore();
    const model = scriptedModel([
      [call("c1", alice)],
      [says("sent")],
      [call("c1", alice)],
      [says("sent again")],
    ]);
    const { agent } = mailer({ store, model, sent });

    await run(agent, "Send Alice the summary");
    await run(agent, "Send it again please");

    expect(sent).toEqual([alice, alice]);
    expect(toolOutputsSeen(model)).toMatchObject({ c1: { was_replay: false } });
  });

  it("keys on the turn id read from the user's context when one is given", async () => {
    const sent: Email[] = [];
    const store = memoryStore();
    const model = scriptedModel([
      [call("c1", alice)],
      [says("sent")],
      [call("c9", alice)],
      [says("sent")],
      [call("c1", alice)],
      [says("sent")],
    ]);
    const { agent } = mailer({
      store,
      model,
      sent,
      idempotency: { turnId: (runContext) => (runContext.context as { messageId: string }).messageId },
    });

    await run(agent, "Send Alice the summary", { context: { messageId: "msg-1" } });
    // The same user message run again (a retry after a timeout): the same turn.
    await run(agent, "Send Alice the summary", { context: { messageId: "msg-1" } });
    expect(sent).toHaveLength(1);
    expect(toolOutputsSeen(model)).toMatchObject({ c9: { was_replay: true } });

    await run(agent, "Send it again", { context: { messageId: "msg-2" } });
    expect(sent).toHaveLength(2);
  });

  it("refuses a repeat of the same intent with other arguments, with the conflict text", async () => {
    const sent: Email[] = [];
    const model = scriptedModel([
      [call("c1", alice)],
      [call("c2", { ...alice, body: "Reworded." })],
      [says("done")],
    ]);
    const { agent } = mailer({
      store: memoryStore(),
      model,
      sent,
      idempotency: { intentFields: ["to", "subject"] },
    });

    await run(agent, "Send Alice the summary");

    expect(sent).toEqual([alice]);
    expect(toolOutputsSeen(model).c2).toMatch(
      /^send_email was not run: it was already called for this same request at .* with different arguments\. Do not retry it with changed arguments\./,
    );
  });

  it("tells the model a call still running elsewhere is in flight, and does not send", async () => {
    const sent: Email[] = [];
    const store = memoryStore();
    // Another worker holds the key: its send has not finished.
    let finish = (): void => {};
    const holder = idempotent(() => new Promise<void>((resolve) => (finish = resolve)), {
      name: "send_email",
      store,
    });
    const held = holder(alice, { key: "k-1" });
    const model = scriptedModel([[call("c1", alice)], [says("wait")]]);
    const { agent } = mailer({ store, model, sent, idempotency: { key: () => "k-1", waitMs: 1 } });

    await run(agent, "Send Alice the summary");
    finish();
    await held;

    expect(sent).toEqual([]);
    expect(toolOutputsSeen(model).c1).toMatch(
      /^send_email was not run again: the same call is still running\. Do not call it again now\./,
    );
  });

  it("tells the model an unknown outcome is unknown, and never sends again for it in the same turn", async () => {
    const sent: Email[] = [];
    const model = scriptedModel([[call("c1", alice)], [call("c2", alice)], [says("unsure")]]);
    let attempts = 0;
    const { agent } = mailer({
      store: memoryStore(),
      model,
      sent,
      beforeSend: () => {
        attempts += 1;
        throw new Error("connection reset");
      },
    });

    await run(agent, "Send Alice the summary");

    expect(attempts).toBe(1);
    const seen = toolOutputsSeen(model);
    // The attempt that failed, with its error; then its repeat, which reads the record it left.
    expect(seen.c1).toMatch(
      /^Nobody knows whether send_email took effect: an attempt of this same call \(started at .*\) ended without a known outcome \(connection reset\)\. It will not run again until that is resolved\. Do not retry it;/,
    );
    expect(seen.c2).toMatch(
      /^Nobody knows whether send_email took effect: an attempt of this same call \(started at .*\) ended without a known outcome\. It will not run again until that is resolved\./,
    );
  });

  it('merges the replay marker into an object result with output: "merge"', async () => {
    const sent: Email[] = [];
    const model = scriptedModel([[call("c1", alice), call("c2", alice)], [says("sent")]]);
    const { agent } = mailer({ store: memoryStore(), model, sent, idempotency: { output: "merge" } });

    await run(agent, "Send Alice the summary");

    const seen = toolOutputsSeen(model) as Record<string, { messageId: string; was_replay: boolean }>;
    expect([seen.c1, seen.c2].map((output) => [output?.messageId, output?.was_replay]).sort()).toEqual([
      ["m-1", false],
      ["m-1", true],
    ]);
  });

  it("gives the tool body the key it runs under, the one the model reads back", async () => {
    const model = scriptedModel([[call("c1", alice)], [says("sent")]]);
    let keySeen: string | undefined;
    const sendEmail = tool(
      idempotentTool(
        {
          name: "send_email",
          description: "Send an email",
          parameters: z.object({ to: z.string(), subject: z.string(), body: z.string() }),
          execute: async (_email, _runContext, details) => {
            keySeen = details === undefined ? undefined : toolContextOf(details)?.key;
            return "sent";
          },
        },
        { store: memoryStore() },
      ),
    );

    await run(new Agent({ name: "mailer", model, tools: [sendEmail] }), "Send Alice the summary");

    const seen = toolOutputsSeen(model) as Record<string, { idempotency_key: string }>;
    expect(keySeen).toMatch(/^intent_/);
    expect(seen.c1?.idempotency_key).toBe(keySeen);
  });

  it("rejects options it cannot honour at configuration time, naming the option", () => {
    const store = memoryStore();
    expect(() =>
      mailer({ store, model: scriptedModel([]), sent: [], idempotency: { turnId: "t" as never } }),
    ).toThrow(/idempotentTool\(send_email\).*turnId.*must be a function/);
  });
});
