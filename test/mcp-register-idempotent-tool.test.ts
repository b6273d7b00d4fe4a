/**
 * registerIdempotentTool against the real MCP SDK: a real Client talks to a real McpServer over the
 * SDK's in-memory transport. Nothing of the SDK is mocked.
 */

import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import * as zm from "zod/mini";
import { z as z3 } from "zod/v3";
import { z as z4 } from "zod/v4";
import {
  definitiveFailure,
  fingerprint,
  type IdempotencyStore,
  isIdempotencyError,
  memoryStore,
  notExecuted,
  RecordStatus,
} from "../src/index.js";
import {
  type IdempotencyErrorInfo,
  type IdempotencyInfo,
  type IdempotentToolOptions,
  idempotentExecute,
  keyDescription,
  MetaKey,
  registerIdempotentTool,
  type ToolExtraOf,
} from "../src/mcp/index.js";
import { fakeClock } from "../src/testing/fake-clock.js";
import { type Connected, callTool, connectInMemory, textOf } from "./fixtures/mcp-harness.js";

const open: Connected[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
});

interface SlackPost {
  readonly channel: string;
  readonly text: string;
  readonly key: string;
  /** Whether the client had cancelled its request by the time the post went out. */
  readonly cancelled: boolean;
}

/** A server with `send_slack_message`, whose every run is recorded in `posts`. */
function slackServer(
  options: Partial<IdempotentToolOptions<{ channel: string; text: string }, ToolExtraOf<McpServer>>> & {
    delayMs?: number;
  } = {},
) {
  const posts: SlackPost[] = [];
  const { delayMs = 0, ...rest } = options;
  const store = rest.store ?? memoryStore();
  const server = new McpServer({ name: "slack", version: "1.0.0" });
  registerIdempotentTool(
    server,
    "send_slack_message",
    {
      title: "Send a Slack message",
      description: "Post a message to a Slack channel.",
      inputSchema: { channel: z.string(), text: z.string() },
      annotations: { destructiveHint: false, openWorldHint: true },
    },
    async ({ channel, text }, extra, context) => {
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
      posts.push({ channel, text, key: context.key, cancelled: extra.signal.aborted });
      const ts = `1700000000.${String(posts.length).padStart(6, "0")}`;
      return {
        content: [{ type: "text", text: `Posted to ${channel} (ts ${ts}).` }],
        structuredContent: { channel, ts },
      };
    },
    { ...rest, store },
  );
  return { server, posts, store };
}

async function connect(server: McpServer, authInfo?: Parameters<typeof connectInMemory>[1]) {
  const connected = await connectInMemory(server, authInfo);
  open.push(connected);
  return connected;
}

function envelopeOf(result: CallToolResult): IdempotencyInfo {
  return result._meta?.[MetaKey.envelope] as IdempotencyInfo;
}

function errorOf(result: CallToolResult): IdempotencyErrorInfo {
  return result._meta?.[MetaKey.error] as IdempotencyErrorInfo;
}

