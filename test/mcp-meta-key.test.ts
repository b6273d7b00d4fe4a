/**
 * registerIdempotentTool reads the key from the request's `_meta` too (keyFrom), against the real MCP
 * SDK: a real Client and McpServer over the SDK's in-memory transport.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { isIdempotencyError, memoryStore } from "../src/index.js";
import {
  type IdempotencyErrorInfo,
  type IdempotencyInfo,
  type KeyFrom,
  MetaKey,
  registerIdempotentTool,
} from "../src/mcp/index.js";
import { type Connected, connectInMemory, textOf } from "./fixtures/mcp-harness.js";

const open: Connected[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
});

/** A server with `send_email`, whose every run is recorded in `sent` with the arguments it got. */
async function emailServer(keyFrom?: KeyFrom) {
  const sent: { args: Record<string, unknown>; key: string }[] = [];
  const server = new McpServer({ name: "mail", version: "1.0.0" });
  registerIdempotentTool(
    server,
    "send_email",
    { description: "Send an email.", inputSchema: { to: z.string(), body: z.string() } },
    async (args, _extra, context) => {
      sent.push({ args: { ...args }, key: context.key });
      return { content: [{ type: "text", text: `sent #${sent.length} to ${args.to}` }] };
    },
    { store: memoryStore(), ...(keyFrom === undefined ? {} : { keyFrom }) },
  );
  const connected = await connectInMemory(server);
  open.push(connected);
  const call = async (args: Record<string, unknown>, meta?: Record<string, unknown>) =>
    (await connected.client.callTool({
      name: "send_email",
      arguments: args,
      ...(meta === undefined ? {} : { _meta: meta }),
    })) as CallToolResult;
  return { sent, call, client: connected.client };
}

const errorInfo = (result: CallToolResult) =>
  result._meta?.[MetaKey.error] as IdempotencyErrorInfo | undefined;
const envelope = (result: CallToolResult) => result._meta?.[MetaKey.envelope] as IdempotencyInfo | undefined;
const mail = { to: "ann@example.com", body: "hi" };

