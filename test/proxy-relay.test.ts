/**
 * The proxy's relay, in one process: a real SDK Client on one side, a scripted server on the other (it
 * answers raw JSON-RPC and keeps every message it got), so a test sees exactly what crossed the proxy.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { CallToolResultSchema, type JSONRPCMessage, McpError } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it, vi } from "vitest";
import { type McpProxy, startMcpProxy } from "../src/cli/mcp-proxy.js";
import type { ToolRule } from "../src/cli/proxy-tools.js";
import { type IdempotencyStore, memoryStore } from "../src/index.js";
import { MetaKey } from "../src/mcp/index.js";
import { rejection } from "./fixtures/tools.js";

type Raw = Record<string, unknown> & {
  id?: string | number;
  method?: string;
  params?: Record<string, unknown>;
};

/** A server that answers from a script and records what it was sent. */
class ScriptedServer {
  readonly received: Raw[] = [];
  tools: Record<string, unknown>[] = [
    { name: "send_message", inputSchema: { type: "object", properties: { to: { type: "string" } } } },
    { name: "get_message", inputSchema: { type: "object" }, annotations: { readOnlyHint: true } },
  ];
  /** How a tools/call is answered; a promise that never settles holds the call. */
  answerCall: (request: Raw) => Promise<Raw> = async () => ({
    result: { content: [{ type: "text", text: "sent" }] },
  });
  /** How a tools/list is answered; by default from `tools` as they are when it is answered. */
  answerList: () => Promise<Raw> = async () => ({ result: { tools: this.tools } });
  constructor(
    readonly transport: InMemoryTransport,
    private readonly capabilities: Record<string, unknown> = { tools: { listChanged: true } },
  ) {
    transport.onmessage = (message) => void this.receive(message as Raw);
  }
  private async receive(message: Raw): Promise<void> {
    this.received.push(message);
    if (message.id === undefined || message.method === undefined) return;
    const answer = await this.answer(message);
    await this.transport.send({ jsonrpc: "2.0", id: message.id, ...answer } as JSONRPCMessage);
  }
  private async answer(message: Raw): Promise<Raw> {
    switch (message.method) {
      case "initialize":
        return {
          result: {
            protocolVersion: message.params?.protocolVersion,
            capabilities: this.capabilities,
            serverInfo: { name: "scripted", version: "1.0.0" },
          },
        };
      case "tools/list":
        return this.answerList();
      case "tools/call":
        return this.answerCall(message);
      default:
        return { error: { code: -32601, message: `no ${message.method}` } };
    }
  }
  calls(): Raw[] {
    return this.received.filter((message) => message.method === "tools/call");
  }
  notify(method: string): Promise<void> {
    return this.transport.send({ jsonrpc: "2.0", method } as JSONRPCMessage);
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function metaOf(result: { _meta?: Record<string, unknown> | undefined }, key: string) {
  return result._meta?.[key] as { was_replay?: boolean; code?: string } | undefined;
}

const running: { client: Client; proxy: McpProxy }[] = [];
afterEach(async () => {
  for (const { client, proxy } of running.splice(0)) {
    await client.close();
    await proxy.close();
  }
});

async function connectThroughProxy(
  rules: [string, ToolRule][] = [],
  tuning: { waitMs?: number; similarWindowMs?: number; withoutKeyWindowMs?: number } = {},
  store = memoryStore(),
  capabilities?: Record<string, unknown>,
) {
  const [clientSide, proxyFacingClient] = InMemoryTransport.createLinkedPair();
  const [proxyFacingServer, serverSide] = InMemoryTransport.createLinkedPair();
  // Every message the proxy sends the client, as it went on the wire.
  const toClient: Raw[] = [];
  const send = proxyFacingClient.send.bind(proxyFacingClient);
  proxyFacingClient.send = (message, options) => {
    toClient.push(message as Raw);
    return send(message, options);
  };
  const server = new ScriptedServer(serverSide, capabilities);
  await serverSide.start();
  const log: string[] = [];
  const proxy = await startMcpProxy({
    client: proxyFacingClient,
    server: proxyFacingServer,
    store,
    rules: new Map(rules),
    scope: "default",
    waitMs: 2_000,
    ...tuning,
    log: (line) => log.push(line),
  });
  const client = new Client({ name: "relay-test", version: "1.0.0" });
  await client.connect(clientSide);
  running.push({ client, proxy });
  return { client, server, log, proxy, toClient };
}

describe("the proxy's relay", () => {
  it("sends the call upstream without the key, in the arguments or in _meta, and keeps the rest of _meta", async () => {
    const { client, server } = await connectThroughProxy();
    await client.callTool({
      name: "send_message",
      arguments: { to: "alice", idempotency_key: "k-1" },
      _meta: { idempotencyKey: "k-1", trace: "t-9" },
    });
    const [call] = server.calls();
    expect(call?.params).toEqual({
      name: "send_message",
      arguments: { to: "alice" },
      _meta: { trace: "t-9" },
    });
    // The proxy's own request id, never the client's: answers to it are the proxy's to read.
    expect(String(call?.id)).toMatch(/^idempotool-proxy-/);
  });

  it("relays read tools' calls with the client's own request, untouched", async () => {
    const { client, server } = await connectThroughProxy();
    await client.callTool({ name: "get_message", arguments: { id: "m-1", idempotency_key: "x" } });
    expect(server.calls()[0]?.params).toEqual({
      name: "get_message",
      arguments: { id: "m-1", idempotency_key: "x" },
    });
    expect(typeof server.calls()[0]?.id).toBe("number");
  });

  it("does not pass a cancellation of a guarded call on, so the call completes and the retry replays it", async () => {
    const { client, server } = await connectThroughProxy();
    let finish!: () => void;
    const held = new Promise<void>((resolve) => {
      finish = resolve;
    });
    server.answerCall = async () => {
      await held;
      return { result: { content: [{ type: "text", text: "sent once" }] } };
    };
    const abort = new AbortController();
    const first = client.callTool(
      { name: "send_message", arguments: { to: "bob", idempotency_key: "k-2" } },
      undefined,
      {
        signal: abort.signal,
      },
    );
    while (server.calls().length === 0) await new Promise((resolve) => setImmediate(resolve));
    abort.abort("the user gave up");
    await expect(first).rejects.toThrow();
    finish();
    const retry = await client.callTool({
      name: "send_message",
      arguments: { to: "bob", idempotency_key: "k-2" },
    });
    expect(server.received.filter((message) => message.method === "notifications/cancelled")).toEqual([]);
    expect(server.calls()).toHaveLength(1);
    expect(metaOf(retry, MetaKey.envelope)?.was_replay).toBe(true);
  });

  it("hands a server's refusal (invalid params) back as it was, and releases the key for a corrected retry", async () => {
    const { client, server } = await connectThroughProxy();
    server.answerCall = async () => ({ error: { code: -32602, message: "to: required" } });
    await expect(
      client.callTool({ name: "send_message", arguments: { idempotency_key: "k-3" } }),
    ).rejects.toThrow("to: required");
    server.answerCall = async () => ({ result: { content: [{ type: "text", text: "sent" }] } });
    const corrected = await client.callTool({
      name: "send_message",
      arguments: { to: "carol", idempotency_key: "k-4" },
    });
    expect(corrected.isError).toBeFalsy();
    const again = await client.callTool({ name: "send_message", arguments: { idempotency_key: "k-3" } });
    expect(again.isError).toBeFalsy();
    expect(server.calls()).toHaveLength(3);
  });

  it("judges any other server error by the effect class: unknown under irreversible", async () => {
    const { client, server } = await connectThroughProxy();
    server.answerCall = async () => ({ error: { code: -32603, message: "SMTP timed out" } });
    const result = await client.callTool({
      name: "send_message",
      arguments: { to: "dan", idempotency_key: "k-5" },
    });
    expect(result.isError).toBe(true);
    expect(metaOf(result, MetaKey.error)?.code).toBe("outcome_unknown");
    const retry = await client.callTool({
      name: "send_message",
      arguments: { to: "dan", idempotency_key: "k-5" },
    });
    expect(metaOf(retry, MetaKey.error)?.code).toBe("outcome_unknown");
    expect(server.calls()).toHaveLength(1);
  });

  it("learns tools the server adds after telling the client its list changed", async () => {
    const { client, server, log } = await connectThroughProxy();
    await client.listTools();
    server.tools = [...server.tools, { name: "charge_card", inputSchema: { type: "object" } }];
    await server.notify("notifications/tools/list_changed");
    const charge = { name: "charge_card", arguments: { cents: 500, idempotency_key: "c-1" } };
    await client.callTool(charge);
    const again = await client.callTool(charge);
    expect(metaOf(again, MetaKey.envelope)?.was_replay).toBe(true);
    expect(server.calls()).toHaveLength(1);
    expect(log[0]).toBe("guarding 1 of 2 tools (send_message); passing through get_message");
  });

  it("tells a repeat that the first call is still running once --wait has passed, and runs nothing", async () => {
    const { client, server } = await connectThroughProxy([], { waitMs: 50 });
    let finish!: () => void;
    server.answerCall = async () => {
      await new Promise<void>((resolve) => {
        finish = resolve;
      });
      return { result: { content: [{ type: "text", text: "sent" }] } };
    };
    const call = { name: "send_message", arguments: { to: "erin", idempotency_key: "k-6" } };
    const first = client.callTool(call);
    while (server.calls().length === 0) await new Promise((resolve) => setImmediate(resolve));
    const repeat = await client.callTool(call);
    expect(repeat.isError).toBe(true);
    expect(metaOf(repeat, MetaKey.error)?.code).toBe("idempotency_key_in_use");
    expect(JSON.stringify(repeat.content)).toContain("In progress: an earlier call with idempotency_key");
    finish();
    expect(metaOf(await first, MetaKey.envelope)?.was_replay).toBe(false);
    expect(server.calls()).toHaveLength(1);
  });

  it("with the near-duplicate hint on, runs the same arguments under a new key and tells the model", async () => {
    const { client, server } = await connectThroughProxy([], { similarWindowMs: 60_000 });
    await client.callTool({ name: "send_message", arguments: { to: "fay", idempotency_key: "k-7" } });
    const second = await client.callTool({
      name: "send_message",
      arguments: { to: "fay", idempotency_key: "k-8" },
    });
    expect(server.calls()).toHaveLength(2);
    expect(second._meta?.[MetaKey.envelope]).toMatchObject({
      was_replay: false,
      recent_similar_call: { idempotency_key: "k-7" },
    });
    expect(JSON.stringify(second.content)).toContain("Note: this action ran now as a new request");
  });

  it("with --without-key, lists the key as optional and sends two identical keyless calls once", async () => {
    const { client, server } = await connectThroughProxy([], { withoutKeyWindowMs: 5_000 });
    const { tools } = await client.listTools();
    const sendMessage = tools.find((tool) => tool.name === "send_message");
    expect(sendMessage?.inputSchema.properties).toHaveProperty("idempotency_key");
    expect(sendMessage?.inputSchema.required ?? []).not.toContain("idempotency_key");

    const call = { name: "send_message", arguments: { to: "hal" } };
    const [first, second] = await Promise.all([client.callTool(call), client.callTool(call)]);
    expect(server.calls()).toHaveLength(1);
    const replay = [first, second].find((result) => metaOf(result, MetaKey.envelope)?.was_replay);
    expect(replay?._meta?.[MetaKey.envelope]).toMatchObject({ key_source: "arguments" });
    expect(JSON.stringify(replay?.content)).toContain("taken for a duplicate");
    // A call with a key is its key's, whatever its arguments.
    await client.callTool({ name: "send_message", arguments: { to: "hal", idempotency_key: "k-1" } });
    expect(server.calls()).toHaveLength(2);
  });

  it("lets the server finish a guarded call when the client goes away, so the retry after a reconnect replays it", async () => {
    const store = memoryStore();
    const { client, server, proxy } = await connectThroughProxy([], {}, store);
    let finish!: () => void;
    server.answerCall = async () => {
      await new Promise<void>((resolve) => {
        finish = resolve;
      });
      return { result: { content: [{ type: "text", text: "sent to gus" }] } };
    };
    const call = { name: "send_message", arguments: { to: "gus", idempotency_key: "k-9" } };
    const lost = client.callTool(call).catch((error: unknown) => error);
    while (server.calls().length === 0) await new Promise((resolve) => setImmediate(resolve));
    await client.close();
    expect(await lost).toBeInstanceOf(Error);
    finish();
    expect((await proxy.ended).by).toBe("client");

    const again = await connectThroughProxy([], {}, store);
    const retry = await again.client.callTool(call);
    expect(metaOf(retry, MetaKey.envelope)?.was_replay).toBe(true);
    expect(JSON.stringify(retry.content)).toContain("sent to gus");
    expect(again.server.calls()).toHaveLength(0);
  });

  it("does not keep a tools list that went stale while it was fetched: a tool turned side-effectful is guarded", async () => {
    const { client, server } = await connectThroughProxy();
    // The server lists send_message as read-only; its answer is held while the server changes its mind.
    const readOnly = server.tools.map((tool) =>
      tool.name === "send_message" ? { ...tool, annotations: { readOnlyHint: true } } : tool,
    );
    const sideEffectful = server.tools;
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    server.tools = readOnly;
    await client.listTools();
    await server.notify("notifications/tools/list_changed");
    server.answerList = async () => {
      const snapshot = server.tools;
      await held;
      return { result: { tools: snapshot } };
    };
    const call = { name: "send_message", arguments: { to: "hal", idempotency_key: "k-10" } };
    const first = client.callTool(call);
    while (server.received.filter((message) => message.method === "tools/list").length < 3) {
      await new Promise((resolve) => setImmediate(resolve));
    }
    server.answerList = async () => ({ result: { tools: server.tools } });
    server.tools = sideEffectful;
    await server.notify("notifications/tools/list_changed");
    release();
    await first;
    await client.callTool(call);
    expect(server.calls()).toHaveLength(1);
  });
  it("answers a call on a tool the server does not list as not found, with or without a key; nothing runs", async () => {
    const { client, server } = await connectThroughProxy();
    const keyed = { name: "unlisted_send", arguments: { to: "ivy", idempotency_key: "k-11" } };
    await expect(client.callTool(keyed)).rejects.toThrow("Tool unlisted_send not found");
    await expect(client.callTool({ name: "unlisted_send", arguments: { to: "ivy" } })).rejects.toThrow(
      "Tool unlisted_send not found",
    );
    expect(server.calls()).toEqual([]);
    // The key was never used: once the server has the tool, a call under it runs.
    server.tools = [...server.tools, { name: "unlisted_send", inputSchema: { type: "object" } }];
    const ran = await client.callTool(keyed);
    expect(metaOf(ran, MetaKey.envelope)?.was_replay).toBe(false);
    expect(server.calls()).toHaveLength(1);
  });

  it("refuses a guarded call whose arguments are not an object, instead of running the tool on none", async () => {
    const { client, server } = await connectThroughProxy();
    const call = (to: string) =>
      client.request(
        {
          method: "tools/call",
          params: { name: "send_message", arguments: [to], _meta: { idempotency_key: "k-12" } },
        },
        CallToolResultSchema,
      );
    const first = await call("jon");
    expect(first.isError).toBe(true);
    expect(metaOf(first, MetaKey.error)?.code).toBe("invalid_arguments");
    const second = await call("kim");
    expect(metaOf(second, MetaKey.envelope)?.was_replay).toBeUndefined();
    expect(server.calls()).toHaveLength(0);
  });

  it("frees the key of a guarded call it never sent because the client left first, so the retry runs it", async () => {
    const store = memoryStore();
    let openGate!: () => void;
    const gate = new Promise<void>((resolve) => {
      openGate = resolve;
    });
    let claiming = false;
    // A store slow to claim: the client goes away between the call's arrival and its claim.
    const slow: IdempotencyStore = {
      ...store,
      claim: async (request) => {
        claiming = true;
        await gate;
        return store.claim(request);
      },
    };
    const { client, server, proxy } = await connectThroughProxy([], {}, slow);
    const call = { name: "send_message", arguments: { to: "lee", idempotency_key: "k-13" } };
    const lost = client.callTool(call).catch((error: unknown) => error);
    while (!claiming) await new Promise((resolve) => setImmediate(resolve));
    await client.close();
    expect(await lost).toBeInstanceOf(Error);
    openGate();
    expect((await proxy.ended).by).toBe("client");
    expect(server.calls()).toHaveLength(0);

    const again = await connectThroughProxy([], {}, store);
    const retry = await again.client.callTool(call);
    expect(retry.isError).toBeFalsy();
    expect(metaOf(retry, MetaKey.envelope)?.was_replay).toBe(false);
    expect(again.server.calls()).toHaveLength(1);
  });

  it("keeps guarding a tool the server relabels read-only mid-session, so a repeat the client keyed is not run again", async () => {
    const { client, server } = await connectThroughProxy();
    const call = { name: "send_message", arguments: { to: "max", idempotency_key: "k-14" } };
    await client.callTool(call);
    server.tools = server.tools.map((tool) =>
      tool.name === "send_message" ? { ...tool, annotations: { readOnlyHint: true } } : tool,
    );
    await server.notify("notifications/tools/list_changed");
    const listed = (await client.listTools()).tools.find((tool) => tool.name === "send_message");
    expect(listed?.inputSchema.required).toContain("idempotency_key");
    const again = await client.callTool(call);
    expect(metaOf(again, MetaKey.envelope)?.was_replay).toBe(true);
    expect(server.calls()).toHaveLength(1);
  });

  it("guards a tool the client was shown with a key, though the server relabelled it without list_changed", async () => {
    const { client, server } = await connectThroughProxy();
    await client.callTool({ name: "get_message", arguments: {} });
    server.tools = server.tools.map((tool) =>
      tool.name === "get_message"
        ? { ...tool, annotations: { readOnlyHint: false, destructiveHint: true } }
        : tool,
    );
    const listed = (await client.listTools()).tools.find((tool) => tool.name === "get_message");
    expect(listed?.inputSchema.required).toContain("idempotency_key");
    const call = { name: "get_message", arguments: { idempotency_key: "k-30" } };
    await client.callTool(call);
    const again = await client.callTool(call);
    expect(metaOf(again, MetaKey.envelope)?.was_replay).toBe(true);
    expect(server.calls().filter((sent) => sent.params?.name === "get_message")).toHaveLength(2);
  });

  it.each([
    ["read-only copy first", [{ readOnlyHint: true }, {}]],
    ["side-effectful copy first", [{}, { readOnlyHint: true }]],
  ])("guards a tool the server lists twice (%s)", async (_order, annotations) => {
    const { client, server } = await connectThroughProxy();
    server.tools = annotations.map((annotation) => ({
      name: "post_note",
      inputSchema: { type: "object" },
      annotations: annotation,
    }));
    await server.notify("notifications/tools/list_changed");
    const copies = (await client.listTools()).tools.filter((tool) => tool.name === "post_note");
    expect(copies.map((tool) => tool.inputSchema.required)).toEqual([
      ["idempotency_key"],
      ["idempotency_key"],
    ]);
    const call = { name: "post_note", arguments: { idempotency_key: "k-31" } };
    await client.callTool(call);
    const again = await client.callTool(call);
    expect(metaOf(again, MetaKey.envelope)?.was_replay).toBe(true);
    expect(server.calls()).toHaveLength(1);
  });

  it("refuses a tools/call whose name is not a string, and sends the server nothing", async () => {
    const { client, server } = await connectThroughProxy();
    const call = client.request(
      { method: "tools/call", params: { name: 42, arguments: { idempotency_key: "k-32" } } } as never,
      CallToolResultSchema,
    );
    await expect(call).rejects.toThrow("a tools/call needs a tool name");
    expect(server.calls()).toEqual([]);
  });

  it("reads the key from params.idempotencyKey: a repeat is a replay, and the server never sees the field", async () => {
    const { client, server } = await connectThroughProxy();
    const send = () =>
      client.request(
        {
          method: "tools/call",
          params: { name: "send_message", arguments: { to: "pia" }, idempotencyKey: "k-40" },
        } as never,
        CallToolResultSchema,
      );
    await send();
    const again = await send();
    expect(metaOf(again, MetaKey.envelope)?.was_replay).toBe(true);
    expect(server.calls().map((call) => call.params)).toEqual([
      { name: "send_message", arguments: { to: "pia" } },
    ]);
  });

  it("answers a repeat in flight and a key reused, sent in params.idempotencyKey, as JSON-RPC errors with data.type", async () => {
    const { client, server } = await connectThroughProxy([], { waitMs: 0 });
    let finish!: () => void;
    server.answerCall = () =>
      new Promise((resolve) => {
        finish = () => resolve({ result: { content: [{ type: "text", text: "sent" }] } });
      });
    const send = (to: string) =>
      client.request(
        {
          method: "tools/call",
          params: { name: "send_message", arguments: { to }, idempotencyKey: "k-41" },
        } as never,
        CallToolResultSchema,
      );
    const first = send("pia");
    await vi.waitFor(() => expect(server.calls()).toHaveLength(1));
    const busy = await rejection(send("pia"));
    expect(busy).toBeInstanceOf(McpError);
    expect(busy).toMatchObject({
      code: -32602,
      data: { type: "idempotency_key_in_progress", idempotencyKey: "k-41", retryAfterMs: expect.any(Number) },
    });
    finish();
    await first;
    const reused = await rejection(send("ned"));
    expect(reused).toMatchObject({
      code: -32602,
      data: { type: "idempotency_key_conflict", idempotencyKey: "k-41" },
    });
    expect(server.calls()).toHaveLength(1);
  });

  it("answers the same refusals as results when the key came in the arguments or _meta", async () => {
    const { client, server } = await connectThroughProxy([], { waitMs: 0 });
    await client.callTool({ name: "send_message", arguments: { to: "pia", idempotency_key: "k-43" } });
    const reused = await client.callTool({
      name: "send_message",
      arguments: { to: "ned" },
      _meta: { idempotency_key: "k-43" },
    });
    expect(reused.isError).toBe(true);
    expect(metaOf(reused, MetaKey.error)?.code).toBe("idempotency_key_conflict");
    expect(server.calls()).toHaveLength(1);
  });

  it("refuses a params.idempotencyKey that disagrees with the key argument, and runs nothing", async () => {
    const { client, server } = await connectThroughProxy();
    const result = await client.request(
      {
        method: "tools/call",
        params: {
          name: "send_message",
          arguments: { to: "pia", idempotency_key: "k-41" },
          idempotencyKey: "k-42",
        },
      } as never,
      CallToolResultSchema,
    );
    expect(result.isError).toBe(true);
    expect(metaOf(result, MetaKey.error)?.code).toBe("invalid_arguments");
    expect(server.calls()).toEqual([]);
  });

  it("advertises that its tools take keys (capabilities.tools.idempotency), keeping the server's own", async () => {
    const { toClient } = await connectThroughProxy();
    // The SDK 1.x client drops capability fields it does not know, so read the answer off the wire.
    const initialized = toClient.find(
      (message) => isObject(message.result) && "capabilities" in message.result,
    );
    const capabilities = (initialized?.result as { capabilities?: { tools?: unknown } } | undefined)
      ?.capabilities;
    expect(capabilities?.tools).toEqual({ listChanged: true, idempotency: { retentionSeconds: 86_400 } });
  });

  it("adds no tools capability to a server that has none", async () => {
    const { toClient } = await connectThroughProxy([], {}, memoryStore(), { prompts: {} });
    const initialized = toClient.find(
      (message) => isObject(message.result) && "capabilities" in message.result,
    );
    expect((initialized?.result as { capabilities?: unknown } | undefined)?.capabilities).toEqual({
      prompts: {},
    });
  });

  it("refuses a key one tool used when another tool is called with it, with the same arguments or not", async () => {
    const { client, server } = await connectThroughProxy();
    server.tools = [...server.tools, { name: "delete_message", inputSchema: { type: "object" } }];
    await server.notify("notifications/tools/list_changed");
    await client.callTool({ name: "send_message", arguments: { to: "ned", idempotency_key: "k-15" } });
    const other = await client.callTool({
      name: "delete_message",
      arguments: { to: "ned", idempotency_key: "k-15" },
    });
    expect(metaOf(other, MetaKey.error)?.code).toBe("idempotency_key_conflict");
    expect(server.calls().map((call) => call.params?.name)).toEqual(["send_message"]);
  });

  it("does not relay a tools/call sent as a notification, which would reach the server unguarded", async () => {
    const { client, server, log } = await connectThroughProxy();
    await client.notification({
      method: "tools/call",
      params: { name: "send_message", arguments: { to: "olga", idempotency_key: "k-16" } },
    } as unknown as Parameters<typeof client.notification>[0]);
    await client.listTools();
    expect(server.calls()).toEqual([]);
    expect(log.some((line) => line.includes("tools/call without an id"))).toBe(true);
  });

  it("answers a request id the client reused after cancelling it with the new call's result, never the old one's", async () => {
    const [clientSide, proxyFacingClient] = InMemoryTransport.createLinkedPair();
    const [proxyFacingServer, serverSide] = InMemoryTransport.createLinkedPair();
    const server = new ScriptedServer(serverSide);
    await serverSide.start();
    const proxy = await startMcpProxy({
      client: proxyFacingClient,
      server: proxyFacingServer,
      store: memoryStore(),
      rules: new Map(),
      scope: "default",
      log: () => undefined,
    });
    const answers: Raw[] = [];
    clientSide.onmessage = (message) => void answers.push(message as Raw);
    await clientSide.start();
    running.push({ client: new Client({ name: "unused", version: "1.0.0" }), proxy });
    let finishFirst!: () => void;
    const held = new Promise<void>((resolve) => {
      finishFirst = resolve;
    });
    server.answerCall = async (request) => {
      const to = (request.params?.arguments as { to?: string } | undefined)?.to;
      if (to === "first") await held;
      return { result: { content: [{ type: "text", text: `sent to ${to}` }] } };
    };
    const send = (message: Record<string, unknown>) =>
      clientSide.send({ jsonrpc: "2.0", ...message } as JSONRPCMessage);
    const call = (to: string, key: string) =>
      send({
        id: 7,
        method: "tools/call",
        params: { name: "send_message", arguments: { to, idempotency_key: key } },
      });
    await call("first", "k-17");
    while (server.calls().length === 0) await new Promise((resolve) => setImmediate(resolve));
    await send({ method: "notifications/cancelled", params: { requestId: 7 } });
    await call("second", "k-18");
    while (server.calls().length < 2) await new Promise((resolve) => setImmediate(resolve));
    // Let the second call finish first (bounded: an answer dropped by mistake never comes).
    for (let turn = 0; turn < 1_000 && !answers.some((message) => message.id === 7); turn++) {
      await new Promise((resolve) => setImmediate(resolve));
    }
    finishFirst();
    await proxy.close();
    const toSeven = answers.filter((message) => message.id === 7);
    expect(toSeven).toHaveLength(1);
    expect(JSON.stringify(toSeven[0])).toContain("sent to second");
  });
});
