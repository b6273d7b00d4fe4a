/**
 * idempotool/ai-sdk against the real AI SDK: generateText and streamText drive a MockLanguageModelV3 that
 * emits the same tool call twice in one step (executed concurrently, with different toolCallIds) and
 * again in the next step.
 */
import { generateText, type ModelMessage, simulateReadableStream, stepCountIs, streamText, tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { idempotentTool, idempotentTools, toolContextOf, turnIdFromMessages } from "../src/ai-sdk/index.js";
import type { IdempotencyEvent, IdempotencyStore } from "../src/index.js";
import {
  definitiveFailure,
  fingerprint,
  isIdempotencyError,
  memoryStore,
  ReplayedFailureError,
} from "../src/index.js";
import { ToolCallError } from "../src/loops/index.js";
import { fakeClock } from "../src/testing/fake-clock.js";
import { calls, streamedRepeats, text } from "./fixtures/ai-sdk-model.js";

interface Email {
  to: string;
  subject: string;
  body: string;
}

const alice: Email = { to: "alice@example.com", subject: "Meeting summary", body: "Hi Alice, here it is." };

/** A send_email tool that counts real sends and takes a moment, so concurrent duplicates overlap. */
function mailer() {
  const sent: Email[] = [];
  const sendEmail = tool({
    description: "Send an email",
    inputSchema: z.object({ to: z.string(), subject: z.string(), body: z.string() }),
    execute: async (input: Email) => {
      sent.push(input);
      await new Promise((resolve) => setTimeout(resolve, 20));
      return { messageId: `m-${sent.length}`, to: input.to };
    },
  });
  return { sent, sendEmail };
}

/** The outputs of a step's tool results, typed by the tool set (dynamic tools have none here). */
function outputsOf<R extends { readonly dynamic?: boolean | undefined; readonly output: unknown }>(
  results: readonly R[],
): Exclude<R, { readonly dynamic: true }>["output"][] {
  return results.map((result) => {
    if (result.dynamic) throw new Error("unexpected dynamic tool result");
    return result.output as Exclude<R, { readonly dynamic: true }>["output"];
  });
}

/** The tool results the model was sent at the start of step `index` (from the mock's recorded prompts). */
function toolResultsSeenByModel(model: MockLanguageModelV3, index: number) {
  const prompt = model.doGenerateCalls[index]?.prompt ?? [];
  return prompt
    .filter((message) => message.role === "tool")
    .flatMap((message) => message.content)
    .filter((part) => part.type === "tool-result");
}

describe("idempotentTools with generateText", () => {
  it("runs identical calls of one step once, replays the repeat of the next step, and marks both replays", async () => {
    const { sent, sendEmail } = mailer();
    const store = memoryStore();
    const tools = idempotentTools({ send_email: sendEmail }, { store });
    const model = new MockLanguageModelV3({
      doGenerate: [
        calls({ id: "call-1", input: alice }, { id: "call-2", input: alice }),
        calls({ id: "call-3", input: alice }),
        text("Sent."),
      ],
    });

    const result = await generateText({
      model,
      tools,
      stopWhen: stepCountIs(5),
      prompt: "Send Alice the meeting summary",
    });

    expect(sent).toHaveLength(1);
    const outputs = result.steps.flatMap((step) => outputsOf(step.toolResults));
    expect(outputs).toHaveLength(3);
    for (const output of outputs)
      expect(output.result).toEqual({ messageId: "m-1", to: "alice@example.com" });
    expect(outputs.filter((output) => output.was_replay)).toHaveLength(2);
    const [first, second] = result.steps[0]!.toolResults;
    expect(first!.toolCallId).not.toBe(second!.toolCallId);
    // Every call of one intent in one turn shares one key and one original time.
    expect(new Set(outputs.map((output) => output.idempotency_key)).size).toBe(1);
    expect(new Set(outputs.map((output) => output.original_called_at)).size).toBe(1);
    expect(outputsOf(result.steps[1]!.toolResults)[0]!).toMatchObject({
      was_replay: true,
      note: expect.stringContaining("did not run again"),
    });

    // The model itself read the replay marker in the next step's prompt.
    const seen = toolResultsSeenByModel(model, 2);
    expect(seen).toHaveLength(3);
    const replayed = seen.filter(
      (part) => part.output.type === "json" && (part.output.value as { was_replay?: boolean }).was_replay,
    );
    expect(replayed).toHaveLength(2);
    expect(result.text).toBe("Sent.");
  });

  it("runs again in a new user turn, and replays when the same turn is run again", async () => {
    const { sent, sendEmail } = mailer();
    const tools = idempotentTools({ send_email: sendEmail }, { store: memoryStore() });
    const turn1: ModelMessage[] = [{ role: "user", content: "Send Alice the meeting summary" }];
    const model = new MockLanguageModelV3({
      doGenerate: [
        calls({ id: "a", input: alice }),
        text("Sent."),
        // The user re-runs the same turn after a timeout: same conversation, same turn.
        calls({ id: "b", input: alice }),
        text("Sent."),
        // The user asks again in a new message: a new intent (seed Case 2).
        calls({ id: "c", input: alice }),
        text("Sent again."),
      ],
    });

    const first = await generateText({ model, tools, stopWhen: stepCountIs(3), messages: turn1 });
    const retry = await generateText({ model, tools, stopWhen: stepCountIs(3), messages: turn1 });
    const turn2: ModelMessage[] = [
      ...turn1,
      ...first.response.messages,
      { role: "user", content: "Alice says she did not get it. Send it again please." },
    ];
    const again = await generateText({ model, tools, stopWhen: stepCountIs(3), messages: turn2 });

    expect(sent).toHaveLength(2);
    expect(outputsOf(first.steps[0]!.toolResults)[0]!.was_replay).toBe(false);
    expect(outputsOf(retry.steps[0]!.toolResults)[0]!.was_replay).toBe(true);
    const resent = outputsOf(again.steps[0]!.toolResults)[0]!;
    expect(resent).toMatchObject({ was_replay: false, result: { messageId: "m-2" } });
  });

  it("runs a similar call of a new turn but tells the model about the recent one (opt-in similar)", async () => {
    const { sent, sendEmail } = mailer();
    const tools = idempotentTools(
      { send_email: sendEmail },
      { store: memoryStore(), perTool: { send_email: { similar: { fields: ["to"], windowMs: 60_000 } } } },
    );
    const model = new MockLanguageModelV3({
      doGenerate: [
        calls({ id: "a", input: alice }),
        text("Sent."),
        calls({ id: "b", input: alice }),
        text("Sent."),
      ],
    });
    const turn1: ModelMessage[] = [{ role: "user", content: "Send Alice the meeting summary" }];
    const first = await generateText({ model, tools, stopWhen: stepCountIs(3), messages: turn1 });
    const again = await generateText({
      model,
      tools,
      stopWhen: stepCountIs(3),
      messages: [
        ...turn1,
        ...first.response.messages,
        { role: "user", content: "Send Alice the meeting summary" },
      ],
    });

    expect(sent).toHaveLength(2);
    const firstOutput = outputsOf(first.steps[0]!.toolResults)[0]!;
    expect(firstOutput.recent_similar_call).toBeUndefined();
    const output = outputsOf(again.steps[0]!.toolResults)[0]!;
    expect(output).toMatchObject({
      was_replay: false,
      recent_similar_call: {
        called_at: firstOutput.original_called_at,
        idempotency_key: firstOutput.idempotency_key,
      },
      note: expect.stringMatching(
        /ran now as a new request, but a similar send_email call already completed/,
      ),
    });
    // The model reads the hint in the next step.
    const seen = toolResultsSeenByModel(model, 3).at(-1)!.output;
    expect(
      seen.type === "json" && (seen.value as { recent_similar_call?: unknown }).recent_similar_call,
    ).toBeTruthy();
  });

  it("keeps users apart by scope", async () => {
    const { sent, sendEmail } = mailer();
    const store = memoryStore();
    const model = new MockLanguageModelV3({
      doGenerate: [
        calls({ id: "a", input: alice }),
        text("ok"),
        calls({ id: "b", input: alice }),
        text("ok"),
      ],
    });
    for (const user of ["user-a", "user-b"]) {
      const tools = idempotentTools({ send_email: sendEmail }, { store, scope: user });
      await generateText({
        model,
        tools,
        stopWhen: stepCountIs(3),
        prompt: "Send Alice the meeting summary",
      });
    }
    expect(sent).toHaveLength(2);
  });

  it("takes the turn id from the tool's context when told to", async () => {
    const { sent, sendEmail } = mailer();
    const tools = idempotentTools(
      { send_email: sendEmail },
      { store: memoryStore(), turnId: (options) => (options.context as { turn: string }).turn },
    );
    const model = new MockLanguageModelV3({
      doGenerate: [
        calls({ id: "a", input: alice }),
        text("ok"),
        calls({ id: "b", input: alice }),
        text("ok"),
      ],
    });
    // Different wording, same turn id: the app says it is one turn, so the repeat is absorbed.
    await generateText({
      model,
      tools,
      stopWhen: stepCountIs(3),
      prompt: "Send Alice the summary",
      // A wrapped tool's type does not carry its context type: idempotool's types fit AI SDK 6 and 7 alike.
      toolsContext: { send_email: { turn: "msg-1" } } as never,
    });
    const again = await generateText({
      model,
      tools,
      stopWhen: stepCountIs(3),
      prompt: "Please send Alice the summary",
      // A wrapped tool's type does not carry its context type: idempotool's types fit AI SDK 6 and 7 alike.
      toolsContext: { send_email: { turn: "msg-1" } } as never,
    });
    expect(sent).toHaveLength(1);
    expect(outputsOf(again.steps[0]!.toolResults)[0]!.was_replay).toBe(true);
  });
});

describe("intent fields", () => {
  const reworded: Email = { ...alice, body: "Hello Alice, the summary is attached." };

  it("turns a reworded repeat in the same turn into a conflict the model is told about, not a second email", async () => {
    const { sent, sendEmail } = mailer();
    const tools = idempotentTools(
      { send_email: sendEmail },
      { store: memoryStore(), perTool: { send_email: { intentFields: ["to", "subject"] } } },
    );
    const model = new MockLanguageModelV3({
      doGenerate: [calls({ id: "a", input: alice }), calls({ id: "b", input: reworded }), text("ok")],
    });
    const result = await generateText({
      model,
      tools,
      stopWhen: stepCountIs(4),
      prompt: "Send Alice the summary",
    });

    expect(sent).toHaveLength(1);
    const failure = result.steps[1]!.content.find((part) => part.type === "tool-error");
    expect(failure?.error).toBeInstanceOf(ToolCallError);
    const error = failure!.error as ToolCallError;
    expect(error.code).toBe("idempotency_key_conflict");
    expect(isIdempotencyError(error.cause, "idempotency_key_conflict")).toBe(true);
    // What the model reads: what happened and what to do (AI SDK 7 puts the error's name before it).
    const seen = toolResultsSeenByModel(model, 2).find((part) => part.toolCallId === "b");
    expect(seen?.output).toEqual({ type: "error-text", value: `ToolCallError: ${error.message}` });
    expect(error.message).toMatch(
      /already called for this same request .* Do not retry it with changed arguments/,
    );
  });

  it("replays a reworded repeat when the fingerprint covers only the intent fields", async () => {
    const { sent, sendEmail } = mailer();
    const tools = idempotentTools(
      { send_email: sendEmail },
      {
        store: memoryStore(),
        perTool: { send_email: { intentFields: ["to", "subject"], significant: ["to", "subject"] } },
      },
    );
    const model = new MockLanguageModelV3({
      doGenerate: [calls({ id: "a", input: alice }), calls({ id: "b", input: reworded }), text("ok")],
    });
    const result = await generateText({
      model,
      tools,
      stopWhen: stepCountIs(4),
      prompt: "Send Alice the summary",
    });
    expect(sent).toHaveLength(1);
    expect(outputsOf(result.steps[1]!.toolResults)[0]!).toMatchObject({
      was_replay: true,
      result: { messageId: "m-1" },
    });
  });

  it("runs a call with a different intent in the same turn", async () => {
    const { sent, sendEmail } = mailer();
    const tools = idempotentTools(
      { send_email: sendEmail },
      { store: memoryStore(), perTool: { send_email: { intentFields: ["to", "subject"] } } },
    );
    const bob: Email = { ...alice, to: "bob@example.com" };
    const model = new MockLanguageModelV3({
      doGenerate: [calls({ id: "a", input: alice }, { id: "b", input: bob }), text("ok")],
    });
    await generateText({ model, tools, stopWhen: stepCountIs(3), prompt: "Send Alice and Bob the summary" });
    expect(sent.map((email) => email.to)).toEqual(["alice@example.com", "bob@example.com"]);
  });
});

describe("what execute returns", () => {
  it('merges the marker into an object result with output: "merge"', async () => {
    const { sent, sendEmail } = mailer();
    const tools = idempotentTools({ send_email: sendEmail }, { store: memoryStore(), output: "merge" });
    const model = new MockLanguageModelV3({
      doGenerate: [calls({ id: "a", input: alice }, { id: "b", input: alice }), text("ok")],
    });
    const result = await generateText({
      model,
      tools,
      stopWhen: stepCountIs(3),
      prompt: "Send Alice the summary",
    });
    expect(sent).toHaveLength(1);
    const outputs = outputsOf(result.steps[0]!.toolResults);
    // The tool's own shape, typed as such, with the marker beside it.
    const ids: string[] = outputs.map((output) => output.messageId);
    expect(ids).toEqual(["m-1", "m-1"]);
    expect(outputs.map((output) => output.was_replay).sort()).toEqual([false, true]);
    expect(outputs.find((output) => output.was_replay)?.note).toMatch(/did not run again/);
  });

  it("keeps the tool's own toModelOutput and adds the replay note to what it makes", async () => {
    const sent: string[] = [];
    const send = tool({
      inputSchema: z.object({ to: z.string() }),
      execute: async ({ to }) => {
        sent.push(to);
        return { messageId: `m-${sent.length}` };
      },
      toModelOutput: ({ output }) => ({ type: "text", value: `Sent as ${output.messageId}.` }),
    });
    const tools = idempotentTools({ send_email: send }, { store: memoryStore() });
    const model = new MockLanguageModelV3({
      doGenerate: [
        calls({ id: "a", input: { to: "a@x.io" } }),
        calls({ id: "b", input: { to: "a@x.io" } }),
        text("ok"),
      ],
    });
    await generateText({ model, tools, stopWhen: stepCountIs(4), prompt: "Send it" });
    expect(sent).toHaveLength(1);
    const seen = toolResultsSeenByModel(model, 2).map((part) => part.output);
    expect(seen[0]).toEqual({ type: "text", value: "Sent as m-1." });
    expect(seen[1]).toMatchObject({
      type: "text",
      value: expect.stringMatching(/^Sent as m-1\.\n\n.*did not run again/s),
    });
  });

  it("stores the final value of a streaming tool and replays it", async () => {
    let runs = 0;
    const progress = tool({
      inputSchema: z.object({ job: z.string() }),
      async *execute({ job }) {
        runs++;
        yield { job, status: "running" };
        yield { job, status: "done" };
      },
    });
    const tools = idempotentTools({ start_job: progress }, { store: memoryStore() });
    const model = new MockLanguageModelV3({
      doGenerate: [
        calls({ id: "a", name: "start_job", input: { job: "j1" } }),
        calls({ id: "b", name: "start_job", input: { job: "j1" } }),
        text("ok"),
      ],
    });
    const result = await generateText({ model, tools, stopWhen: stepCountIs(4), prompt: "Start j1" });
    expect(runs).toBe(1);
    expect(outputsOf(result.steps[1]!.toolResults)[0]!).toMatchObject({
      was_replay: true,
      result: { job: "j1", status: "done" },
    });
  });

  it("gives the tool its idempotency key, to pass downstream", async () => {
    const keysSeen: (string | undefined)[] = [];
    const charge = tool({
      inputSchema: z.object({ cents: z.number() }),
      execute: async (_input, options) => {
        keysSeen.push(toolContextOf(options)?.key);
        return { charged: true };
      },
    });
    const tools = idempotentTools({ charge }, { store: memoryStore(), effect: "native-key" });
    const model = new MockLanguageModelV3({
      doGenerate: [calls({ id: "a", name: "charge", input: { cents: 500 } }), text("ok")],
    });
    const result = await generateText({ model, tools, stopWhen: stepCountIs(3), prompt: "Charge 5 dollars" });
    expect(keysSeen).toHaveLength(1);
    expect(keysSeen[0]).toMatch(/^intent_[0-9a-f]{64}$/);
    expect(outputsOf(result.steps[0]!.toolResults)[0]!.idempotency_key).toBe(keysSeen[0]);
  });
});

describe("failures", () => {
  it("hands a recorded definitive failure back to the repeat as a replayed failure", async () => {
    let runs = 0;
    const send = tool({
      inputSchema: z.object({ to: z.string() }),
      execute: async (): Promise<{ messageId: string }> => {
        runs++;
        throw definitiveFailure(new Error("mailbox does not exist"));
      },
    });
    const tools = idempotentTools({ send_email: send }, { store: memoryStore() });
    const model = new MockLanguageModelV3({
      doGenerate: [
        calls({ id: "a", input: { to: "x@x.io" } }),
        calls({ id: "b", input: { to: "x@x.io" } }),
        text("ok"),
      ],
    });
    const result = await generateText({ model, tools, stopWhen: stepCountIs(4), prompt: "Send it" });
    expect(runs).toBe(1);
    const [first, again] = result.steps.map(
      (step) => step.content.find((part) => part.type === "tool-error")?.error,
    );
    // The first failure is the tool's own error, as it threw it.
    expect((first as Error).message).toBe("mailbox does not exist");
    expect(again).toBeInstanceOf(ToolCallError);
    expect((again as ToolCallError).cause).toBeInstanceOf(ReplayedFailureError);
    expect((again as Error).message).toMatch(
      /already ran .* failed: mailbox does not exist\. It was not run again/,
    );
  });

  it("fails closed after an irreversible tool throws: the model is told the outcome is unknown, and no repeat runs it", async () => {
    let runs = 0;
    const send = tool({
      inputSchema: z.object({ to: z.string() }),
      execute: async (): Promise<{ messageId: string }> => {
        runs++;
        throw new Error("socket hang up");
      },
    });
    const tools = idempotentTools({ send_email: send }, { store: memoryStore() });
    const model = new MockLanguageModelV3({
      doGenerate: [
        calls({ id: "a", input: { to: "x@x.io" } }),
        calls({ id: "b", input: { to: "x@x.io" } }),
        text("ok"),
      ],
    });
    const result = await generateText({ model, tools, stopWhen: stepCountIs(4), prompt: "Send it" });
    expect(runs).toBe(1);
    const [first, again] = result.steps.map(
      (step) => step.content.find((part) => part.type === "tool-error")?.error as ToolCallError,
    );
    expect(first?.code).toBe("outcome_unknown");
    expect(first?.message).toMatch(
      /Nobody knows whether send_email took effect: .*\(socket hang up\)\. .*Do not retry it/,
    );
    expect((first!.cause as Error).cause).toEqual(new Error("socket hang up"));
    expect(again?.code).toBe("outcome_unknown");
  });

  it("fails closed when the store is down: the tool does not run and the model is told nothing happened", async () => {
    const { sent, sendEmail } = mailer();
    const down: IdempotencyStore = new Proxy(memoryStore(), {
      get(target, property, receiver) {
        if (property === "claim") return async () => Promise.reject(new Error("connection refused"));
        return Reflect.get(target, property, receiver);
      },
    });
    const tools = idempotentTools({ send_email: sendEmail }, { store: down });
    const model = new MockLanguageModelV3({ doGenerate: [calls({ id: "a", input: alice }), text("ok")] });
    const result = await generateText({ model, tools, stopWhen: stepCountIs(3), prompt: "Send it" });
    expect(sent).toHaveLength(0);
    const error = result.steps[0]!.content.find((part) => part.type === "tool-error")?.error as ToolCallError;
    expect(error.code).toBe("store_unavailable");
    expect(error.message).toMatch(/was not run.*Nothing happened/);
  });

  it("tells the model when a duplicate waited too long for the first call", async () => {
    // The first call is held until the duplicate has found it in flight (and, with waitMs 0, given up).
    let duplicateSeen = false;
    let release: (() => void) | undefined;
    const slow = tool({
      inputSchema: z.object({ to: z.string() }),
      execute: async () => {
        await new Promise<void>((resolve) => {
          if (duplicateSeen) resolve();
          else release = resolve;
        });
        return { ok: true };
      },
    });
    const onEvent = (event: IdempotencyEvent) => {
      if (event.type !== "in_flight_wait") return;
      duplicateSeen = true;
      release?.();
    };
    const tools = idempotentTools({ send_email: slow }, { store: memoryStore(), waitMs: 0, onEvent });
    const model = new MockLanguageModelV3({
      doGenerate: [
        calls({ id: "a", input: { to: "a@x.io" } }, { id: "b", input: { to: "a@x.io" } }),
        text("ok"),
      ],
    });
    const result = await generateText({ model, tools, stopWhen: stepCountIs(3), prompt: "Send it" });
    const error = result.steps[0]!.content.find((part) => part.type === "tool-error")?.error as ToolCallError;
    expect(error.code).toBe("idempotency_key_in_use");
    expect(error.message).toMatch(/still running\. Do not call it again now/);
    expect(result.steps[0]!.toolResults).toHaveLength(1);
  });

  for (const { remaining, leaseMs, advice } of [
    { remaining: 134, leaseMs: 1_000, advice: "after about 134 ms." },
    { remaining: 42_000, leaseMs: 45_000, advice: "after about 42 seconds." },
  ]) {
    it(`tells the model to come back when the holder's lease passes, ${remaining} ms from now`, async () => {
      const clock = fakeClock();
      const store = memoryStore();
      let runs = 0;
      const send = tool({
        inputSchema: z.object({ to: z.string() }),
        execute: async () => {
          runs++;
          return { ok: true };
        },
      });
      const tools = {
        send_email: idempotentTool(send, { name: "send_email", store, clock, waitMs: 0, key: () => "k" }),
      };
      // Another worker holds the key (running, or crashed): its lease has `remaining` ms left.
      await store.claim({
        scope: "default",
        key: "k",
        tool: "send_email",
        fingerprint: fingerprint({ to: "a@x.io" }),
        token: "other-worker",
        leaseMs,
        ttlMs: 86_400_000,
        now: clock.now() - (leaseMs - remaining),
      });
      const model = new MockLanguageModelV3({
        doGenerate: [calls({ id: "a", input: { to: "a@x.io" } }), text("ok")],
      });

      const result = await generateText({ model, tools, stopWhen: stepCountIs(3), prompt: "Send it" });

      const error = result.steps[0]!.content.find((part) => part.type === "tool-error")
        ?.error as ToolCallError;
      expect(runs).toBe(0);
      expect(error.code).toBe("idempotency_key_in_use");
      expect(error.message).toContain(`make the identical call again ${advice}`);
    });
  }

  it("tells the model when its input has none of the intent fields, and sends nothing", async () => {
    const { sent, sendEmail } = mailer();
    // A misspelt list, as JavaScript lets one through: every call of a turn would otherwise share one key.
    const tools = idempotentTools(
      { send_email: sendEmail },
      { store: memoryStore(), perTool: { send_email: { intentFields: ["too" as "to"] } } },
    );
    const model = new MockLanguageModelV3({ doGenerate: [calls({ id: "a", input: alice }), text("ok")] });
    const result = await generateText({ model, tools, stopWhen: stepCountIs(3), prompt: "Send it" });
    expect(sent).toHaveLength(0);
    const error = result.steps[0]!.content.find((part) => part.type === "tool-error")?.error as ToolCallError;
    expect(error.code).toBe("invalid_arguments");
    expect(error.message).toMatch(/none of the fields `intentFields` names \(too\)/);
  });

  it("asks for a turn id when the conversation has no user message", () => {
    expect(() => turnIdFromMessages([{ role: "system", content: "You send emails." }])).toThrow(
      /No user message/,
    );
  });
});

describe("streamText", () => {
  it("dedupes concurrent duplicates and later repeats while streaming", async () => {
    const { sent, sendEmail } = mailer();
    const tools = idempotentTools({ send_email: sendEmail }, { store: memoryStore() });
    const streams = streamedRepeats(alice);
    const model = new MockLanguageModelV3({
      doStream: streams.map((chunks) => ({ stream: simulateReadableStream({ chunks }) })),
    });
    const result = streamText({ model, tools, stopWhen: stepCountIs(5), prompt: "Send Alice the summary" });
    const steps = await result.steps;
    expect(sent).toHaveLength(1);
    const outputs = steps.flatMap((step) => outputsOf(step.toolResults));
    expect(outputs.map((output) => output.was_replay)).toEqual(expect.arrayContaining([false, true, true]));
    expect(outputs).toHaveLength(3);
  });
});

describe("idempotentTool and idempotentTools options", () => {
  it("wraps only the named tools and passes the others through untouched", () => {
    const { sendEmail } = mailer();
    const weather = tool({
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => ({ city, celsius: 21 }),
    });
    const tools = idempotentTools(
      { send_email: sendEmail, get_weather: weather },
      { store: memoryStore(), only: ["send_email"] },
    );
    expect(tools.get_weather).toBe(weather);
    expect(tools.send_email).not.toBe(sendEmail);
    expect(tools.send_email.inputSchema).toBe(sendEmail.inputSchema);
  });

  it("rejects unknown tool names, tools without execute and a bad output mode at configuration time", () => {
    const { sendEmail } = mailer();
    const store = memoryStore();
    expect(() =>
      idempotentTools({ send_email: sendEmail }, { store, only: ["send_mail" as "send_email"] }),
    ).toThrow(/no tool named "send_mail"/);
    const clientSide = tool({ inputSchema: z.object({ ok: z.boolean() }), outputSchema: z.string() });
    expect(() => idempotentTool(clientSide, { name: "confirm", store })).toThrow(/no execute function/);
    expect(() =>
      idempotentTool(sendEmail, { name: "send_email", store, output: "plain" as "merge" }),
    ).toThrow(/option `output` must be "envelope" or "merge"/);
    expect(() => idempotentTool(sendEmail, { name: "", store })).toThrow(/option `name`/);
    expect(() => idempotentTool(sendEmail, { name: "send_email", store, intentFields: [] })).toThrow(
      /option `intentFields` must name at least one top-level argument/,
    );
  });

  it("passes tools without execute through when no tool is named", () => {
    const clientSide = tool({ inputSchema: z.object({ ok: z.boolean() }), outputSchema: z.string() });
    const tools = idempotentTools({ confirm: clientSide }, { store: memoryStore() });
    expect(tools.confirm).toBe(clientSide);
  });
});

describe("turnIdFromMessages", () => {
  it("is stable within a turn and new with every user message, even one repeating an earlier text", () => {
    const turn1: ModelMessage[] = [{ role: "user", content: "Send it" }];
    const id1 = turnIdFromMessages(turn1);
    const withSteps: ModelMessage[] = [
      ...turn1,
      {
        role: "assistant",
        content: [{ type: "tool-call", toolCallId: "a", toolName: "send_email", input: {} }],
      },
    ];
    expect(turnIdFromMessages(withSteps)).toBe(id1);
    const id2 = turnIdFromMessages([...withSteps, { role: "user", content: "Send it" }]);
    expect(id2).not.toBe(id1);
    expect(id2).toMatch(/^user-turn-2-[0-9a-f]{32}$/);
  });

  it("reads images as data, whatever their representation, and ignores provider options", () => {
    const bytes = new Uint8Array([1, 2, 3, 4]);
    const asBytes = turnIdFromMessages([
      { role: "user", content: [{ type: "image", image: bytes, mediaType: "image/png" }] },
    ]);
    const asBase64 = turnIdFromMessages([
      {
        role: "user",
        content: [{ type: "image", image: Buffer.from(bytes).toString("base64"), mediaType: "image/png" }],
        providerOptions: { anthropic: { cacheControl: { type: "ephemeral" } } },
      },
    ]);
    expect(asBytes).toBe(asBase64);
  });
});
