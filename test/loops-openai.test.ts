/**
 * idempotool/loops against the real OpenAI SDK, offline: the client talks to a fake `fetch` that plays a
 * scripted model and records every request body, so the test sees what the SDK really sends next.
 */
import OpenAI from "openai";
import type { ChatCompletion, ChatCompletionMessageParam } from "openai/resources/chat/completions";
import type { Response as OpenAIResponse, ResponseInputItem } from "openai/resources/responses/responses";
import { describe, expect, it } from "vitest";
import { type FieldList, memoryStore } from "../src/index.js";
import { type LoopTool, loopTool, runOpenAIResponsesCalls, runOpenAIToolCalls } from "../src/loops/index.js";

/** A fake OpenAI endpoint: answers each request with the next scripted body and keeps what was sent. */
function fakeOpenAI(script: unknown[]) {
  const requests: Record<string, unknown>[] = [];
  const client = new OpenAI({
    apiKey: "sk-test",
    baseURL: "https://openai.test/v1",
    maxRetries: 0,
    fetch: async (_url, init) => {
      requests.push(JSON.parse(String(init?.body)) as Record<string, unknown>);
      const body = script.shift();
      if (body === undefined) return new Response('{"error":{"message":"script ended"}}', { status: 500 });
      return new Response(JSON.stringify(body), {
        status: 200,
        headers: { "content-type": "application/json" },
      });
    },
  });
  return { client, requests };
}

interface Email {
  to: string;
  subject: string;
  body: string;
}

const alice: Email = { to: "alice@example.com", subject: "Meeting summary", body: "Hi Alice, here it is." };

function emailTool(store = memoryStore(), similar?: { fields: FieldList<Email> }) {
  const sent: Email[] = [];
  const sendEmail = loopTool(
    async (args: Email) => {
      sent.push(args);
      await new Promise((resolve) => setTimeout(resolve, 10));
      return { messageId: `m-${sent.length}` };
    },
    {
      name: "send_email",
      store,
      parse: (input) => {
        const { to, subject, body } = (input ?? {}) as Partial<Email>;
        if (typeof to !== "string" || typeof subject !== "string" || typeof body !== "string") {
          throw new TypeError("send_email needs to, subject and body as strings");
        }
        return { to, subject, body };
      },
      intentFields: ["to", "subject"],
      ...(similar ? { similar } : {}),
    },
  );
  return { sent, sendEmail };
}

// --- Chat Completions -------------------------------------------------------------------------------

function chatToolCalls(...calls: { id: string; name?: string; arguments: string }[]): ChatCompletion {
  return {
    id: `chatcmpl-${calls.map((call) => call.id).join("-")}`,
    object: "chat.completion",
    created: 0,
    model: "gpt-test",
    choices: [
      {
        index: 0,
        finish_reason: "tool_calls",
        logprobs: null,
        message: {
          role: "assistant",
          content: null,
          refusal: null,
          tool_calls: calls.map((call) => ({
            id: call.id,
            type: "function" as const,
            function: { name: call.name ?? "send_email", arguments: call.arguments },
          })),
        },
      },
    ],
  };
}

function chatText(content: string): ChatCompletion {
  return {
    id: "chatcmpl-text",
    object: "chat.completion",
    created: 0,
    model: "gpt-test",
    choices: [
      {
        index: 0,
        finish_reason: "stop",
        logprobs: null,
        message: { role: "assistant", content, refusal: null },
      },
    ],
  };
}

/** A plain chat loop, as an application writes it, with the dispatcher in the middle. */
async function chatTurn(
  client: OpenAI,
  messages: ChatCompletionMessageParam[],
  tools: LoopTool[],
  turnId: string,
): Promise<void> {
  for (let round = 0; round < 5; round++) {
    const completion = await client.chat.completions.create({ model: "gpt-test", messages });
    const message = completion.choices[0]!.message;
    messages.push(message);
    if (!message.tool_calls?.length) return;
    messages.push(...(await runOpenAIToolCalls(message, tools, { turnId })));
  }
  throw new Error("the loop did not end");
}

const aliceJson = JSON.stringify(alice);
// The same arguments, another key order and spacing: still the same call.
const aliceJsonReordered = `{ "body": "${alice.body}", "subject": "${alice.subject}", "to": "${alice.to}" }`;

