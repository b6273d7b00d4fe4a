/**
 * registerIdempotentTool's `withoutKey` option: a host that sends one tool call twice, milliseconds apart,
 * under two request ids and no key, gets one effect; the model is told the second was taken for a
 * duplicate. Past the window an identical call runs, and calls with keys are judged by their keys alone.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { memoryStore } from "../src/index.js";
import {
  type IdempotencyErrorInfo,
  type IdempotencyInfo,
  MetaKey,
  registerIdempotentTool,
} from "../src/mcp/index.js";
import { fakeClock } from "../src/testing/fake-clock.js";
import { type Connected, connectInMemory } from "./fixtures/mcp-harness.js";

const open: Connected[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((connection) => connection.close()));
});

/** A mail server whose send_email takes calls without a key, keyed by their arguments for 5 s. */
async function mailServer(sent: string[], clock = fakeClock()) {
  const store = memoryStore();
  const server = new McpServer({ name: "mail", version: "1.0.0" });
  registerIdempotentTool(
    server,
    "send_email",
    { description: "Send an email.", inputSchema: { to: z.string() } },
    async ({ to }) => {
      sent.push(to);
      return { content: [{ type: "text", text: `sent #${sent.length} to ${to}` }] };
    },
    { store, clock, keyFrom: { argument: "optional" }, withoutKey: { windowMs: 5_000 } },
  );
  const connected = await connectInMemory(server);
  open.push(connected);
  return { client: connected.client, clock, store };
}

const info = (result: unknown) =>
  (result as CallToolResult)._meta?.[MetaKey.envelope] as IdempotencyInfo | undefined;
const texts = (result: unknown) =>
  (result as CallToolResult).content.map((block) => (block.type === "text" ? block.text : "")).join("\n");
const email = (to: string, key?: string) => ({
  name: "send_email",
  arguments: key === undefined ? { to } : { to, idempotency_key: key },
});

describe("withoutKey", () => {
  it("sends once for two identical calls sent together without a key, and says the second was a duplicate", async () => {
    const sent: string[] = [];
    const { client } = await mailServer(sent);
    const [first, second] = await Promise.all([
      client.callTool(email("ada@example.com")),
      client.callTool(email("ada@example.com")),
    ]);
    expect(sent).toEqual(["ada@example.com"]);
    const replay = [first, second].find((result) => info(result)?.was_replay);
    expect(info(replay)).toMatchObject({ key_source: "arguments", was_replay: true });
    expect(texts(replay)).toContain("taken for a duplicate and not run");
    expect(texts(replay)).toContain("call again with a new idempotency_key");
  });

  it("runs an identical call again once the window has passed, and a call with other arguments at once", async () => {
    const sent: string[] = [];
    const { client, clock } = await mailServer(sent);
    await client.callTool(email("ada@example.com"));
    await client.callTool(email("bob@example.com"));
    const within = await client.callTool(email("ada@example.com"));
    await clock.advance(5_001);
    const after = await client.callTool(email("ada@example.com"));
    expect(info(within)?.was_replay).toBe(true);
    expect(info(after)?.was_replay).toBe(false);
    expect(sent).toEqual(["ada@example.com", "bob@example.com", "ada@example.com"]);
  });

  it("leaves calls with keys to their keys: two keys, two emails, even with the same arguments", async () => {
    const sent: string[] = [];
    const { client } = await mailServer(sent);
    const keyed = await client.callTool(email("ada@example.com", "k-1"));
    await client.callTool(email("ada@example.com", "k-2"));
    await client.callTool(email("ada@example.com"));
    expect(sent).toHaveLength(3);
    expect(info(keyed)?.key_source).toBeUndefined();
  });

  it("keeps its keys apart from callers': a caller's key in the derived keys' form is refused", async () => {
    const sent: string[] = [];
    const { client, store } = await mailServer(sent);
    await client.callTool(email("ada@example.com"));
    const [record] = (await store.list({})).records;
    expect(record?.key.startsWith("~args~")).toBe(true);
    const forged = await client.callTool(email("ada@example.com", record?.key ?? ""));
    expect(forged.isError).toBe(true);
    expect((forged._meta?.[MetaKey.error] as IdempotencyErrorInfo | undefined)?.code).toBe(
      "idempotency_key_invalid",
    );
    expect(sent).toEqual(["ada@example.com"]);
  });

  it("derives its key from the keyed fingerprint when the records' fingerprints are keyed", async () => {
    const plain = memoryStore();
    const keyed = memoryStore();
    for (const [store, extra] of [
      [plain, {}],
      [keyed, { fingerprintKeys: { keys: { f1: new Uint8Array(32).fill(7) }, current: "f1" } }],
    ] as const) {
      const server = new McpServer({ name: "mail", version: "1.0.0" });
      registerIdempotentTool(
        server,
        "send_email",
        { inputSchema: { to: z.string() } },
        async () => ({ content: [] }),
        { store, keyFrom: { argument: "optional" }, withoutKey: { windowMs: 5_000 }, ...extra },
      );
      const connected = await connectInMemory(server);
      open.push(connected);
      await connected.client.callTool(email("ada@example.com"));
    }
    const [plainRecord] = (await plain.list({})).records;
    const [keyedRecord] = (await keyed.list({})).records;
    expect(keyedRecord?.fingerprint).toMatch(/^hmac-sha256:/);
    // A dump of the store cannot test guesses of the arguments against the key.
    expect(keyedRecord?.key).not.toBe(plainRecord?.key);
  });

  it("is refused with a key argument the SDK requires, or a window that is not a short whole number of ms", () => {
    const register = (options: object) => () =>
      registerIdempotentTool(
        new McpServer({ name: "mail", version: "1.0.0" }),
        "send_email",
        { inputSchema: { to: z.string() } },
        async () => ({ content: [] }),
        { store: memoryStore(), ...options },
      );
    expect(register({ withoutKey: { windowMs: 5_000 } })).toThrow(/withoutKey.*needs keyFrom/);
    for (const windowMs of [0, 1.5, 60_001, "5s"]) {
      expect(register({ keyFrom: { argument: "optional" }, withoutKey: { windowMs } })).toThrow(
        /withoutKey.*must be \{ windowMs \}/,
      );
    }
  });
});
