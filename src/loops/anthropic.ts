/**
 * Anthropic Messages: run a message's `tool_use` blocks and answer them in one user message of
 * `tool_result` blocks.
 */
import { type DispatchOptions, dispatchToolCalls } from "./dispatch.js";
import type { LoopTool, ToolCallRequest } from "./loop-tool.js";

/** The part of an assistant message we read; @anthropic-ai/sdk's `Message` fits. */
export interface AnthropicMessageLike {
  readonly content: readonly AnthropicContentBlockLike[];
}

/** A content block; `tool_use` blocks carry `id`, `name` and `input`. Every `ContentBlock` fits. */
export interface AnthropicContentBlockLike {
  readonly type: string;
  readonly id?: unknown;
  readonly name?: unknown;
  readonly input?: unknown;
}

/** The answer to one tool use; fits @anthropic-ai/sdk's `ToolResultBlockParam`. */
export interface AnthropicToolResultBlock {
  type: "tool_result";
  tool_use_id: string;
  /** The result as JSON (see the `output` option), or the error message for the model. */
  content: string;
  /** Present (true) when the call gave no result. */
  is_error?: boolean;
}

/** The user message that answers a turn's tool uses; fits @anthropic-ai/sdk's `MessageParam`. */
export interface AnthropicToolResultMessage {
  role: "user";
  content: AnthropicToolResultBlock[];
}

/**
 * Run the `tool_use` blocks of an Anthropic message and return the user message that answers them: one
 * `tool_result` block per tool use, in order, ready to append after the assistant message. Identical
 * calls (the same intent in the same turn) run once, whatever their `tool_use_id`; unknown tools and
 * rejected arguments come back as `is_error` results, never as a throw. Call it when `stop_reason` is
 * `"tool_use"`: a message without tool uses gives a user message with no blocks.
 * @example
 * import Anthropic from "@anthropic-ai/sdk";
 * import type { MessageParam } from "@anthropic-ai/sdk/resources/messages";
 * import { runAnthropicToolUses, type LoopTool } from "idempotool/loops";
 *
 * declare const client: Anthropic;
 * declare const tools: LoopTool[];
 * const messages: MessageParam[] = [{ role: "user", content: "Send Alice the summary" }];
 * const message = await client.messages.create({ model: "claude-sonnet-4-5", max_tokens: 1024, messages });
 * messages.push(
 *   { role: "assistant", content: message.content },
 *   await runAnthropicToolUses(message, tools, { turnId: "msg_1" }),
 * );
 */
export async function runAnthropicToolUses(
  message: AnthropicMessageLike,
  tools: readonly LoopTool[],
  options: DispatchOptions,
): Promise<AnthropicToolResultMessage> {
  const requests: ToolCallRequest[] = message.content
    .filter((block) => block.type === "tool_use")
    .map((block) => ({ id: String(block.id), name: String(block.name), input: block.input }));
  const outcomes = await dispatchToolCalls(requests, tools, options);
  return {
    role: "user",
    content: outcomes.map(
      (outcome): AnthropicToolResultBlock =>
        outcome.ok
          ? {
              type: "tool_result",
              tool_use_id: outcome.callId,
              content: JSON.stringify(outcome.output) ?? "null",
            }
          : {
              type: "tool_result",
              tool_use_id: outcome.callId,
              content: outcome.error.message,
              is_error: true,
            },
    ),
  };
}
