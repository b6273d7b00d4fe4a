/**
 * idempotool/loops against the real Anthropic SDK, offline (a fake `fetch` plays the model), on the
 * embedded SQLite store: the dedup holds across a restart of the agent between two rounds.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import type { Message, MessageParam, ToolResultBlockParam } from "@anthropic-ai/sdk/resources/messages";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { FieldList } from "../src/index.js";
import { type LoopTool, loopTool, runAnthropicToolUses } from "../src/loops/index.js";
import { type SqliteStore, sqliteStore } from "../src/sqlite/index.js";

function fakeAnthropic(script: Message[]) {
  const requests: { messages: MessageParam[] }[] = [];
  const client = new Anthropic({
    apiKey: "test-key",
    baseURL: "https://anthropic.test",
    maxRetries: 0,
    fetch: async (_url, init) => {
      requests.push(JSON.parse(String(init?.body)) as { messages: MessageParam[] });
      const body = script.shift();
      if (!body) return new Response('{"type":"error","error":{"message":"script ended"}}', { status: 500 });
      return new Response(JSON.stringify(body), {
        status: 200,
        headers: { "content-type": "application/json" },
      });
    },
  });
  return { client, requests };
}

function assistant(content: unknown[], stopReason: "tool_use" | "end_turn"): Message {
  return {
    id: "msg_model",
    type: "message",
    role: "assistant",
    model: "claude-test",
    content,
    stop_reason: stopReason,
    stop_sequence: null,
    usage: { input_tokens: 10, output_tokens: 5 },
  } as unknown as Message;
}

function toolUse(id: string, input: unknown, name = "send_email") {
  return { type: "tool_use", id, name, input };
}

interface Email {
  to: string;
  subject: string;
  body: string;
}

const alice: Email = { to: "alice@example.com", subject: "Meeting summary", body: "Hi Alice, here it is." };

let dir: string;
let stores: SqliteStore[];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "idempotool-anthropic-"));
  stores = [];
});

afterEach(async () => {
  for (const store of stores) await store.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The agent's tools on a fresh connection to the SQLite file, as a restarted process would open them. */
function agentTools(sent: Email[], similar?: { fields: FieldList<Email> }): LoopTool[] {
  const store = sqliteStore({ path: join(dir, "idempotool.db") });
  stores.push(store);
  return [
    loopTool(
      async (args: Email) => {
        sent.push(args);
        return { messageId: `m-${sent.length}` };
      },
      {
        name: "send_email",
        store,
        parse: (input) => input as Email,
        intentFields: ["to", "subject"],
        ...(similar ? { similar } : {}),
      },
    ),
  ];
}

async function anthropicRound(
  client: Anthropic,
  messages: MessageParam[],
  tools: LoopTool[],
  turnId: string,
) {
  const message = await client.messages.create({ model: "claude-test", max_tokens: 1024, messages });
  messages.push({ role: "assistant", content: message.content });
  if (message.stop_reason !== "tool_use") return false;
  messages.push(await runAnthropicToolUses(message, tools, { turnId, scope: "user-42" }));
  return true;
}

