/**
 * `idempotool/loops`: idempotent tools for hand-written agent loops on OpenAI (Chat Completions
 * `tool_calls`, Responses `function_call`) and Anthropic (`tool_use`), or any provider through
 * {@link dispatchToolCalls}.
 *
 * A model repeats itself: the same call twice in one response, with two call ids, or again in the next
 * round of the same turn. Each call is keyed per intent (`intentKey(turnId, tool, intent fields)`), so
 * the repeats replay the first call's outcome and the tool runs once; a new user turn is a new intent and
 * runs again (Case 2 in docs/operation-models.md). The loops return the provider's own tool-result shapes.
 *
 * No provider SDK is imported: the functions read a few fields of the messages, typed as shapes the SDK
 * types fit. `ToolCallError`, `OutputMode` and `intentKey` are exported here for every agent integration
 * (`idempotool/ai-sdk`, `/openai-agents`, `/mastra` too).
 * @example
 * import { memoryStore } from "idempotool";
 * import { loopTool, runAnthropicToolUses } from "idempotool/loops";
 *
 * const sendEmail = loopTool(async (args: { to: string; subject: string }) => ({ messageId: `m-${args.to}` }), {
 *   name: "send_email",
 *   store: memoryStore(),
 *   intentFields: ["to", "subject"],
 * });
 * const reply = await runAnthropicToolUses(
 *   { content: [{ type: "tool_use", id: "toolu_1", name: "send_email", input: { to: "a@example.com", subject: "Hi" } }] },
 *   [sendEmail],
 *   { turnId: "msg_1" },
 * );
 * @module
 */

export { intentKey } from "../tool-calls/intent-key.js";
export { OutputMode } from "../tool-calls/model-output.js";
export { ToolCallError, ToolCallErrorCode } from "../tool-calls/tool-call-error.js";
export type {
  AnthropicContentBlockLike,
  AnthropicMessageLike,
  AnthropicToolResultBlock,
  AnthropicToolResultMessage,
} from "./anthropic.js";
export { runAnthropicToolUses } from "./anthropic.js";
export type { DispatchOptions } from "./dispatch.js";
export { dispatchToolCalls } from "./dispatch.js";
export type {
  LoopTool,
  LoopToolOptions,
  ToolCallOutcome,
  ToolCallRequest,
  TurnOptions,
} from "./loop-tool.js";
export { loopTool } from "./loop-tool.js";
export type { OpenAIChatMessageLike, OpenAIChatToolCallLike, OpenAIToolMessage } from "./openai-chat.js";
export { runOpenAIToolCalls } from "./openai-chat.js";
export type { OpenAIFunctionCallOutput, OpenAIResponsesItemLike } from "./openai-responses.js";
export { runOpenAIResponsesCalls } from "./openai-responses.js";
