/**
 * `idempotool/mastra` on a real Mastra agent with a scripted model: duplicate tool calls in one response
 * run once, a later run's new request runs, and what the model reads when a call cannot be answered is
 * the text every integration gives.
 */
import { Agent } from "@mastra/core/agent";
import { RequestContext } from "@mastra/core/request-context";
import { createTool } from "@mastra/core/tools";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { IdempotencyError, memoryStore } from "../src/index.js";
import { idempotentTool, toolContextOf } from "../src/mastra/index.js";
import { call, type Email, mailer, says, scriptedModel, toolOutputsSeen } from "./fixtures/mastra-mailer.js";

const alice = { to: "alice@example.com", subject: "Summary", body: "Here it is." };

describe("idempotentTool", () => {
  it("control: a plain createTool() sends twice when one response emits the same call twice", async () => {
    const sent: unknown[] = [];
    const sendEmail = createTool({
      id: "send_email",
      description: "Send an email",
      inputSchema: z.object({ to: z.string(), subject: z.string(), body: z.string() }),
      execute: async (email) => {
        sent.push(email);
        return { ok: true };
      },
    });
    const model = scriptedModel([[call("c1", alice), call("c2", alice)], [says("sent")]]);
    const agent = new Agent({
      id: "m",
      name: "m",
      instructions: "-",
      model,
      tools: { send_email: sendEmail },
    });

    await agent.generate("Send Alice the summary");

    expect(sent).toEqual([alice, alice]);
  });

  it("sends once when one response emits the same call twice, and tells the model the second was a replay", async () => {
    const sent: Email[] = [];
    const model = scriptedModel([
      [call("c1", alice), call("c2", { body: alice.body, subject: alice.subject, to: alice.to })],
      [says("sent")],
    ]);
    const { agent } = mailer({ store: memoryStore(), model, sent });

    const output = await agent.generate("Send Alice the summary");

    expect(output.text).toBe("sent");
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

    await agent.generate("Send Alice the summary");

    expect(sent).toHaveLength(1);
    expect(toolOutputsSeen(model)).toMatchObject({ c2: { was_replay: true } });
  });

  it("sends again for the same request in a later run: the user asked again", async () => {
    const sent: Email[] = [];
    const model = scriptedModel([
      [call("c1", alice)],
      [says("sent")],
      [call("c1", alice)],
      [says("sent again")],
    ]);
    const { agent } = mailer({ store: memoryStore(), model, sent });

    await agent.generate("Send Alice the summary");
    await agent.generate("Send it again please");

    expect(sent).toEqual([alice, alice]);
  });

  it("keys on the turn id read from the request context when one is given", async () => {
    const sent: Email[] = [];
    const model = scriptedModel([
      [call("c1", alice)],
      [says("sent")],
      [call("c9", alice)],
      [says("sent")],
      [call("c1", alice)],
      [says("sent")],
    ]);
    const { agent } = mailer({
      store: memoryStore(),
      model,
      sent,
      idempotency: { turnId: (context) => String(context.requestContext?.get("messageId")) },
    });
    const message = (id: string) => new RequestContext([["messageId", id]]);

    await agent.generate("Send Alice the summary", { requestContext: message("msg-1") });
    // The same user message run again (a retry after a timeout): the same turn.
    await agent.generate("Send Alice the summary", { requestContext: message("msg-1") });
    expect(sent).toHaveLength(1);
    expect(toolOutputsSeen(model)).toMatchObject({ c9: { was_replay: true } });

    await agent.generate("Send it again", { requestContext: message("msg-2") });
    expect(sent).toHaveLength(2);
  });

  it("refuses a repeat of the same intent with other arguments, with the conflict text", async () => {
    const sent: Email[] = [];
    const model = scriptedModel([
      [call("c1", alice)],
      [call("c2", { ...alice, body: "Reworded." })],
      [says("ok")],
    ]);
    const { agent } = mailer({ store: memoryStore(), model, sent });

    await agent.generate("Send Alice the summary");

    expect(sent).toEqual([alice]);
    expect(JSON.stringify(toolOutputsSeen(model).c2)).toContain(
      "send_email was not run: it was already called for this same request at ",
    );
  });

  it("tells the model plainly that nobody knows whether an email went out after an unexplained failure", async () => {
    const model = scriptedModel([[call("c1", alice)], [call("c2", alice)], [says("ok")]]);
    const agent = new Agent({
      id: "m",
      name: "m",
      instructions: "-",
      model,
      tools: {
        send_email: createTool(
          idempotentTool(
            {
              id: "send_email",
              description: "Send an email",
              inputSchema: z.object({ to: z.string(), subject: z.string(), body: z.string() }),
              execute: async () => {
                throw new Error("connection reset");
              },
            },
            { store: memoryStore() },
          ),
        ),
      },
    });

    await agent.generate("Send Alice the summary");

    const seen = toolOutputsSeen(model);
    expect(JSON.stringify(seen.c1)).toContain("Nobody knows whether send_email took effect");
    expect(JSON.stringify(seen.c2)).toContain("Nobody knows whether send_email took effect");
  });

  it("gives the tool its key and the signal of its claim", async () => {
    const seen: { key?: string | undefined; signal: boolean }[] = [];
    const model = scriptedModel([[call("c1", { customer: "acme" }, "create_invoice")], [says("ok")]]);
    const agent = new Agent({
      id: "m",
      name: "m",
      instructions: "-",
      model,
      tools: {
        create_invoice: createTool(
          idempotentTool(
            {
              id: "create_invoice",
              description: "Create an invoice",
              inputSchema: z.object({ customer: z.string() }),
              execute: async (_input, context) => {
                seen.push({
                  key: toolContextOf(context)?.key,
                  signal: context.abortSignal instanceof AbortSignal,
                });
                return { ok: true };
              },
            },
            { store: memoryStore() },
          ),
        ),
      },
    });

    await agent.generate("Invoice acme");

    expect(seen).toEqual([{ key: expect.stringMatching(/^intent_/), signal: true }]);
  });

  it("refuses options that cannot work, naming the option", () => {
    const base = { id: "send_email", description: "Send", execute: async () => ({}) };
    const store = memoryStore();
    expect(() => idempotentTool({ ...base, outputSchema: z.object({}) }, { store })).toThrow(
      /`outputSchema`/,
    );
    expect(() => idempotentTool({ ...base, suspendSchema: z.object({}) }, { store })).toThrow(
      /`suspendSchema`/,
    );
    expect(() => idempotentTool({ ...base, turnId: "t" } as never, { store, turnId: "t" as never })).toThrow(
      /`turnId` must be a function/,
    );
    expect(() => idempotentTool({ id: "x", description: "-" }, { store })).toThrow(IdempotencyError);
  });
});
