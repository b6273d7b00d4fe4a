/**
 * idempotool/mcp inside `mcp-handler` (Vercel's adapter for Next.js and other web frameworks): its
 * `createMcpHandler` builds an McpServer of the SDK 2.x for each request, and `registerIdempotentTool`
 * registers the tool on it as on any other. Driven over HTTP by a v2 Client, as a deployed route is.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createMcpHandler } from "mcp-handler";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { type IdempotencyStore, memoryStore } from "../src/index.js";
import { registerIdempotentTool } from "../src/mcp/index.js";
import { cleanups, envelope, textOf } from "./fixtures/mcp-v2.js";

/**
 * A Next.js-style route: `mcp-handler`'s handler on a local port, every request served by a fresh server
 * whose `send_email` tool records on `store`. `front` may replace a response on its way out (a gateway
 * whose connection to the client broke, say).
 */
async function route(
  store: IdempotencyStore,
  sent: string[],
  front: (response: Response) => Promise<Response> = async (response) => response,
): Promise<URL> {
  const handler = createMcpHandler(
    (server) => {
      registerIdempotentTool(
        server,
        "send_email",
        { description: "Send an email.", inputSchema: { to: z.string() } },
        async ({ to }) => {
          sent.push(to);
          return { content: [{ type: "text", text: `sent #${sent.length} to ${to}` }] };
        },
        { store },
      );
    },
    { serverInfo: { name: "mail", version: "1.0.0" } },
  );
  const server = serve({
    fetch: async (request: Request) => front(await handler(request)),
    port: 0,
    hostname: "127.0.0.1",
    createServer,
  });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/api/mcp`);
}

async function agent(url: URL): Promise<Client> {
  const client = new Client({ name: "agent", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(url));
  cleanups.push(() => client.close());
  return client;
}

const sendTo = (to: string, key: string) => ({
  name: "send_email",
  arguments: { to, idempotency_key: key },
});

describe("registerIdempotentTool inside mcp-handler's createMcpHandler", () => {
  it("sends once for a repeated key, and the repeat is the original answer, marked as a replay", async () => {
    const sent: string[] = [];
    const client = await agent(await route(memoryStore(), sent));

    const first = await client.callTool(sendTo("ada@example.com", "welcome-ada"));
    const repeat = await client.callTool(sendTo("ada@example.com", "welcome-ada"));
    const other = await client.callTool(sendTo("ada@example.com", "reminder-ada"));

    expect(sent).toEqual(["ada@example.com", "ada@example.com"]);
    expect(textOf(repeat)).toContain(textOf(first));
    expect(envelope(first)?.was_replay).toBe(false);
    expect(envelope(repeat)?.was_replay).toBe(true);
    expect(envelope(other)?.was_replay).toBe(false);
  });

  it("lists the key as a required argument the model fills in", async () => {
    const client = await agent(await route(memoryStore(), []));
    const { tools } = await client.listTools();
    const tool = tools.find((listed) => listed.name === "send_email");
    expect(tool?.inputSchema.required).toContain("idempotency_key");
  });

  it("answers a client whose first answer was lost on the way back with the original, sending once", async () => {
    const sent: string[] = [];
    let lost = 0;
    const url = await route(memoryStore(), sent, async (response) => {
      // The first tool answer never reaches the client: the gateway answers 502 after the server sent it.
      const body = await response.clone().text();
      if (lost === 0 && body.includes("sent ")) {
        lost++;
        return new Response("bad gateway", { status: 502 });
      }
      return response;
    });
    const client = await agent(url);

    await expect(client.callTool(sendTo("bo@example.com", "welcome-bo"))).rejects.toThrow();
    const retried = await client.callTool(sendTo("bo@example.com", "welcome-bo"));

    expect(lost).toBe(1);
    expect(sent).toEqual(["bo@example.com"]);
    expect(envelope(retried)?.was_replay).toBe(true);
  });
});
