/**
 * `acceptParamsKey`: a server built with registerIdempotentTool reads the key a client sends in
 * `params.idempotencyKey` of `tools/call` (which the MCP SDKs drop before any handler), and answers a
 * repeat in progress and a reused key as JSON-RPC errors, as the MCP spec discussion has it. On the 1.x
 * and 2.x SDKs, each with its own client, over the SDK's in-memory link; every email is counted.
 */
import {
  Client as ClientV2,
  type InMemoryTransport as ClientV2Transport,
} from "@modelcontextprotocol/client";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport as InMemoryV1 } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer as McpServerV1 } from "@modelcontextprotocol/sdk/server/mcp.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { InMemoryTransport as InMemoryV2, McpServer as McpServerV2 } from "@modelcontextprotocol/server";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { memoryStore } from "../src/index.js";
import {
  acceptParamsKey,
  type IdempotencyErrorInfo,
  MetaKey,
  registerIdempotentTool,
} from "../src/mcp/index.js";
import { gate } from "./fixtures/tools.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

type Sent = { sent: string[]; hold?: Promise<void> };

/** send_email on a server of either SDK, its transport wrapped; `mail.hold` keeps a run in flight. */
function register(server: McpServerV1 | McpServerV2, mail: Sent) {
  registerIdempotentTool(
    server,
    "send_email",
    { description: "Send an email.", inputSchema: { to: z.string() } },
    async ({ to }: { to: string }) => {
      await mail.hold;
      mail.sent.push(to);
      return { content: [{ type: "text" as const, text: `sent #${mail.sent.length} to ${to}` }] };
    },
    // The key may come in params (or _meta), so the argument is optional.
    { store: memoryStore(), inProgress: "reject", keyFrom: { argument: "optional" } },
  );
}

/** A client of the SDK `sdk` connected to its own server; `call` sends a raw tools/call's params. */
async function connected(sdk: "1.x" | "2.x", mail: Sent) {
  if (sdk === "1.x") {
    const server = new McpServerV1({ name: "mail", version: "1.0.0" });
    register(server, mail);
    const [clientSide, serverSide] = InMemoryV1.createLinkedPair();
    await server.connect(acceptParamsKey(serverSide));
    const client = new ClientV1({ name: "agent", version: "1.0.0" });
    await client.connect(clientSide);
    cleanups.push(() => client.close());
    return (params: Record<string, unknown>) =>
      client.request({ method: "tools/call", params }, CallToolResultSchema) as Promise<
        Record<string, unknown>
      >;
  }
  const server = new McpServerV2({ name: "mail", version: "1.0.0" });
  register(server, mail);
  const [clientSide, serverSide] = InMemoryV2.createLinkedPair();
  await server.connect(acceptParamsKey(serverSide));
  const client = new ClientV2({ name: "agent", version: "1.0.0" });
  await client.connect(clientSide as unknown as ClientV2Transport);
  cleanups.push(() => client.close());
  return (params: Record<string, unknown>) =>
    client.request({ method: "tools/call", params }) as Promise<Record<string, unknown>>;
}

/** What a call that should fail rejected with, as the SDK's client raised the JSON-RPC error. */
async function jsonRpcError(answer: Promise<unknown>) {
  return answer.then(
    (result) => {
      throw new Error(`expected a JSON-RPC error, got ${JSON.stringify(result)}`);
    },
    (error: { code?: number; data?: Record<string, unknown> }) => ({ code: error.code, data: error.data }),
  );
}

describe.each(["1.x", "2.x"] as const)("acceptParamsKey on an MCP SDK %s server", (sdk) => {
  const email = (to: string, key: string) => ({ name: "send_email", arguments: { to }, idempotencyKey: key });

  it("takes the key from params.idempotencyKey: two calls, one email, the second a replay", async () => {
    const mail: Sent = { sent: [] };
    const call = await connected(sdk, mail);
    const first = await call(email("ada@example.com", "k-1"));
    const repeat = await call(email("ada@example.com", "k-1"));
    expect(mail.sent).toEqual(["ada@example.com"]);
    expect((first._meta as Record<string, unknown>)[MetaKey.envelope]).toMatchObject({ was_replay: false });
    expect((repeat._meta as Record<string, unknown>)[MetaKey.envelope]).toMatchObject({
      was_replay: true,
      idempotency_key: "k-1",
    });
  });

  it("answers a key reused with other arguments as a JSON-RPC error naming it, and sends nothing", async () => {
    const mail: Sent = { sent: [] };
    const call = await connected(sdk, mail);
    await call(email("ada@example.com", "k-1"));
    const refused = await jsonRpcError(call(email("bob@example.com", "k-1")));
    expect(refused).toEqual({
      code: -32602,
      data: { type: "idempotency_key_conflict", idempotencyKey: "k-1" },
    });
    expect(mail.sent).toEqual(["ada@example.com"]);
  });

  it("answers a repeat while the first call runs as a JSON-RPC error, with when to retry", async () => {
    const held = gate();
    const mail: Sent = { sent: [], hold: held.opened };
    const call = await connected(sdk, mail);
    const first = call(email("ada@example.com", "k-1"));
    const refused = await jsonRpcError(call(email("ada@example.com", "k-1")));
    expect(refused).toMatchObject({
      code: -32602,
      data: { type: "idempotency_key_in_progress", idempotencyKey: "k-1", retryAfterMs: expect.any(Number) },
    });
    held.open();
    await first;
    expect(mail.sent).toEqual(["ada@example.com"]);
  });

  it("refuses a params key that disagrees with the argument's, and sends nothing", async () => {
    const mail: Sent = { sent: [] };
    const call = await connected(sdk, mail);
    const result = await call({
      name: "send_email",
      arguments: { to: "ada@example.com", idempotency_key: "k-2" },
      idempotencyKey: "k-1",
    });
    expect(result.isError).toBe(true);
    expect((result._meta as Record<string, IdempotencyErrorInfo>)[MetaKey.error]?.code).toBe(
      "invalid_arguments",
    );
    expect(mail.sent).toEqual([]);
  });

  it("keeps the isError answers for a key that came in the argument", async () => {
    const mail: Sent = { sent: [] };
    const call = await connected(sdk, mail);
    await call({ name: "send_email", arguments: { to: "ada@example.com", idempotency_key: "k-1" } });
    const conflict = await call({
      name: "send_email",
      arguments: { to: "bob@example.com", idempotency_key: "k-1" },
    });
    expect(conflict.isError).toBe(true);
    expect((conflict._meta as Record<string, IdempotencyErrorInfo>)[MetaKey.error]?.code).toBe(
      "idempotency_key_conflict",
    );
  });
});