describe("runAnthropicToolUses with the Anthropic SDK", () => {
  it("runs duplicate tool uses once, replays the repeat after a restart, and the SDK sends the results", async () => {
    const sent: Email[] = [];
    const { client, requests } = fakeAnthropic([
      assistant(
        [{ type: "text", text: "Sending." }, toolUse("toolu_1", alice), toolUse("toolu_2", alice)],
        "tool_use",
      ),
      assistant([toolUse("toolu_3", alice)], "tool_use"),
      assistant([{ type: "text", text: "Sent." }], "end_turn"),
    ]);
    const messages: MessageParam[] = [{ role: "user", content: "Send Alice the meeting summary" }];

    expect(await anthropicRound(client, messages, agentTools(sent), "msg_1")).toBe(true);
    // The agent restarts between two rounds of one turn: the record is on disk.
    expect(await anthropicRound(client, messages, agentTools(sent), "msg_1")).toBe(true);
    expect(await anthropicRound(client, messages, agentTools(sent), "msg_1")).toBe(false);

    expect(sent).toHaveLength(1);
    const answer = requests[1]!.messages.at(-1)!;
    expect(answer.role).toBe("user");
    const blocks = answer.content as {
      type: string;
      tool_use_id: string;
      content: string;
      is_error?: boolean;
    }[];
    expect(blocks.map((block) => [block.type, block.tool_use_id])).toEqual([
      ["tool_result", "toolu_1"],
      ["tool_result", "toolu_2"],
    ]);
    expect(blocks.every((block) => block.is_error === undefined)).toBe(true);
    expect(blocks.map((block) => JSON.parse(block.content).was_replay)).toEqual([false, true]);

    const later = requests[2]!.messages.at(-1)!.content as { tool_use_id: string; content: string }[];
    expect(later).toHaveLength(1);
    expect(later[0]!.tool_use_id).toBe("toolu_3");
    expect(JSON.parse(later[0]!.content)).toMatchObject({ was_replay: true, result: { messageId: "m-1" } });
  });

  it("sends again when the user asks again in a new turn", async () => {
    const sent: Email[] = [];
    const tools = agentTools(sent);
    const { client } = fakeAnthropic([
      assistant([toolUse("toolu_1", alice)], "tool_use"),
      assistant([{ type: "text", text: "Sent." }], "end_turn"),
      assistant([toolUse("toolu_7", alice)], "tool_use"),
      assistant([{ type: "text", text: "Sent again." }], "end_turn"),
    ]);
    const messages: MessageParam[] = [{ role: "user", content: "Send Alice the meeting summary" }];
    while (await anthropicRound(client, messages, tools, "msg_1"));
    messages.push({ role: "user", content: "Again please, she lost it" });
    while (await anthropicRound(client, messages, tools, "msg_2"));
    expect(sent).toHaveLength(2);
  });

  it("sends again in a new turn with the near-duplicate hint when it is enabled (seed Case 2)", async () => {
    const sent: Email[] = [];
    const tools = agentTools(sent, { fields: ["to"] });
    const { client, requests } = fakeAnthropic([
      assistant([toolUse("toolu_1", { ...alice, to: "hint@example.com" })], "tool_use"),
      assistant([{ type: "text", text: "Sent." }], "end_turn"),
      assistant([toolUse("toolu_7", { ...alice, to: "hint@example.com" })], "tool_use"),
      assistant([{ type: "text", text: "Sent again." }], "end_turn"),
    ]);
    const messages: MessageParam[] = [{ role: "user", content: "Send the summary to hint@example.com" }];
    while (await anthropicRound(client, messages, tools, "msg_hint_1"));
    messages.push({ role: "user", content: "Send the summary to hint@example.com" });
    while (await anthropicRound(client, messages, tools, "msg_hint_2"));

    expect(sent).toHaveLength(2);
    const results = requests
      .flatMap((request) => request.messages.slice(-1))
      .flatMap((message) => (Array.isArray(message.content) ? message.content : []))
      .filter((block): block is ToolResultBlockParam => block.type === "tool_result");
    const second = JSON.parse(String(results.at(-1)!.content));
    expect(second).toMatchObject({
      was_replay: false,
      recent_similar_call: { called_at: expect.any(String) },
    });
  });

  it("marks failures as is_error results the model reads", async () => {
    const sent: Email[] = [];
    const tools = agentTools(sent);
    const { client, requests } = fakeAnthropic([
      assistant(
        [
          toolUse("toolu_1", alice),
          toolUse("toolu_2", { ...alice, body: "A different body for the same intent" }),
          toolUse("toolu_3", {}, "wire_money"),
        ],
        "tool_use",
      ),
      assistant([{ type: "text", text: "Done." }], "end_turn"),
    ]);
    const messages: MessageParam[] = [{ role: "user", content: "Send Alice the meeting summary" }];
    while (await anthropicRound(client, messages, tools, "msg_1"));

    expect(sent).toHaveLength(1);
    const blocks = requests[1]!.messages.at(-1)!.content as { content: string; is_error?: boolean }[];
    expect(blocks[0]!.is_error).toBeUndefined();
    expect(blocks[1]).toMatchObject({
      is_error: true,
      content: expect.stringMatching(
        /already called for this same request .* Do not retry it with changed arguments/,
      ),
    });
    expect(blocks[2]).toMatchObject({
      is_error: true,
      content: expect.stringMatching(/no tool named "wire_money"/),
    });
  });
});