describe("the key in _meta", () => {
  it("by default lists the argument as required and reads _meta too: the same key in both runs once", async () => {
    const { sent, call, client } = await emailServer();
    const [tool] = (await client.listTools()).tools;
    expect(tool?.inputSchema.required).toContain("idempotency_key");
    const first = await call({ ...mail, idempotency_key: "k-1" }, { idempotencyKey: "k-1" });
    const again = await call({ ...mail, idempotency_key: "k-1" }, { idempotency_key: "k-1" });
    expect(first.isError).toBeFalsy();
    expect(envelope(again)?.was_replay).toBe(true);
    expect(sent).toEqual([{ args: mail, key: "k-1" }]);
  });

  it("refuses an argument and a _meta key that differ, saying so, and runs nothing", async () => {
    const { sent, call } = await emailServer({ argument: "optional" });
    const result = await call({ ...mail, idempotency_key: "k-1" }, { idempotencyKey: "k-2" });
    expect(result.isError).toBe(true);
    expect(errorInfo(result)?.code).toBe("invalid_arguments");
    expect(textOf(result)).toBe(
      "The tool did not run: the idempotency key was given twice with different values (the idempotency_key " +
        'argument is "k-1", _meta.idempotencyKey is "k-2"), so nothing ran. Send one key, in one place.',
    );
    expect(sent).toEqual([]);
  });

  it('with argument "optional", lists the argument as optional and runs a call keyed in _meta alone once', async () => {
    const { sent, call, client } = await emailServer({ argument: "optional" });
    const [tool] = (await client.listTools()).tools;
    expect(tool?.inputSchema.properties).toHaveProperty("idempotency_key");
    expect(tool?.inputSchema.required).not.toContain("idempotency_key");
    await call(mail, { idempotency_key: "k-1", progressToken: 5 });
    const again = await call({ ...mail, idempotency_key: "k-1" });
    expect(envelope(again)?.was_replay).toBe(true);
    expect(sent).toEqual([{ args: mail, key: "k-1" }]);
  });

  it('with argument "optional", a call with no key anywhere is refused and nothing runs', async () => {
    const { sent, call } = await emailServer({ argument: "optional" });
    const result = await call(mail);
    expect(errorInfo(result)?.code).toBe("idempotency_key_missing");
    expect(textOf(result)).toContain(
      "Send it as the idempotency_key argument or in _meta.idempotency_key or _meta.idempotencyKey.",
    );
    expect(sent).toEqual([]);
  });

  it('with argument "hidden", lists no key argument, and takes the key from _meta only', async () => {
    const { sent, call, client } = await emailServer({ argument: "hidden" });
    const [tool] = (await client.listTools()).tools;
    expect(tool?.inputSchema.properties).not.toHaveProperty("idempotency_key");
    expect(tool?.inputSchema.required).toEqual(["to", "body"]);
    await call(mail, { idempotencyKey: "k-1" });
    await call(mail, { idempotencyKey: "k-1" });
    // An argument of that name is not the key here: the SDK drops it as an unknown field.
    const missing = await call({ ...mail, idempotency_key: "k-2" });
    expect(errorInfo(missing)?.code).toBe("idempotency_key_missing");
    expect(textOf(missing)).toContain(
      "takes its idempotency key from the request's _meta.idempotency_key or",
    );
    expect(sent).toEqual([{ args: mail, key: "k-1" }]);
  });

  it("reads the _meta fields it is told to, and only those", async () => {
    const { sent, call } = await emailServer({ argument: "hidden", meta: ["requestKey"] });
    expect(errorInfo(await call(mail, { idempotencyKey: "k-1" }))?.code).toBe("idempotency_key_missing");
    await call(mail, { requestKey: "k-1" });
    expect(sent).toEqual([{ args: mail, key: "k-1" }]);
  });

  it("with meta [], ignores _meta and keeps the argument required", async () => {
    const { sent, call } = await emailServer({ meta: [] });
    const result = await call(mail, { idempotencyKey: "k-1" });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toContain("Input validation error");
    await call({ ...mail, idempotency_key: "k-1" }, { idempotencyKey: "other" });
    expect(sent).toEqual([{ args: mail, key: "k-1" }]);
  });

  it.each([
    ["a number", 42, "_meta.idempotencyKey is a number"],
    ["null", null, "_meta.idempotencyKey is null"],
    ["empty", "", "_meta.idempotencyKey is empty"],
    ["too long", "k".repeat(256), "_meta.idempotencyKey is 256 characters long"],
    ["a control character", "k-1\u001b[2J", "_meta.idempotencyKey has a control character at index 3"],
    ["a C1 control character", "k\u0085", "_meta.idempotencyKey has a control character at index 1"],
  ])("refuses a _meta key that is %s as idempotency_key_invalid, and runs nothing", async (_, value, why) => {
    const { sent, call } = await emailServer({ argument: "hidden" });
    const result = await call(mail, { idempotencyKey: value });
    expect(result.isError).toBe(true);
    expect(errorInfo(result)?.code).toBe("idempotency_key_invalid");
    expect(textOf(result)).toContain("idempotency_key is required: a string of 1-255 characters");
    expect(textOf(result)).toContain(why);
    expect(sent).toEqual([]);
  });

  it("refuses an argument key with a control character the same way", async () => {
    const { sent, call } = await emailServer();
    const result = await call({ ...mail, idempotency_key: "k\u0000" });
    expect(errorInfo(result)?.code).toBe("idempotency_key_invalid");
    expect(textOf(result)).toContain("the idempotency_key argument has a control character at index 1");
    expect(sent).toEqual([]);
  });

  it("keeps the rest of _meta away from the key and from the fingerprint", async () => {
    const { sent, call } = await emailServer({ argument: "hidden" });
    await call(mail, { idempotencyKey: "k-1", progressToken: 1 });
    const again = await call(mail, { idempotencyKey: "k-1", progressToken: 2, trace: "x" });
    expect(envelope(again)?.was_replay).toBe(true);
    expect(sent).toHaveLength(1);
  });
});

describe("the keyFrom option", () => {
  const register = (keyFrom: unknown) => () =>
    registerIdempotentTool(
      new McpServer({ name: "s", version: "1" }),
      "t",
      { inputSchema: { a: z.string() } },
      () => ({ content: [] }),
      { store: memoryStore(), keyFrom: keyFrom as KeyFrom },
    );

  it.each([
    ["not an object", "meta", "`keyFrom` must be an object"],
    [
      "an unknown argument mode",
      { argument: "maybe" },
      '`keyFrom.argument` must be one of "required", "optional", "hidden"',
    ],
    ["meta that is not an array", { meta: "idempotencyKey" }, "`keyFrom.meta` must be an array"],
    ["an empty field name", { meta: [""] }, "`keyFrom.meta` must be an array"],
    ["no source at all", { argument: "hidden", meta: [] }, "takes the key from nowhere"],
  ])("refuses %s at registration", (_, keyFrom, message) => {
    let thrown: unknown;
    try {
      register(keyFrom)();
    } catch (error) {
      thrown = error;
    }
    expect(isIdempotencyError(thrown, "invalid_options")).toBe(true);
    expect((thrown as Error).message).toContain(message);
  });
});
