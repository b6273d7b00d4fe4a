/**
 * idempotentMcpTools against the AI SDK's real MCP client (@ai-sdk/mcp) and a real McpServer with
 * registerIdempotentTool, through a connection that drops replies. @ai-sdk/mcp 1.0.102 sends tools/call
 * with the arguments only, so the key reaches `_meta` through the wrapped transport.
 */
import { createMCPClient, type MCPClient } from "@ai-sdk/mcp";
import { createMCPClient as createMCPClientOf1 } from "@ai-sdk/mcp1";
import type { CallToolResult, JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import type { ToolExecutionOptions } from "../src/ai-sdk/execution-options.js";
import { type IdempotencyErrorInfo, type IdempotencyInfo, MetaKey } from "../src/mcp/index.js";
import { idempotentMcpTools } from "../src/mcp-client/index.js";
import { type LossyLink, lossyLink } from "./fixtures/lossy-mcp-link.js";
import { textOf } from "./fixtures/mcp-harness.js";

const links: LossyLink[] = [];
const clients: MCPClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close()));
  await Promise.all(links.splice(0).map((link) => link.close()));
});

const fast = { maxAttempts: 4, timeoutMs: 150, initialDelayMs: 0 };
const run: ToolExecutionOptions = { toolCallId: "call-1", messages: [], context: undefined };

/** The current major of the AI SDK's MCP client, and the previous one where users still are. */
const majors = [
  { label: "@ai-sdk/mcp 2", createMCPClient },
  { label: "@ai-sdk/mcp 1", createMCPClient: createMCPClientOf1 as unknown as typeof createMCPClient },
];
const envelope = (result: CallToolResult) => result._meta?.[MetaKey.envelope] as IdempotencyInfo | undefined;
const keysSent = (link: LossyLink) =>
  link.calls.map((call) => (call.params._meta as Record<string, unknown> | undefined)?.idempotency_key);

for (const { label, createMCPClient } of majors) {
  async function setUp(
    link: LossyLink,
    maxRetries = 0,
    onSend?: (message: JSONRPCMessage) => void,
    retry: typeof fast = fast,
  ) {
    links.push(link);
    let keysMade = 0;
    const idempotent = idempotentMcpTools({ retry, newKey: () => `key-${++keysMade}` });
    const transport = await link.connect();
    if (onSend) {
      const send = transport.send.bind(transport);
      transport.send = async (message, options) => {
        await send(message, options);
        onSend(message);
      };
    }
    const client = await createMCPClient({ transport: idempotent.transport(transport), maxRetries });
    clients.push(client);
    const tools = idempotent.tools(await client.tools());
    const sendEmail = async (input: Record<string, unknown>) =>
      (await tools.send_email?.execute?.(input, run)) as CallToolResult;
    return { sendEmail, keysMade: () => keysMade };
  }

  describe(`idempotentMcpTools on ${label}`, () => {
    it("retries lost replies under one key in _meta: one email, and the original outcome as a replay", async () => {
      const link = lossyLink({ argument: "hidden" });
      const { sendEmail } = await setUp(link);
      link.dropReplies = 2;
      const result = await sendEmail({ to: "ann" });
      expect(link.sent).toEqual([{ to: "ann", key: "key-1" }]);
      expect(keysSent(link)).toEqual(["key-1", "key-1", "key-1"]);
      expect(link.calls.every((call) => !("idempotency_key" in (call.params.arguments as object)))).toBe(
        true,
      );
      expect(envelope(result)?.was_replay).toBe(true);
      expect(textOf(result)).toContain("email #1 sent to ann");
    });

    it("gives each call the model makes its own key: two calls, two emails", async () => {
      const link = lossyLink({ argument: "hidden" });
      const { sendEmail, keysMade } = await setUp(link);
      link.dropReplies = 1;
      await sendEmail({ to: "ann" });
      await sendEmail({ to: "ann" });
      expect(link.sent.map((email) => email.key)).toEqual(["key-1", "key-2"]);
      expect(keysMade()).toBe(2);
    });

    it("keeps the key across the client's own maxRetries: a send that fails after the request went out", async () => {
      const link = lossyLink({ argument: "hidden" });
      let failures = 0;
      // @ai-sdk/mcp waits 2 s before its own retry: the wrapper's attempt must outlast that.
      const { sendEmail } = await setUp(
        link,
        2,
        (message) => {
          // The request reached the server, then the connection reset before the reply: @ai-sdk/mcp retries it.
          if ("method" in message && message.method === "tools/call" && failures++ === 0) {
            link.dropReplies = 1;
            throw Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
          }
        },
        { ...fast, maxAttempts: 1, timeoutMs: 10_000 },
      );
      const result = await sendEmail({ to: "ann" });
      expect(link.calls).toHaveLength(2);
      expect(keysSent(link)).toEqual(["key-1", "key-1"]);
      expect(link.sent).toHaveLength(1);
      expect(envelope(result)?.was_replay).toBe(true);
    }, 20_000);

    it("tells the model a call with no answer may or may not have happened, with its key; the model's retry with it replays", async () => {
      const link = lossyLink({ argument: "optional" });
      const { sendEmail } = await setUp(link);
      link.dropReplies = 4;
      const lost = await sendEmail({ to: "ann" });
      expect(lost.isError).toBe(true);
      expect((lost._meta?.[MetaKey.error] as IdempotencyErrorInfo | undefined)?.code).toBe("outcome_unknown");
      expect(textOf(lost)).toContain(
        "so the action may or may not have happened. Do not call it again under a new key",
      );
      expect(textOf(lost)).toContain('retry with idempotency_key "key-1"');
      // The tool lists the key argument, so the model can send it back; the key rides in both places.
      const retried = await sendEmail({ to: "ann", idempotency_key: "key-1" });
      expect(envelope(retried)?.was_replay).toBe(true);
      expect(link.sent).toHaveLength(1);
      expect(
        link.calls.map((call) => (call.params.arguments as Record<string, unknown>).idempotency_key),
      ).toEqual(["key-1", "key-1", "key-1", "key-1", "key-1"]);
    });

    it("passes a server's answer on without a retry: a conflict", async () => {
      const link = lossyLink({ argument: "optional" });
      const { sendEmail } = await setUp(link);
      await sendEmail({ to: "ann", idempotency_key: "k" });
      const conflict = await sendEmail({ to: "bob", idempotency_key: "k" });
      expect((conflict._meta?.[MetaKey.error] as IdempotencyErrorInfo | undefined)?.code).toBe(
        "idempotency_key_conflict",
      );
      expect(link.calls).toHaveLength(2);
    });
  });
}
