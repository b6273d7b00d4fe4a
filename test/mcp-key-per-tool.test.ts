/**
 * Over MCP the model chooses the keys, and every tool of a server shares the default scope: a key one
 * tool used must never hand its outcome to another tool. A real client and server, nothing mocked.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { memoryStore } from "../src/index.js";
import { type IdempotencyErrorInfo, MetaKey, registerIdempotentTool } from "../src/mcp/index.js";
import { type Connected, callTool, connectInMemory, textOf } from "./fixtures/mcp-harness.js";

const open: Connected[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
});

/** A server with send_email and send_sms on one store, recording what each really sent. */
async function messagingServer() {
  const sent: string[] = [];
  const store = memoryStore();
  const server = new McpServer({ name: "messaging", version: "1.0.0" });
  for (const channel of ["email", "sms"] as const) {
    registerIdempotentTool(
      server,
      `send_${channel}`,
      { description: `Send an ${channel}.`, inputSchema: { to: z.string(), body: z.string() } },
      async (args) => {
        sent.push(`${channel}:${args.to}`);
        return { content: [{ type: "text" as const, text: `${channel} sent to ${args.to}` }] };
      },
      { store },
    );
  }
  const connected = await connectInMemory(server);
  open.push(connected);
  return { client: connected.client, sent };
}

const errorOf = (result: CallToolResult) => result._meta?.[MetaKey.error] as IdempotencyErrorInfo;

describe("a key belongs to one tool over MCP", () => {
  it("answers another tool's key with a conflict the model can act on, and sends nothing", async () => {
    const { client, sent } = await messagingServer();
    const args = { to: "+15550100", body: "Your table is ready", idempotency_key: "turn-7" };
    const email = await callTool(client, "send_email", args);
    expect(email.isError).toBeFalsy();

    const sms = await callTool(client, "send_sms", args);
    expect(sent).toEqual(["email:+15550100"]);
    expect(sms.isError).toBe(true);
    expect(errorOf(sms)).toMatchObject({ code: "idempotency_key_conflict", was_replay: false });
    expect(textOf(sms)).toContain("send_email");
    expect(textOf(sms)).toContain("did not run");
    expect(textOf(sms)).toContain("new idempotency_key");
    expect(textOf(sms)).not.toContain("sent to");

    const retried = await callTool(client, "send_sms", { ...args, idempotency_key: "turn-7-sms" });
    expect(retried.isError).toBeFalsy();
    expect(sent).toEqual(["email:+15550100", "sms:+15550100"]);
  });
});
