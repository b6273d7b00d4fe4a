/**
 * OpenAI Chat Completions: run an assistant message's `tool_calls` and answer each with a `tool` message.
 */
import { type DispatchOptions, dispatchToolCalls } from "./dispatch.js";
import type { LoopTool, ToolCallOutcome, ToolCallRequest } from "./loop-tool.js";

/** The part of an assistant message we read; openai's `ChatCompletionMessage` fits. */
export interface OpenAIChatMessageLike {
  readonly tool_calls?: readonly OpenAIChatToolCallLike[] | null | undefined;
}

/** A function tool call (`arguments` is a JSON string) or a custom tool call (free-form `input`). */
export interface OpenAIChatToolCallLike {
  readonly id: string;
  readonly type: string;
  readonly function?: { readonly name: string; readonly arguments: string };
  readonly custom?: { readonly name: string; readonly input: string };
}

/** The answer to one tool call; fits openai's `ChatCompletionToolMessageParam`. */
export interface OpenAIToolMessage {
  role: "tool";
  tool_call_id: string;
  /** The JSON the model reads: the result (see the `output` option), or `{ "error": { code, message } }`. */
  content: string;
}

/**
 * Run the tool calls of an OpenAI chat completion message and return one `tool` message per call, in
 * order, ready to append after the assistant message for the next request. Identical calls (the same
 * intent in the same turn) run once, whatever their `tool_call_id`; malformed JSON arguments and unknown
 * tools come back as error results, never as a throw.
 * @example
 * import OpenAI from "openai";
 * import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
 * import { runOpenAIToolCalls, type LoopTool } from "idempotool/loops";
 *
 * declare const client: OpenAI;
 * declare const tools: LoopTool[];
 * const messages: ChatCompletionMessageParam[] = [{ role: "user", content: "Send Alice the summary" }];
 * const completion = await client.chat.completions.create({ model: "gpt-5", messages });
 * const message = completion.choices[0]!.message;
 * messages.push(message, ...(await runOpenAIToolCalls(message, tools, { turnId: "msg_1" })));
 */
export async function runOpenAIToolCalls(
  message: OpenAIChatMessageLike,
  tools: readonly LoopTool[],
  options: DispatchOptions,
): Promise<OpenAIToolMessage[]> {
  const requests: ToolCallRequest[] = (message.tool_calls ?? []).map((call) =>
    call.function
      ? { id: call.id, name: call.function.name, argumentsJson: call.function.arguments }
      : { id: call.id, name: call.custom?.name ?? "", input: call.custom?.input },
  );
  const outcomes = await dispatchToolCalls(requests, tools, options);
  return outcomes.map((outcome) => ({
    role: "tool",
    tool_call_id: outcome.callId,
    content: jsonContent(outcome),
  }));
}

/** The text a model reads for an outcome, in the OpenAI shapes (which have no error flag). */
export function jsonContent(outcome: ToolCallOutcome): string {
  if (outcome.ok) return JSON.stringify(outcome.output) ?? "null";
  return JSON.stringify({ error: { code: outcome.error.code, message: outcome.error.message } });
}