describe("runOpenAIToolCalls with the OpenAI SDK", () => {
  it("runs duplicate tool calls of one response once, replays the next round's repeat, and the SDK sends the answers", async () => {
    const { sent, sendEmail } = emailTool();
    const { client, requests } = fakeOpenAI([
      chatToolCalls({ id: "call_1", arguments: aliceJson }, { id: "call_2", arguments: aliceJsonReordered }),
      chatToolCalls({ id: "call_3", arguments: aliceJson }),
      chatText("Sent."),
    ]);
    const messages: ChatCompletionMessageParam[] = [
      { role: "user", content: "Send Alice the meeting summary" },
    ];

    await chatTurn(client, messages, [sendEmail], "msg_1");

    expect(sent).toHaveLength(1);
    expect(requests).toHaveLength(3);
    // The second request carries one tool message per tool call id, in order, as the API requires.
    const second = requests[1]!.messages as { role: string; tool_call_id?: string; content: string }[];
    expect(second.map((message) => message.role)).toEqual(["user", "assistant", "tool", "tool"]);
    expect(second.slice(2).map((message) => message.tool_call_id)).toEqual(["call_1", "call_2"]);
    const [ran, absorbed] = second.slice(2).map((message) => JSON.parse(message.content));
    expect(ran).toMatchObject({ was_replay: false, result: { messageId: "m-1" } });
    expect(absorbed).toMatchObject({ was_replay: true, result: { messageId: "m-1" } });
    expect(absorbed.idempotency_key).toBe(ran.idempotency_key);

    const third = requests[2]!.messages as { role: string; tool_call_id?: string; content: string }[];
    const last = third.at(-1)!;
    expect(last).toMatchObject({ role: "tool", tool_call_id: "call_3" });
    expect(JSON.parse(last.content)).toMatchObject({
      was_replay: true,
      result: { messageId: "m-1" },
      original_called_at: ran.original_called_at,
      note: expect.stringContaining("did not run again"),
    });
  });

  it("sends again in a new user turn (seed Case 2)", async () => {
    const { sent, sendEmail } = emailTool();
    const { client, requests } = fakeOpenAI([
      chatToolCalls({ id: "call_1", arguments: aliceJson }),
      chatText("Sent."),
      chatToolCalls({ id: "call_9", arguments: aliceJson }),
      chatText("Sent again."),
    ]);
    const messages: ChatCompletionMessageParam[] = [
      { role: "user", content: "Send Alice the meeting summary" },
    ];
    await chatTurn(client, messages, [sendEmail], "msg_1");
    messages.push({ role: "user", content: "She did not get it, send it again" });
    await chatTurn(client, messages, [sendEmail], "msg_2");

    expect(sent).toHaveLength(2);
    const answer = (requests[3]!.messages as { content: string }[]).at(-1)!;
    expect(JSON.parse(answer.content)).toMatchObject({ was_replay: false, result: { messageId: "m-2" } });
  });

  it("sends again in a new user turn with the near-duplicate hint when it is enabled (seed Case 2)", async () => {
    const { sent, sendEmail } = emailTool(memoryStore(), { fields: ["to"] });
    const { client, requests } = fakeOpenAI([
      chatToolCalls({ id: "call_1", arguments: aliceJson }),
      chatText("Sent."),
      chatToolCalls({ id: "call_9", arguments: aliceJson }),
      chatText("Sent again."),
    ]);
    const messages: ChatCompletionMessageParam[] = [
      { role: "user", content: "Send Alice the meeting summary" },
    ];
    await chatTurn(client, messages, [sendEmail], "msg_1");
    messages.push({ role: "user", content: "Send Alice the meeting summary" });
    await chatTurn(client, messages, [sendEmail], "msg_2");

    expect(sent).toHaveLength(2);
    const first = JSON.parse((requests[1]!.messages as { content: string }[]).at(-1)!.content);
    const second = JSON.parse((requests[3]!.messages as { content: string }[]).at(-1)!.content);
    expect(first.recent_similar_call).toBeUndefined();
    expect(second).toMatchObject({
      was_replay: false,
      recent_similar_call: { idempotency_key: first.idempotency_key },
    });
  });

  it("answers malformed JSON arguments and unknown tools with error results, and still runs the good call", async () => {
    const { sent, sendEmail } = emailTool();
    const { client, requests } = fakeOpenAI([
      chatToolCalls(
        { id: "call_bad", arguments: '{"to": "alice@example.com", ' },
        { id: "call_unknown", name: "delete_everything", arguments: "{}" },
        { id: "call_invalid", arguments: '{"to": 42}' },
        { id: "call_ok", arguments: aliceJson },
      ),
      chatText("Done."),
    ]);
    const messages: ChatCompletionMessageParam[] = [
      { role: "user", content: "Send Alice the meeting summary" },
    ];
    await chatTurn(client, messages, [sendEmail], "msg_1");

    expect(sent).toHaveLength(1);
    const answers = (requests[1]!.messages as { tool_call_id?: string; content: string }[]).slice(2);
    expect(answers.map((answer) => answer.tool_call_id)).toEqual([
      "call_bad",
      "call_unknown",
      "call_invalid",
      "call_ok",
    ]);
    const [bad, unknown, invalid, ok] = answers.map((answer) => JSON.parse(answer.content));
    expect(bad.error).toMatchObject({
      code: "invalid_arguments",
      message: expect.stringMatching(/not valid JSON/),
    });
    expect(unknown.error).toMatchObject({
      code: "unknown_tool",
      message: expect.stringMatching(/send_email/),
    });
    expect(invalid.error).toMatchObject({
      code: "invalid_arguments",
      message: expect.stringMatching(/to, subject/),
    });
    expect(ok).toMatchObject({ was_replay: false });
  });
});