async function until(check: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const hello = { channel: "#general", text: "Deploy finished", idempotency_key: "deploy-42-announce" };

describe("registerIdempotentTool over the MCP SDK's in-memory transport", () => {
  it("runs the tool once for two calls with the same key, and the repeat says it is a replay", async () => {
    const { server, posts } = slackServer();
    const { client } = await connect(server);

    const first = await callTool(client, "send_slack_message", hello);
    const again = await callTool(client, "send_slack_message", hello);

    expect(posts).toHaveLength(1);
    expect(first.isError).toBeFalsy();
    expect(first.structuredContent).toMatchObject({ channel: "#general", ts: "1700000000.000001" });
    expect(first.structuredContent?._idempotency).toMatchObject({ was_replay: false });
    expect(textOf(first)).toBe("Posted to #general (ts 1700000000.000001).");

    const info = again.structuredContent?._idempotency as IdempotencyInfo;
    expect(info.was_replay).toBe(true);
    expect(info.original_called_at).toBe(envelopeOf(first).original_called_at);
    expect(info.idempotency_key).toBe("deploy-42-announce");
    expect(again.structuredContent).toMatchObject({ channel: "#general", ts: "1700000000.000001" });
    expect(envelopeOf(again)).toEqual(info);
    expect(again.content[0]).toEqual(first.content[0]);
    expect(textOf(again)).toContain(
      `This is a replay: this action already ran at ${info.original_called_at} under idempotency_key "deploy-42-announce" and was not repeated.`,
    );
  });

  it("absorbs a tools/call re-sent with a new request id after the client timed out while the server finished", async () => {
    const { server, posts, store } = slackServer({ delayMs: 200 });
    const { client, toolCallIds } = await connect(server);

    const timedOut = await callTool(client, "send_slack_message", hello, { timeout: 30 }).catch(
      (e: unknown) => e,
    );
    expect(timedOut).toBeInstanceOf(McpError);
    expect((timedOut as McpError).code).toBe(-32001); // RequestTimeout
    // The client gave up and cancelled; the server finished the send anyway.
    await until(async () => {
      const record = await store.get({ scope: "default", key: hello.idempotency_key }, Date.now());
      return record?.status === RecordStatus.completed;
    });
    expect(posts).toHaveLength(1);
    expect(posts[0]?.cancelled).toBe(true);

    const retried = await callTool(client, "send_slack_message", hello);
    const retriedAgain = await callTool(client, "send_slack_message", hello);

    expect(new Set(toolCallIds).size).toBe(3);
    expect(posts).toHaveLength(1);
    expect(envelopeOf(retried).was_replay).toBe(true);
    expect(envelopeOf(retriedAgain).was_replay).toBe(true);
    expect(retried.structuredContent).toMatchObject({ ts: "1700000000.000001" });
  });

  it("makes a repeat that arrives while the first call runs wait for it, then replay its result", async () => {
    const { server, posts } = slackServer({ delayMs: 100 });
    const { client } = await connect(server);

    const [a, b] = await Promise.all([
      callTool(client, "send_slack_message", hello),
      callTool(client, "send_slack_message", hello),
    ]);

    expect(posts).toHaveLength(1);
    expect([envelopeOf(a).was_replay, envelopeOf(b).was_replay].sort()).toEqual([false, true]);
    expect(a.structuredContent?.ts).toBe(b.structuredContent?.ts);
  });

  it("answers a call without idempotency_key with the SDK's validation error result, and runs nothing", async () => {
    const { server, posts } = slackServer();
    const { client } = await connect(server);

    const { idempotency_key: _, ...noKey } = hello;
    const missing = await callTool(client, "send_slack_message", noKey);
    const empty = await callTool(client, "send_slack_message", { ...hello, idempotency_key: "" });
    const tooLong = await callTool(client, "send_slack_message", {
      ...hello,
      idempotency_key: "k".repeat(256),
    });
    const notString = await callTool(client, "send_slack_message", { ...hello, idempotency_key: 42 });

    expect(posts).toHaveLength(0);
    for (const result of [missing, empty, tooLong, notString]) {
      expect(result.isError).toBe(true);
      expect(textOf(result)).toContain("Input validation error");
      expect(textOf(result)).toContain("idempotency_key");
    }
    expect(textOf(missing)).toContain("idempotency_key is required: a string of 1-255 characters");
    expect(textOf(tooLong)).toContain("at most 255 characters");
  });

  it("answers the same key with different arguments with a conflict result, and runs nothing", async () => {
    const { server, posts } = slackServer();
    const { client } = await connect(server);

    await callTool(client, "send_slack_message", hello);
    const conflict = await callTool(client, "send_slack_message", { ...hello, text: "Deploy finished!" });

    expect(posts).toHaveLength(1);
    expect(conflict.isError).toBe(true);
    expect(conflict.structuredContent).toBeUndefined();
    expect(textOf(conflict)).toContain("Conflict");
    expect(textOf(conflict)).toContain("Do not retry with new arguments under this key");
    expect(textOf(conflict)).toContain("new idempotency_key");
    expect(errorOf(conflict)).toEqual({
      code: "idempotency_key_conflict",
      idempotency_key: hello.idempotency_key,
      was_replay: false,
    });
  });

  it("runs again for a new key: a new key is a new intent, even with the same arguments", async () => {
    const { server, posts } = slackServer();
    const { client } = await connect(server);

    await callTool(client, "send_slack_message", hello);
    const second = await callTool(client, "send_slack_message", {
      ...hello,
      idempotency_key: "deploy-43-announce",
    });

    expect(posts).toHaveLength(2);
    expect(envelopeOf(second).was_replay).toBe(false);
  });

  it("lists idempotency_key as required, describing the dedup window, with honest annotations", async () => {
    const { server } = slackServer({ ttlMs: 2 * 60 * 60 * 1000 });
    const { client } = await connect(server);

    const { tools } = await client.listTools();
    const tool = tools.find((t) => t.name === "send_slack_message")!;

    expect(tool.inputSchema.required).toEqual(expect.arrayContaining(["channel", "text", "idempotency_key"]));
    expect(tool.inputSchema.properties?.idempotency_key).toEqual({
      type: "string",
      minLength: 1,
      maxLength: 255,
      description: keyDescription(2 * 60 * 60 * 1000),
    });
    expect(keyDescription(2 * 60 * 60 * 1000)).toContain("The server dedupes within 2 hours");
    expect(tool.annotations).toEqual({ destructiveHint: false, openWorldHint: true, idempotentHint: true });
    expect(tool.title).toBe("Send a Slack message");
    expect(tool.description).toBe("Post a message to a Slack channel.");
  });

  it("states the default window as 24 hours, and overrides a contrary idempotentHint", async () => {
    const server = new McpServer({ name: "s", version: "1.0.0" });
    registerIdempotentTool(
      server,
      "charge",
      { inputSchema: { cents: z.number().int() }, annotations: { idempotentHint: false } },
      () => ({ content: [] }),
      { store: memoryStore() },
    );
    const { client } = await connect(server);
    const [tool] = (await client.listTools()).tools;

    expect(tool?.annotations).toEqual({ idempotentHint: true });
    expect(tool?.inputSchema.properties?.idempotency_key).toMatchObject({
      description: expect.stringContaining("The server dedupes within 24 hours"),
    });
  });

  it("hands the handler its arguments without the key, the SDK's extra and the idempotency context", async () => {
    const server = new McpServer({ name: "s", version: "1.0.0" });
    const seen: unknown[] = [];
    registerIdempotentTool(
      server,
      "send",
      { inputSchema: { to: z.string() } },
      (args, extra, context) => {
        seen.push(
          args,
          typeof extra.requestId,
          extra.signal instanceof AbortSignal,
          context.key,
          context.attempt,
        );
        return { content: [{ type: "text", text: "ok" }] };
      },
      { store: memoryStore() },
    );
    const { client } = await connect(server);

    await callTool(client, "send", { to: "alice", idempotency_key: "k1" });

    expect(seen).toEqual([{ to: "alice" }, "number", true, "k1", 1]);
  });

  it("fingerprints only the significant fields when told to", async () => {
    const server = new McpServer({ name: "s", version: "1.0.0" });
    let runs = 0;
    registerIdempotentTool(
      server,
      "send",
      { inputSchema: { to: z.string(), trace: z.string().optional() } },
      () => {
        runs++;
        return { content: [{ type: "text", text: "sent" }] };
      },
      { store: memoryStore(), significant: ["to"] },
    );
    const { client } = await connect(server);

    await callTool(client, "send", { to: "alice", trace: "t-1", idempotency_key: "k" });
    const again = await callTool(client, "send", { to: "alice", trace: "t-2", idempotency_key: "k" });

    expect(runs).toBe(1);
    expect(envelopeOf(again).was_replay).toBe(true);
  });

  it("answers an error, not another call's result, when the arguments have none of the significant fields", async () => {
    const server = new McpServer({ name: "s", version: "1.0.0" });
    let runs = 0;
    registerIdempotentTool(
      server,
      "send",
      { inputSchema: { to: z.string() } },
      () => {
        runs++;
        return { content: [{ type: "text", text: "sent" }] };
      },
      // A misspelt list, as JavaScript lets one through.
      { store: memoryStore(), significant: ["too" as "to"] },
    );
    const { client } = await connect(server);

    const alice = await callTool(client, "send", { to: "alice", idempotency_key: "k" });
    const bob = await callTool(client, "send", { to: "bob", idempotency_key: "k" });

    expect(runs).toBe(0);
    for (const result of [alice, bob]) {
      expect(result.isError).toBe(true);
      expect(errorOf(result).code).toBe("invalid_arguments");
      expect(textOf(result)).toMatch(/none of the fields `significant` names \(too\)/);
    }
  });

  it("adds no structuredContent to a text-only result, and marks its replay in the text and _meta", async () => {
    const server = new McpServer({ name: "s", version: "1.0.0" });
    registerIdempotentTool(
      server,
      "send",
      { inputSchema: { to: z.string() } },
      ({ to }) => ({ content: [{ type: "text", text: `sent to ${to}` }] }),
      { store: memoryStore() },
    );
    const { client } = await connect(server);

    const first = await callTool(client, "send", { to: "alice", idempotency_key: "k" });
    const again = await callTool(client, "send", { to: "alice", idempotency_key: "k" });

    expect(first.structuredContent).toBeUndefined();
    expect(again.structuredContent).toBeUndefined();
    expect(textOf(first)).toBe("sent to alice");
    expect(textOf(again)).toMatch(/^sent to alice\nThis is a replay: /);
    expect(envelopeOf(again)).toMatchObject({ was_replay: true, idempotency_key: "k" });
  });

  it("tells the model of a recent similar call in the text, structuredContent._idempotency and _meta", async () => {
    const { server, posts } = slackServer({ similar: { fields: ["channel"], windowMs: 60_000 } });
    const { client } = await connect(server);

    const first = await callTool(client, "send_slack_message", hello);
    const second = await callTool(client, "send_slack_message", {
      ...hello,
      text: "Deploy finished!",
      idempotency_key: "deploy-42-announce-again",
    });

    expect(posts).toHaveLength(2);
    expect(envelopeOf(first).recent_similar_call).toBeUndefined();
    expect(textOf(first)).toBe("Posted to #general (ts 1700000000.000001).");
    const similar = {
      called_at: envelopeOf(first).original_called_at,
      idempotency_key: "deploy-42-announce",
    };
    expect(envelopeOf(second)).toMatchObject({ was_replay: false, recent_similar_call: similar });
    expect(second.structuredContent?._idempotency).toMatchObject({
      was_replay: false,
      recent_similar_call: similar,
    });
    expect(textOf(second)).toBe(
      "Posted to #general (ts 1700000000.000002).\n" +
        'Note: this action ran now as a new request under idempotency_key "deploy-42-announce-again", but a ' +
        `similar call already completed at ${similar.called_at} under idempotency_key "deploy-42-announce". ` +
        "If the user may not have meant to repeat it, tell them it was done twice.",
    );
  });

  it("records a returned isError result as the outcome and replays it", async () => {
    const server = new McpServer({ name: "s", version: "1.0.0" });
    let runs = 0;
    registerIdempotentTool(
      server,
      "send",
      { inputSchema: { channel: z.string() } },
      () => {
        runs++;
        return { content: [{ type: "text", text: "channel_not_found" }], isError: true };
      },
      { store: memoryStore() },
    );
    const { client } = await connect(server);

    const first = await callTool(client, "send", { channel: "#nope", idempotency_key: "k" });
    const again = await callTool(client, "send", { channel: "#nope", idempotency_key: "k" });

    expect(runs).toBe(1);
    expect(first.isError).toBe(true);
    expect(again.isError).toBe(true);
    expect(textOf(again)).toMatch(/^channel_not_found\nThis is a replay: /);
  });
});

describe("inProgress: what a repeat gets while the first call runs", () => {
  /** A send tool held until released, with `runs` counting its runs. */
  async function heldSend(options: Parameters<typeof registerIdempotentTool>[4]) {
    const server = new McpServer({ name: "s", version: "1.0.0" });
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const counter = { runs: 0 };
    registerIdempotentTool(
      server,
      "send",
      { inputSchema: { to: z.string() } },
      async () => {
        counter.runs++;
        await released;
        return { content: [{ type: "text", text: "sent" }] };
      },
      options,
    );
    const { client } = await connect(server);
    return { client, counter, release };
  }
  const args = { to: "alice", idempotency_key: "k" };

  it('"reject" answers a repeat in flight at once with idempotency_key_in_use, where "wait" replays', async () => {
    // On a clock that never moves: a repeat that waited would never be answered.
    const rejecting = await heldSend({ store: memoryStore(), clock: fakeClock(), inProgress: "reject" });
    const first = callTool(rejecting.client, "send", args);
    await until(async () => rejecting.counter.runs === 1);
    const busy = await callTool(rejecting.client, "send", args);
    expect(errorOf(busy)).toMatchObject({ code: "idempotency_key_in_use", idempotency_key: "k" });
    rejecting.release();
    expect((await first).isError).not.toBe(true);

    const waiting = await heldSend({ store: memoryStore(), inProgress: "wait" });
    const original = callTool(waiting.client, "send", args);
    await until(async () => waiting.counter.runs === 1);
    const repeat = callTool(waiting.client, "send", args);
    waiting.release();
    expect(textOf(await repeat)).toContain("This is a replay");
    await original;
    expect([rejecting.counter.runs, waiting.counter.runs]).toEqual([1, 1]);
  });

  it('refuses an inProgress it does not know, and a waitMs beside "reject", before registering', () => {
    const server = new McpServer({ name: "s", version: "1.0.0" });
    const register = (options: object) => () =>
      registerIdempotentTool(server, "send", { inputSchema: { to: z.string() } }, () => ({ content: [] }), {
        store: memoryStore(),
        ...options,
      } as never);
    expect(register({ inProgress: "queue" })).toThrow(/inProgress.*must be "wait" or "reject"/);
    expect(register({ inProgress: "reject", waitMs: 5_000 })).toThrow(/waitMs.*left out/);
  });
});

describe("what the model reads when the tool cannot simply run", () => {
  it("in flight: tells the model to wait and retry with the same key", async () => {
    const server = new McpServer({ name: "s", version: "1.0.0" });
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let runs = 0;
    registerIdempotentTool(
      server,
      "send",
      { inputSchema: { to: z.string() } },
      async () => {
        runs++;
        await released;
        return { content: [{ type: "text", text: "sent" }] };
      },
      { store: memoryStore(), waitMs: 0 },
    );
    const { client } = await connect(server);
    const args = { to: "alice", idempotency_key: "k" };

    const first = callTool(client, "send", args);
    await until(async () => runs === 1);
    const busy = await callTool(client, "send", args);
    release();
    await first;
    const after = await callTool(client, "send", args);

    expect(runs).toBe(1);
    expect(busy.isError).toBe(true);
    expect(textOf(busy)).toContain("In progress");
    expect(textOf(busy)).toContain("retry with the same idempotency_key and the same arguments");
    expect(errorOf(busy)).toMatchObject({ code: "idempotency_key_in_use", idempotency_key: "k" });
    expect(errorOf(busy).retry_after_ms).toBeGreaterThan(0);
    expect(envelopeOf(after).was_replay).toBe(true);
  });

  for (const { remaining, leaseMs, text } of [
    { remaining: 134, leaseMs: 1_000, text: "Wait about 134 ms and retry" },
    { remaining: 42_000, leaseMs: 45_000, text: "Wait about 42 seconds and retry" },
  ]) {
    it(`in flight: advises a retry when the holder's lease passes, ${remaining} ms from now`, async () => {
      const clock = fakeClock();
      const store = memoryStore();
      const server = new McpServer({ name: "s", version: "1.0.0" });
      let runs = 0;
      registerIdempotentTool(
        server,
        "send",
        { inputSchema: { to: z.string() } },
        () => {
          runs++;
          return { content: [{ type: "text", text: "sent" }] };
        },
        { store, clock, waitMs: 0 },
      );
      // Another worker holds the key (it may be running, or may have crashed): its lease has
      // `remaining` ms left.
      await store.claim({
        scope: "default",
        key: "k",
        tool: "send",
        fingerprint: fingerprint({ to: "alice" }),
        token: "other-worker",
        leaseMs,
        ttlMs: 86_400_000,
        now: clock.now() - (leaseMs - remaining),
      });
      const { client } = await connect(server);

      const busy = await callTool(client, "send", { to: "alice", idempotency_key: "k" });

      expect(runs).toBe(0);
      expect(busy.isError).toBe(true);
      expect(errorOf(busy)).toMatchObject({ code: "idempotency_key_in_use", retry_after_ms: remaining });
      expect(textOf(busy)).toContain(`${text} with the same idempotency_key and the same arguments`);
    });
  }

  it("unknown outcome: an irreversible tool that threw is not run again, and the model is told to check", async () => {
    const server = new McpServer({ name: "s", version: "1.0.0" });
    let runs = 0;
    registerIdempotentTool(
      server,
      "send_sms",
      { inputSchema: { to: z.string() } },
      () => {
        runs++;
        throw new Error("socket hang up");
      },
      { store: memoryStore(), effect: "irreversible" },
    );
    const { client } = await connect(server);
    const args = { to: "+15550100", idempotency_key: "k" };

    const first = await callTool(client, "send_sms", args);
    const again = await callTool(client, "send_sms", args);

    expect(runs).toBe(1);
    for (const result of [first, again]) {
      expect(result.isError).toBe(true);
      expect(textOf(result)).toContain("Outcome unknown");
      expect(textOf(result)).toContain("Check whether the effect happened before trying again");
      expect(errorOf(result).code).toBe("outcome_unknown");
    }
    expect(textOf(first)).toContain("The tool reported: socket hang up");
  });

  it("store unavailable: the tool does not run and the model is told to retry later", async () => {
    const healthy = memoryStore();
    const broken: IdempotencyStore = {
      ...healthy,
      claim: async () => {
        throw new Error("connection refused");
      },
    };
    const server = new McpServer({ name: "s", version: "1.0.0" });
    let runs = 0;
    registerIdempotentTool(
      server,
      "send",
      { inputSchema: { to: z.string() } },
      () => {
        runs++;
        return { content: [] };
      },
      { store: broken },
    );
    const { client } = await connect(server);

    const result = await callTool(client, "send", { to: "alice", idempotency_key: "k" });

    expect(runs).toBe(0);
    expect(result.isError).toBe(true);
    expect(textOf(result)).toContain("The tool did not run");
    expect(textOf(result)).toContain("Retry later with the same idempotency_key");
    expect(errorOf(result).code).toBe("store_unavailable");
  });

  it("a definitive failure is recorded, and its repeat comes back as an error marked as a replay", async () => {
    const server = new McpServer({ name: "s", version: "1.0.0" });
    let runs = 0;
    registerIdempotentTool(
      server,
      "charge_card",
      { inputSchema: { cents: z.number() } },
      () => {
        runs++;
        throw definitiveFailure(new Error("card declined"));
      },
      { store: memoryStore() },
    );
    const { client } = await connect(server);
    const args = { cents: 500, idempotency_key: "order-7" };

    const first = await callTool(client, "charge_card", args);
    const again = await callTool(client, "charge_card", args);

    expect(runs).toBe(1);
    expect(first.isError).toBe(true);
    expect(textOf(first)).toContain("The action failed: card declined");
    expect(errorOf(first)).toMatchObject({ code: "tool_failed", was_replay: false });
    expect(again.isError).toBe(true);
    expect(textOf(again)).toContain(
      'This is a replay: the call with idempotency_key "order-7" already failed',
    );
    expect(textOf(again)).toContain("The original error: card declined");
    expect(errorOf(again)).toMatchObject({ code: "tool_failed", was_replay: true });
  });

  it("a tool that declares nothing happened releases the key, so a retry with the same key runs", async () => {
    const server = new McpServer({ name: "s", version: "1.0.0" });
    let runs = 0;
    registerIdempotentTool(
      server,
      "send",
      { inputSchema: { to: z.string() } },
      () => {
        runs++;
        if (runs === 1) throw notExecuted(new Error("rate limited"));
        return { content: [{ type: "text", text: "sent" }] };
      },
      { store: memoryStore() },
    );
    const { client } = await connect(server);
    const args = { to: "alice", idempotency_key: "k" };

    const first = await callTool(client, "send", args);
    const retry = await callTool(client, "send", args);

    expect(runs).toBe(2);
    expect(textOf(first)).toContain("did not take effect: rate limited");
    expect(textOf(first)).toContain("you may retry with the same key");
    expect(retry.isError).toBeFalsy();
    expect(envelopeOf(retry).was_replay).toBe(false);
  });

  it("a native-key tool that throws tells the model a retry with the same key is safe", async () => {
    const server = new McpServer({ name: "s", version: "1.0.0" });
    let runs = 0;
    registerIdempotentTool(
      server,
      "charge",
      { inputSchema: { cents: z.number() } },
      () => {
        runs++;
        if (runs === 1) throw new Error("gateway timeout");
        return { content: [{ type: "text", text: "charged" }] };
      },
      { store: memoryStore(), effect: "native-key" },
    );
    const { client } = await connect(server);
    const args = { cents: 100, idempotency_key: "k" };

    const first = await callTool(client, "charge", args);
    const retry = await callTool(client, "charge", args);

    expect(textOf(first)).toContain(
      "The action failed: gateway timeout. Retrying with the same idempotency_key is safe",
    );
    expect(textOf(retry)).toBe("charged");
  });
});

describe("scopes", () => {
  it("by default keeps each OAuth client's keys apart: one client never reads another's result", async () => {
    const store = memoryStore();
    const a = slackServer({ store });
    const b = slackServer({ store });
    const posts = () => a.posts.length + b.posts.length;
    const alice = await connect(a.server, { token: "t1", clientId: "client-a", scopes: [] });
    const bob = await connect(b.server, { token: "t2", clientId: "client-b", scopes: [] });

    const fromA = await callTool(alice.client, "send_slack_message", hello);
    const fromB = await callTool(bob.client, "send_slack_message", hello);
    const fromAAgain = await callTool(alice.client, "send_slack_message", hello);

    expect(posts()).toBe(2);
    expect(envelopeOf(fromA).was_replay).toBe(false);
    expect(envelopeOf(fromB).was_replay).toBe(false);
    expect(envelopeOf(fromAAgain).was_replay).toBe(true);
    expect(
      await store.get({ scope: "client:client-a", key: hello.idempotency_key }, Date.now()),
    ).toBeDefined();
    expect(
      await store.get({ scope: "client:client-b", key: hello.idempotency_key }, Date.now()),
    ).toBeDefined();
  });

  it('keeps a client whose id is literally "default" apart from callers without authentication', async () => {
    const store = memoryStore();
    const a = slackServer({ store });
    const b = slackServer({ store });
    const anonymous = await connect(a.server);
    const named = await connect(b.server, { token: "t", clientId: "default", scopes: [] });

    expect(envelopeOf(await callTool(anonymous.client, "send_slack_message", hello)).was_replay).toBe(false);
    expect(envelopeOf(await callTool(named.client, "send_slack_message", hello)).was_replay).toBe(false);
    expect(a.posts.length + b.posts.length).toBe(2);
  });

  it("refuses an authenticated request whose authInfo names no client, instead of a shared namespace", async () => {
    const store = memoryStore();
    let posts = 0;
    for (const authInfo of [
      { token: "t", scopes: [] },
      { token: "t", clientId: "", scopes: [] },
    ]) {
      const slack = slackServer({ store });
      const { client } = await connect(slack.server, authInfo as Parameters<typeof connect>[1]);
      const result = await callTool(client, "send_slack_message", hello);
      expect(result.isError).toBe(true);
      expect(errorOf(result).code).toBe("invalid_options");
      expect(textOf(result)).toContain("pass the scope option");
      posts += slack.posts.length;
    }
    expect(posts).toBe(0);
  });

  it("applies the same rule to idempotentExecute used as an McpServer tool's callback", async () => {
    const store = memoryStore();
    let runs = 0;
    const send = idempotentExecute<{ to: string; idempotency_key: string }>(
      async ({ to }) => {
        runs++;
        return `Sent to ${to}.`;
      },
      { name: "send_email", store },
    );
    const mailServer = () => {
      const server = new McpServer({ name: "mail", version: "1.0.0" });
      server.registerTool(
        "send_email",
        { inputSchema: { to: z.string(), idempotency_key: z.string() } },
        async (args, extra) => (await send(args, extra)) as CallToolResult,
      );
      return server;
    };
    const call = { to: "ada@example.com", idempotency_key: "welcome-ada" };
    const alice = await connect(mailServer(), { token: "t1", clientId: "client-a", scopes: [] });
    const anonymous = await connect(mailServer());
    expect(textOf(await callTool(alice.client, "send_email", call))).toBe("Sent to ada@example.com.");
    expect(textOf(await callTool(anonymous.client, "send_email", call))).toBe("Sent to ada@example.com.");
    expect(runs, "another client's record is never replayed to the anonymous caller").toBe(2);
    expect(
      await store.get({ scope: "client:client-a", key: call.idempotency_key }, Date.now()),
    ).toBeDefined();

    const nobody = await connect(mailServer(), { token: "t", scopes: [] } as unknown as AuthInfo);
    const refused = await callTool(nobody.client, "send_email", { ...call, idempotency_key: "other" });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toContain("pass the scope option");
    expect(runs).toBe(2);
  });

  it("uses the scope option when given", async () => {
    const { server, store } = slackServer({ scope: (extra) => `tenant:${extra.authInfo?.extra?.tenant}` });
    const { client } = await connect(server, {
      token: "t",
      clientId: "app",
      scopes: [],
      extra: { tenant: "acme" },
    });

    await callTool(client, "send_slack_message", hello);

    expect(await store.get({ scope: "tenant:acme", key: hello.idempotency_key }, Date.now())).toBeDefined();
  });
});

describe("zod flavours and output schemas", () => {
  const flavours = [
    { name: "zod 3 (zod/v3)", z: z3 as unknown as typeof z },
    { name: "zod 4 (zod/v4)", z: z4 as unknown as typeof z },
    { name: "zod 4 (the zod root)", z },
  ];

  for (const flavour of flavours) {
    for (const passZ of [false, true]) {
      it(`works with a ${flavour.name} shape and output schema${passZ ? ", given z" : ", loading zod itself"}`, async () => {
        const zz = flavour.z;
        const server = new McpServer({ name: "s", version: "1.0.0" });
        let runs = 0;
        registerIdempotentTool(
          server,
          "send",
          {
            inputSchema: { to: zz.string(), count: zz.number().int().optional() },
            outputSchema: { id: zz.string(), to: zz.string() },
          },
          ({ to }) => {
            runs++;
            const output = { id: `m-${runs}`, to };
            return { content: [{ type: "text", text: JSON.stringify(output) }], structuredContent: output };
          },
          { store: memoryStore(), ...(passZ ? { z: zz } : {}) },
        );
        const { client } = await connect(server);

        // Listing caches the output schema, so the client validates structuredContent against it.
        const [tool] = (await client.listTools()).tools;
        expect(tool?.inputSchema.required).toEqual(expect.arrayContaining(["to", "idempotency_key"]));
        expect(tool?.inputSchema.properties?.idempotency_key).toMatchObject({ type: "string", minLength: 1 });
        expect(tool?.outputSchema?.properties).toHaveProperty("_idempotency");

        const first = await callTool(client, "send", { to: "alice", idempotency_key: "k" });
        const again = await callTool(client, "send", { to: "alice", idempotency_key: "k" });
        const noKey = await callTool(client, "send", { to: "alice" });

        expect(runs).toBe(1);
        expect(first.isError).toBeFalsy();
        expect(first.structuredContent).toMatchObject({
          id: "m-1",
          to: "alice",
          _idempotency: { was_replay: false },
        });
        expect(again.structuredContent).toMatchObject({
          id: "m-1",
          to: "alice",
          _idempotency: { was_replay: true },
        });
        expect(noKey.isError).toBe(true);
        expect(textOf(noKey)).toContain("idempotency_key");
      });
    }
  }

  for (const flavour of flavours) {
    it(`declares recent_similar_call in a ${flavour.name} output schema, and the client accepts it`, async () => {
      const zz = flavour.z;
      const server = new McpServer({ name: "s", version: "1.0.0" });
      let runs = 0;
      registerIdempotentTool(
        server,
        "send",
        { inputSchema: { to: zz.string(), text: zz.string() }, outputSchema: { id: zz.string() } },
        () => {
          runs++;
          const output = { id: `m-${runs}` };
          return { content: [{ type: "text", text: JSON.stringify(output) }], structuredContent: output };
        },
        { store: memoryStore(), similar: { fields: ["to"] } },
      );
      const { client } = await connect(server);
      // Listing caches the output schema, so the client validates structuredContent against it.
      const [tool] = (await client.listTools()).tools;
      expect(tool?.outputSchema?.properties?._idempotency).toMatchObject({
        properties: { recent_similar_call: { type: "object" } },
      });

      const first = await callTool(client, "send", { to: "alice", text: "Hi", idempotency_key: "k1" });
      const second = await callTool(client, "send", { to: "alice", text: "Hi!", idempotency_key: "k2" });

      expect(runs).toBe(2);
      expect(second.isError).toBeFalsy();
      expect(second.structuredContent?._idempotency).toMatchObject({
        recent_similar_call: { called_at: envelopeOf(first).original_called_at, idempotency_key: "k1" },
      });
    });
  }

  it("works with a zod mini shape (zod 4 core), building the key with classic zod 4", async () => {
    const server = new McpServer({ name: "s", version: "1.0.0" });
    let runs = 0;
    registerIdempotentTool(
      server,
      "send",
      { inputSchema: { to: zm.string() } },
      () => {
        runs++;
        return { content: [{ type: "text", text: "sent" }] };
      },
      { store: memoryStore() },
    );
    const { client } = await connect(server);

    const [tool] = (await client.listTools()).tools;
    await callTool(client, "send", { to: "alice", idempotency_key: "k" });
    const again = await callTool(client, "send", { to: "alice", idempotency_key: "k" });

    expect(tool?.inputSchema.required).toEqual(["to", "idempotency_key"]);
    expect(runs).toBe(1);
    expect(envelopeOf(again).was_replay).toBe(true);
  });

  it("builds each schema in its own flavour: a zod 4 input with a zod 3 output schema", async () => {
    const server = new McpServer({ name: "s", version: "1.0.0" });
    registerIdempotentTool(
      server,
      "send",
      { inputSchema: { to: z.string() }, outputSchema: { id: z3.string() as unknown as z.ZodString } },
      () => ({ content: [{ type: "text", text: "sent" }], structuredContent: { id: "m-1" } }),
      { store: memoryStore() },
    );
    const { client } = await connect(server);

    const [tool] = (await client.listTools()).tools;
    const first = await callTool(client, "send", { to: "alice", idempotency_key: "k" });

    expect(tool?.outputSchema?.required).toEqual(["id", "_idempotency"]);
    expect(first.structuredContent).toMatchObject({ id: "m-1", _idempotency: { was_replay: false } });
  });

  it("builds the key with the given z when the tool has no fields to tell the flavour by", async () => {
    const server = new McpServer({ name: "s", version: "1.0.0" });
    registerIdempotentTool(server, "ping", { inputSchema: {} }, () => ({ content: [] }), {
      store: memoryStore(),
      z: z3 as unknown as typeof z,
    });
    const { client } = await connect(server);

    const [tool] = (await client.listTools()).tools;
    const result = await callTool(client, "ping", { idempotency_key: "k" });

    expect(tool?.inputSchema.required).toEqual(["idempotency_key"]);
    expect(result.isError).toBeFalsy();
  });

  it("works with a tool that takes no arguments of its own", async () => {
    const server = new McpServer({ name: "s", version: "1.0.0" });
    let runs = 0;
    registerIdempotentTool(
      server,
      "rotate_keys",
      { inputSchema: {} },
      () => {
        runs++;
        return { content: [{ type: "text", text: "rotated" }] };
      },
      { store: memoryStore() },
    );
    const { client } = await connect(server);

    await callTool(client, "rotate_keys", { idempotency_key: "k" });
    await callTool(client, "rotate_keys", { idempotency_key: "k" });
    const [tool] = (await client.listTools()).tools;

    expect(runs).toBe(1);
    expect(tool?.inputSchema.required).toEqual(["idempotency_key"]);
  });
});

describe("configuration errors, thrown when the tool is registered", () => {
  const server = () => new McpServer({ name: "s", version: "1.0.0" });
  const handler = () => ({ content: [] });

  function registerError(register: () => unknown): unknown {
    try {
      register();
    } catch (error) {
      return error;
    }
    throw new Error("registration did not throw");
  }

  it("refuses a shape that already has idempotency_key", () => {
    const error = registerError(() =>
      registerIdempotentTool(server(), "t", { inputSchema: { idempotency_key: z.string() } }, handler, {
        store: memoryStore(),
      }),
    );
    expect(isIdempotencyError(error, "invalid_options")).toBe(true);
    expect(String(error)).toContain("`inputSchema` already has `idempotency_key`");
  });

  it("refuses a zod schema that is not an object", () => {
    const error = registerError(() =>
      registerIdempotentTool(
        server(),
        "t",
        { inputSchema: z.string() as unknown as { to: z.ZodString } },
        handler,
        { store: memoryStore() },
      ),
    );
    expect(isIdempotencyError(error, "invalid_options")).toBe(true);
    expect(String(error)).toContain("must be a zod object (z.object({ … })) or a raw shape");
  });

  it("refuses a shape that mixes zod 3 and zod 4", () => {
    const error = registerError(() =>
      registerIdempotentTool(
        server(),
        "t",
        { inputSchema: { a: z.string(), b: z3.string() as unknown as z.ZodString } },
        handler,
        { store: memoryStore() },
      ),
    );
    expect(String(error)).toContain("mixes zod 3 and zod 4");
  });

  it("refuses a z of another flavour than the shape", () => {
    const error = registerError(() =>
      registerIdempotentTool(server(), "t", { inputSchema: { a: z.string() } }, handler, {
        store: memoryStore(),
        z: z3 as unknown as typeof z,
      }),
    );
    expect(String(error)).toContain("option `z` builds zod 3 schemas but the tool's schemas are zod 4");
  });

  it("names a missing store", () => {
    const error = registerError(() =>
      registerIdempotentTool(
        server(),
        "t",
        { inputSchema: { a: z.string() } },
        handler,
        {} as unknown as IdempotentToolOptions<{ a: string }>,
      ),
    );
    expect(String(error)).toContain("option `store`");
  });
});
