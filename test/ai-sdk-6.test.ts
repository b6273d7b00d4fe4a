/**
 * idempotool/ai-sdk on the previous major of the AI SDK (6, installed as the `ai6` alias), where users still
 * are: the counted stories of test/ai-sdk-tools.test.ts (which runs on the current major) with 6's
 * generateText, streamText and tool(), and the tool context under its name on 6, `experimental_context`.
 */
import { generateText, simulateReadableStream, stepCountIs, streamText, type ToolSet, tool } from "ai6";
import { MockLanguageModelV3 } from "ai6/test";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { idempotentTools as idempotentToolsOf7 } from "../src/ai-sdk/index.js";
import { memoryStore } from "../src/index.js";
import { calls, streamedRepeats, text } from "./fixtures/ai-sdk-model.js";

/**
 * idempotentTools, typed for AI SDK 6. Here `import type … from "ai"` in idempotool's declarations resolves to 7,
 * installed beside 6; in a project on 6 it resolves to 6 (test/package-peers.test.ts type-checks that).
 */
const idempotentTools = idempotentToolsOf7 as unknown as <T extends ToolSet>(
  tools: T,
  options: Parameters<typeof idempotentToolsOf7>[1],
) => T;

const alice = { to: "alice@example.com", subject: "Meeting summary", body: "Hi Alice, here it is." };

/** A send_email tool of AI SDK 6 that counts real sends and takes a moment, so concurrent duplicates overlap. */
function mailer() {
  const sent: unknown[] = [];
  const sendEmail = tool({
    description: "Send an email",
    inputSchema: z.object({ to: z.string(), subject: z.string(), body: z.string() }),
    execute: async (input) => {
      sent.push(input);
      await new Promise((resolve) => setTimeout(resolve, 20));
      return { messageId: `m-${sent.length}` };
    },
  });
  return { sent, sendEmail };
}

interface Marked {
  readonly result: unknown;
  readonly was_replay: boolean;
}

/** The envelopes a run's steps handed the model. */
function outputs(
  steps: readonly { readonly toolResults: readonly { readonly output: unknown }[] }[],
): Marked[] {
  return steps.flatMap((step) => step.toolResults.map((result) => result.output as Marked));
}

describe("idempotentTools on AI SDK 6", () => {
  it("runs identical calls of one step once and replays the repeat of the next step", async () => {
    const { sent, sendEmail } = mailer();
    const tools = idempotentTools({ send_email: sendEmail }, { store: memoryStore() });
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
      prompt: "Send Alice the summary",
    });

    expect(sent).toHaveLength(1);
    const seen = outputs(result.steps);
    expect(seen).toHaveLength(3);
    for (const output of seen) expect(output.result).toEqual({ messageId: "m-1" });
    expect(seen.filter((output) => output.was_replay)).toHaveLength(2);
    expect(result.text).toBe("Sent.");
  });

  it("takes the turn id from experimental_context when told to", async () => {
    const { sent, sendEmail } = mailer();
    const tools = idempotentTools(
      { send_email: sendEmail },
      {
        store: memoryStore(),
        // AI SDK 6's execution options carry the context as experimental_context.
        turnId: (options) =>
          (options as { experimental_context?: { turn: string } }).experimental_context?.turn ?? "",
      },
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
      experimental_context: { turn: "msg-1" },
    });
    const again = await generateText({
      model,
      tools,
      stopWhen: stepCountIs(3),
      prompt: "Please send Alice the summary",
      experimental_context: { turn: "msg-1" },
    });
    expect(sent).toHaveLength(1);
    expect(outputs(again.steps)[0]!.was_replay).toBe(true);
  });

  it("dedupes concurrent duplicates and later repeats while streaming", async () => {
    const { sent, sendEmail } = mailer();
    const tools = idempotentTools({ send_email: sendEmail }, { store: memoryStore() });
    const streams = streamedRepeats(alice);
    const model = new MockLanguageModelV3({
      doStream: streams.map((chunks) => ({ stream: simulateReadableStream({ chunks }) })),
    });
    const result = streamText({ model, tools, stopWhen: stepCountIs(5), prompt: "Send Alice the summary" });
    const seen = outputs(await result.steps);
    expect(sent).toHaveLength(1);
    expect(seen.map((output) => output.was_replay).sort()).toEqual([false, true, true]);
  });
});