// --- Responses ---------------------------------------------------------------------------------------

function responseWith(output: unknown[]): OpenAIResponse {
  return {
    id: "resp_1",
    object: "response",
    created_at: 0,
    model: "gpt-test",
    status: "completed",
    output,
    output_text: "",
    error: null,
    incomplete_details: null,
    instructions: null,
    metadata: null,
    parallel_tool_calls: true,
    temperature: null,
    tool_choice: "auto",
    tools: [],
    top_p: null,
  } as unknown as OpenAIResponse;
}

function functionCall(callId: string, args: string) {
  return {
    type: "function_call",
    id: `fc_${callId}`,
    call_id: callId,
    name: "send_email",
    arguments: args,
    status: "completed",
  };
}

function outputText(text: string) {
  return {
    type: "message",
    id: "msg_out",
    role: "assistant",
    status: "completed",
    content: [{ type: "output_text", text, annotations: [] }],
  };
}

async function responsesTurn(client: OpenAI, input: ResponseInputItem[], tools: LoopTool[], turnId: string) {
  for (let round = 0; round < 5; round++) {
    const response = await client.responses.create({ model: "gpt-test", input });
    input.push(...(response.output as ResponseInputItem[]));
    const outputs = await runOpenAIResponsesCalls(response, tools, { turnId });
    if (outputs.length === 0) return response;
    input.push(...outputs);
  }
  throw new Error("the loop did not end");
}

describe("runOpenAIResponsesCalls with the OpenAI SDK", () => {
  it("runs duplicate function calls once, replays the repeat, runs again in a new turn", async () => {
    const { sent, sendEmail } = emailTool();
    const { client, requests } = fakeOpenAI([
      responseWith([
        { type: "reasoning", id: "rs_1", summary: [] },
        functionCall("call_1", aliceJson),
        functionCall("call_2", aliceJsonReordered),
      ]),
      responseWith([functionCall("call_3", aliceJson)]),
      responseWith([outputText("Sent.")]),
      responseWith([functionCall("call_4", aliceJson)]),
      responseWith([outputText("Sent again.")]),
    ]);
    const input: ResponseInputItem[] = [{ role: "user", content: "Send Alice the meeting summary" }];

    const done = await responsesTurn(client, input, [sendEmail], "msg_1");
    expect(done.output_text).toBe("Sent.");
    expect(sent).toHaveLength(1);

    const second = requests[1]!.input as { type?: string; call_id?: string; output?: string }[];
    const outputs = second.filter((item) => item.type === "function_call_output");
    expect(outputs.map((item) => item.call_id)).toEqual(["call_1", "call_2"]);
    expect(outputs.map((item) => JSON.parse(item.output!).was_replay)).toEqual([false, true]);
    const third = (requests[2]!.input as typeof second).filter(
      (item) => item.type === "function_call_output",
    );
    expect(JSON.parse(third.at(-1)!.output!)).toMatchObject({
      was_replay: true,
      result: { messageId: "m-1" },
    });

    input.push({ role: "user", content: "Send it again please" });
    await responsesTurn(client, input, [sendEmail], "msg_2");
    expect(sent).toHaveLength(2);
  });
});
