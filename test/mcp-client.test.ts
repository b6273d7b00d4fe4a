/**
 * idempotentClient against the real MCP SDK: a real Client, a real McpServer with registerIdempotentTool,
 * and between them a connection that drops replies or closes instead of answering (the requests still
 * reach the server). One effect per logical call, however many retries.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import { isIdempotencyError } from "../src/index.js";
import { type IdempotencyErrorInfo, type IdempotencyInfo, MetaKey } from "../src/mcp/index.js";
import { type IdempotentClientOptions, idempotentClient } from "../src/mcp-client/index.js";
import { clientThrough, type LossyLink, lossyLink } from "./fixtures/lossy-mcp-link.js";
import { textOf } from "./fixtures/mcp-harness.js";

const links: LossyLink[] = [];
const clients: Client[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close()));
  await Promise.all(links.splice(0).map((link) => link.close()));
});

/** Short attempts and no backoff: the SDK's request timeout runs on real timers. */
const fast = { maxAttempts: 4, timeoutMs: 150, initialDelayMs: 0 };

async function setUp(options: IdempotentClientOptions = {}, link = lossyLink()) {
  links.push(link);
  const client = await clientThrough(link);
  clients.push(client);
  let keysMade = 0;
  const mcp = idempotentClient(client, {
    retry: fast,
    newKey: () => `key-${++keysMade}`,
    ...options,
  });
  return { link, client, mcp, keysMade: () => keysMade };
}

const envelope = (result: CallToolResult) => result._meta?.[MetaKey.envelope] as IdempotencyInfo | undefined;
const errorInfo = (result: CallToolResult) =>
  result._meta?.[MetaKey.error] as IdempotencyErrorInfo | undefined;
const keysSent = (link: LossyLink) =>
  link.calls.map((call) => (call.params._meta as Record<string, unknown>)?.idempotency_key);

