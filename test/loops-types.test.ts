/**
 * Type tests: the loops depend on a few fields of the providers' messages, typed as shapes. These prove
 * that the real SDK types fit the shapes, and that what the loops return fits what the SDKs accept next.
 * `tsc --noEmit` checks them; vitest runs the runtime half.
 */
import type { Message, MessageParam, ToolResultBlockParam } from "@anthropic-ai/sdk/resources/messages";
import type {
  ChatCompletionMessage,
  ChatCompletionMessageParam,
  ChatCompletionToolMessageParam,
} from "openai/resources/chat/completions";
import type {
  Response as OpenAIResponse,
  ResponseInputItem,
  ResponseOutputItem,
} from "openai/resources/responses/responses";
import { describe, expectTypeOf, it } from "vitest";
import type {
  AnthropicMessageLike,
  AnthropicToolResultBlock,
  AnthropicToolResultMessage,
  OpenAIChatMessageLike,
  OpenAIFunctionCallOutput,
  OpenAIResponsesItemLike,
  OpenAIToolMessage,
  runOpenAIResponsesCalls,
} from "../src/loops/index.js";

describe("provider shapes", () => {
  it("accept the OpenAI SDK's messages and give back what it sends", () => {
    expectTypeOf<ChatCompletionMessage>().toExtend<OpenAIChatMessageLike>();
    expectTypeOf<OpenAIToolMessage>().toExtend<ChatCompletionToolMessageParam>();
    expectTypeOf<OpenAIToolMessage>().toExtend<ChatCompletionMessageParam>();

    expectTypeOf<ResponseOutputItem>().toExtend<OpenAIResponsesItemLike>();
    expectTypeOf<OpenAIResponse>().toExtend<Parameters<typeof runOpenAIResponsesCalls>[0]>();
    expectTypeOf<OpenAIResponse["output"]>().toExtend<Parameters<typeof runOpenAIResponsesCalls>[0]>();
    expectTypeOf<OpenAIFunctionCallOutput>().toExtend<ResponseInputItem>();
    expectTypeOf<OpenAIFunctionCallOutput>().toExtend<ResponseInputItem.FunctionCallOutput>();
  });

  it("accept the Anthropic SDK's messages and give back what it sends", () => {
    expectTypeOf<Message>().toExtend<AnthropicMessageLike>();
    expectTypeOf<AnthropicToolResultBlock>().toExtend<ToolResultBlockParam>();
    expectTypeOf<AnthropicToolResultMessage>().toExtend<MessageParam>();
  });
});
