/**
 * OpenAI Responses: run a response's `function_call` items and answer each with a `function_call_output`.
 */
import { type DispatchOptions, dispatchToolCalls } from "./dispatch.js";
import type { LoopTool, ToolCallRequest } from "./loop-tool.js";
import { jsonContent } from "./openai-chat.js";

/** The part of a Responses output item we read; every openai `ResponseOutputItem` fits. */
export interface OpenAIResponsesItemLike {
  readonly type: string;
  readonly call_id?: unknown;
  readonly name?: unknown;
  readonly arguments?: unknown;
}

/** The answer to one function call; fits openai's `ResponseInputItem.FunctionCallOutput`. */
export interface OpenAIFunctionCallOutput {
  type: "function_call_output";
  call_id: string;
  /** The JSON the model reads: the result (see the `output` option), or `{ "error": { code, message } }`. */
  output: string;
}

/**
 * Run the `function_call` items of an OpenAI Responses output (the `Response`, or its `output` array) and
 * return one `function_call_output` item per call, in order, ready to send as input of the next request.
 * Other items (messages, reasoning, built-in tool calls) are left alone. Identical calls (the same intent
 * in the same turn) run once, whatever their `call_id`; malformed JSON arguments and unknown tools come
 * back as error outputs, never as a throw.
 * @example
 * import OpenAI from "openai";
 * import type { ResponseInputItem } from "openai/resources/responses/responses";
 * import { runOpenAIResponsesCalls, type LoopTool } from "idempotool/loops";
 *
 * declare const client: OpenAI;
 * declare const tools: LoopTool[];
 * const input: ResponseInputItem[] = [{ role: "user", content: "Send Alice the summary" }];
 * const response = await client.responses.create({ model: "gpt-5", input });
 * input.push(...(response.output as ResponseInputItem[]));
 * input.push(...(await runOpenAIResponsesCalls(response, tools, { turnId: "msg_1" })));
 */
export async function runOpenAIResponsesCalls(
  output: readonly OpenAIResponsesItemLike[] | { readonly output: readonly OpenAIResponsesItemLike[] },
  tools: readonly LoopTool[],
  options: DispatchOptions,
): Promise<OpenAIFunctionCallOutput[]> {
  const items = Array.isArray(output)
    ? output
    : (output as { output: readonly OpenAIResponsesItemLike[] }).output;
  const requests: ToolCallRequest[] = items
    .filter((item) => item.type === "function_call")
    .map((item) => ({
      id: String(item.call_id),
      name: String(item.name),
      argumentsJson: typeof item.arguments === "string" ? item.arguments : "",
    }));
  const outcomes = await dispatchToolCalls(requests, tools, options);
  return outcomes.map((outcome) => ({
    type: "function_call_output",
    call_id: outcome.callId,
    output: jsonContent(outcome),
  }));
}