describe("idempotentClient", () => {
  it("(the harness can see a double effect: a client that retries a lost reply under a new key sends twice)", async () => {
    const { link, client } = await setUp();
    link.dropReplies = 1;
    const call = (key: string) =>
      client.callTool(
        { name: "send_email", arguments: { to: "ann" }, _meta: { idempotency_key: key } },
        undefined,
        {
          timeout: 150,
        },
      );
    await expect(call("first")).rejects.toThrow("Request timed out");
    await call("second");
    expect(link.sent).toHaveLength(2);
  });

  it("sends one key in _meta on every retry after lost replies: one email, and the original outcome as a replay", async () => {
    const { link, mcp } = await setUp();
    link.dropReplies = 2;
    const result = await mcp.callTool({ name: "send_email", arguments: { to: "ann" } });
    expect(link.sent).toEqual([{ to: "ann", key: "key-1" }]);
    expect(keysSent(link)).toEqual(["key-1", "key-1", "key-1"]);
    expect(textOf(result)).toContain("email #1 sent to ann");
    expect(envelope(result)).toMatchObject({ was_replay: true, idempotency_key: "key-1" });
  });

  it("runs each logical call once however its replies are lost, and gives each its own key", async () => {
    const { link, mcp, keysMade } = await setUp();
    const results: CallToolResult[] = [];
    for (const [to, lost] of [
      ["ann", 0],
      ["bob", 3],
      ["cy", 1],
      ["dee", 2],
    ] as const) {
      link.dropReplies = lost;
      results.push(await mcp.callTool({ name: "send_email", arguments: { to } }));
    }
    expect(link.sent.map((email) => email.to)).toEqual(["ann", "bob", "cy", "dee"]);
    expect(link.calls).toHaveLength(1 + 4 + 2 + 3);
    expect(keysMade()).toBe(4);
    expect(results.map((result) => envelope(result)?.was_replay)).toEqual([false, true, true, true]);
    expect(results.map(textOf).map((text) => text.split("\n")[0])).toEqual([
      "email #1 sent to ann",
      "email #2 sent to bob",
      "email #3 sent to cy",
      "email #4 sent to dee",
    ]);
  });

  it("reports a call that never got an answer as an unknown outcome with its key, and a retry under that key replays it", async () => {
    const { link, mcp, keysMade } = await setUp();
    link.dropReplies = 4;
    const lost = await mcp.callTool({ name: "send_email", arguments: { to: "ann" } });
    expect(lost.isError).toBe(true);
    expect(errorInfo(lost)).toMatchObject({
      code: "outcome_unknown",
      idempotency_key: "key-1",
      was_replay: false,
    });
    expect(textOf(lost)).toMatch(
      /^Outcome unknown: no answer came from the server for this call of send_email \(idempotency_key "key-1"\) after 4 attempts \(last: McpError: MCP error -32001: Request timed out\), so the action may or may not have happened\. Do not call it again under a new key/,
    );
    expect(textOf(lost)).toContain('To try again, retry with idempotency_key "key-1" and the same arguments');
    // The server did run it, once; the key it was reported with gets that outcome back.
    const retried = await mcp.callTool(
      { name: "send_email", arguments: { to: "ann" } },
      { idempotencyKey: "key-1" },
    );
    expect(envelope(retried)?.was_replay).toBe(true);
    expect(textOf(retried)).toContain("email #1 sent to ann");
    expect(link.sent).toHaveLength(1);
    expect(keysMade()).toBe(1);
  });

  it("reconnects when the connection closes mid-call, and the retry on the new connection gets the replay", async () => {
    const link = lossyLink();
    let reconnects = 0;
    const { mcp, client } = await setUp(
      {
        reconnect: async () => {
          reconnects++;
          await client.connect(await link.connect());
        },
      },
      link,
    );
    link.closeInsteadOfReplying = 1;
    const result = await mcp.callTool({ name: "send_email", arguments: { to: "ann" } });
    expect(reconnects).toBe(1);
    expect(envelope(result)?.was_replay).toBe(true);
    expect(link.sent).toHaveLength(1);
    expect(keysSent(link)).toEqual(["key-1", "key-1"]);
  });

  it("passes a server's answer on as it is, without a retry: a conflict", async () => {
    const { link, mcp } = await setUp();
    await mcp.callTool({ name: "send_email", arguments: { to: "ann" } }, { idempotencyKey: "k" });
    const conflict = await mcp.callTool(
      { name: "send_email", arguments: { to: "bob" } },
      { idempotencyKey: "k" },
    );
    expect(errorInfo(conflict)?.code).toBe("idempotency_key_conflict");
    expect(link.calls).toHaveLength(2);
    expect(link.sent).toHaveLength(1);
  });

  it("rethrows a JSON-RPC error the server answered with, without a retry", async () => {
    const { link, client } = await setUp();
    // A server-side refusal the SDK sends as a JSON-RPC error: a request the server cannot parse.
    const mcp = idempotentClient(client, { retry: fast });
    await expect(
      mcp.callTool({ name: "send_email", arguments: { to: "ann" }, task: "nope" } as never),
    ).rejects.toMatchObject({
      name: "McpError",
    });
    expect(link.calls).toHaveLength(1);
  });

  it("uses the key the call already carries, in _meta or as the idempotency_key argument", async () => {
    const { link, mcp, keysMade } = await setUp({}, lossyLink({ argument: "optional" }));
    await mcp.callTool({
      name: "send_email",
      arguments: { to: "ann" },
      _meta: { idempotency_key: "m-1", trace: "t" },
    });
    link.dropReplies = 1;
    await mcp.callTool({ name: "send_email", arguments: { to: "bob", idempotency_key: "a-1" } });
    expect(link.sent).toEqual([
      { to: "ann", key: "m-1" },
      { to: "bob", key: "a-1" },
    ]);
    expect(link.calls[0]?.params._meta).toEqual({ idempotency_key: "m-1", trace: "t" });
    expect(keysSent(link)).toEqual(["m-1", "a-1", "a-1"]);
    expect(keysMade()).toBe(0);
  });

  it("stops at once when the caller aborts, without a retry", async () => {
    const { link, mcp } = await setUp();
    link.dropReplies = 10;
    const controller = new AbortController();
    const pending = mcp.callTool(
      { name: "send_email", arguments: { to: "ann" } },
      { signal: controller.signal },
    );
    await new Promise((resolve) => setTimeout(resolve, 20));
    controller.abort(new Error("user stopped"));
    await expect(pending).rejects.toThrow("user stopped");
    expect(link.calls).toHaveLength(1);
  });

  it("refuses a key maker that makes no usable key before anything is sent", async () => {
    const { link, client } = await setUp();
    const mcp = idempotentClient(client, { newKey: () => "" });
    let thrown: unknown;
    try {
      await mcp.callTool({ name: "send_email", arguments: { to: "ann" } });
    } catch (error) {
      thrown = error;
    }
    expect(isIdempotencyError(thrown, "idempotency_key_invalid")).toBe(true);
    expect(link.calls).toHaveLength(0);
  });

  it("refuses bad options when it is made, naming them", () => {
    const client = { callTool: async () => ({ content: [] }) } as never;
    expect(() => idempotentClient(client, { retry: { maxAttempts: 0 } })).toThrow("retry.maxAttempts");
    expect(() => idempotentClient(client, { metaField: "" })).toThrow("metaField");
    expect(() => idempotentClient({} as never)).toThrow("client");
  });
});
