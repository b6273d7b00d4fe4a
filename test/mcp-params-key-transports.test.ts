/**
 * `acceptParamsKey` on the transports servers use: the SDK 1.x Streamable HTTP transport (whose
 * `onmessage` is an accessor of its class), and a connection whose client reuses the id of a request it
 * cancelled, which must not inherit the cancelled call's way of answering.
 */
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
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

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function mailServer(sent: string[], hold?: Promise<void>) {
  const server = new McpServer({ name: "mail", version: "1.0.0" });
  registerIdempotentTool(
    server,
    "send_email",
    { description: "Send an email.", inputSchema: { to: z.string() } },
    async ({ to }) => {
      await hold;
      sent.push(to);
      return { content: [{ type: "text", text: `sent to ${to}` }] };
    },
    { store: memoryStore(), inProgress: "reject", keyFrom: { argument: "optional" } },
  );
  return server;
}

type Answer = { id?: unknown; result?: Record<string, unknown>; error?: { code: number; data?: unknown } };

describe("acceptParamsKey", () => {
  it("answers a reused id of a cancelled call by where its own key came from", async () => {
    const held = gate();
    const sent: string[] = [];
    const server = mailServer(sent, held.opened);
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(acceptParamsKey(serverSide));
    cleanups.push(() => server.close());
    const waiting = new Map<unknown, (answer: Answer) => void>();
    clientSide.onmessage = (message) => waiting.get((message as Answer).id)?.(message as Answer);
    await clientSide.start();
    const send = (message: Record<string, unknown>) =>
      clientSide.send({ jsonrpc: "2.0", ...message } as never);
    const answerTo = (id: number) => new Promise<Answer>((resolve) => waiting.set(id, resolve));
    const request = async (id: number, method: string, params: Record<string, unknown>) => {
      const answered = answerTo(id);
      await send({ id, method, params });
      return answered;
    };

    await request(0, "initialize", {
      protocolVersion: "2025-06-18",
      capabilities: {},
      clientInfo: { name: "c", version: "1" },
    });
    await send({ method: "notifications/initialized" });
    // Id 7 keyed in params, cancelled while it runs: the SDK never answers a cancelled request.
    await send({
      id: 7,
      method: "tools/call",
      params: { name: "send_email", arguments: { to: "ada" }, idempotencyKey: "k-1" },
    });
    await send({ method: "notifications/cancelled", params: { requestId: 7, reason: "timeout" } });
    held.open();
    // Id 7 again, for a call keyed in its argument that conflicts: its answer stays an isError result.
    await request(8, "tools/call", { name: "send_email", arguments: { to: "bob", idempotency_key: "k-9" } });
    const reused = await request(7, "tools/call", {
      name: "send_email",
      arguments: { to: "eve", idempotency_key: "k-9" },
    });
    expect(reused.error).toBeUndefined();
    expect(reused.result?.isError).toBe(true);
    expect(reused.result?._meta).toMatchObject({
      [MetaKey.error]: { code: "idempotency_key_conflict" } satisfies Partial<IdempotencyErrorInfo>,
    });
  });

  it("leaves the SDK 1.x Streamable HTTP transport answering requests, and reads the key there", async () => {
    const sent: string[] = [];
    const transport = acceptParamsKey(
      new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), enableJsonResponse: true }),
    );
    const server = mailServer(sent);
    await server.connect(transport);
    const http = createServer((request, response) => void transport.handleRequest(request, response));
    await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
    cleanups.push(
      () => server.close(),
      () => new Promise((resolve) => http.close(resolve)),
      () => http.closeAllConnections(),
    );
    const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
    let session: Record<string, string> = {};
    const post = async (body: Record<string, unknown>) => {
      const response = await fetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "mcp-protocol-version": "2025-06-18",
          ...session,
        },
        body: JSON.stringify({ jsonrpc: "2.0", ...body }),
      });
      session = { "mcp-session-id": response.headers.get("mcp-session-id") ?? "" };
      return (await response.json()) as Answer;
    };
    const initialized = await post({
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "c", version: "1" } },
    });
    expect(initialized.result).toBeDefined();
    const call = { name: "send_email", arguments: { to: "ada" }, idempotencyKey: "k-1" };
    await post({ id: 2, method: "tools/call", params: call });
    const conflict = await post({
      id: 3,
      method: "tools/call",
      params: { ...call, arguments: { to: "bob" } },
    });
    expect(conflict.error).toMatchObject({ code: -32602, data: { type: "idempotency_key_conflict" } });
    expect(sent).toEqual(["ada"]);
  });
});
