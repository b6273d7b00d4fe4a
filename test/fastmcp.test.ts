/**
 * `idempotentExecute` in a real fastmcp server (its `addTool({ execute })`), served over Streamable HTTP
 * and driven by the MCP SDK's client: a repeated key sends once and replays, a key reused with other
 * arguments is refused, and a call without a key sends nothing. Emails are counted.
 */
import { createServer } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { FastMCP } from "fastmcp";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { memoryStore } from "../src/index.js";
import {
  type IdempotencyErrorInfo,
  type IdempotencyInfo,
  idempotentExecute,
  keyDescription,
  MetaKey,
} from "../src/mcp/index.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A port nobody listens on now. */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/**
 * A fastmcp mail server whose send_email is idempotent, and a client connected to it; with `users`, the
 * server authenticates each request by its bearer token, and `scope` names the namespace of its keys.
 */
async function mailServer(
  sent: string[],
  auth: { token?: string; scope?: (context: { session?: { user: string } | undefined }) => string } = {},
) {
  const server = new FastMCP<{ user: string }>({
    name: "mail",
    version: "1.0.0",
    ...(auth.token === undefined
      ? {}
      : {
          authenticate: async (request) => ({
            user: String(request.headers.authorization ?? "").replace(/^Bearer /, ""),
          }),
        }),
  });
  server.addTool({
    name: "send_email",
    description: "Send an email.",
    parameters: z.object({
      to: z.string(),
      idempotency_key: z.string().describe(keyDescription(86_400_000)),
    }),
    execute: idempotentExecute(
      async ({ to }: { to: string }) => {
        sent.push(to);
        return `sent #${sent.length} to ${to}`;
      },
      { name: "send_email", store: memoryStore(), ...(auth.scope ? { scope: auth.scope } : {}) },
    ),
  });
  const port = await freePort();
  await server.start({ transportType: "httpStream", httpStream: { port, host: "127.0.0.1" } });
  cleanups.push(() => server.stop());
  const client = new Client({ name: "agent", version: "1.0.0" });
  const headers = auth.token === undefined ? {} : { authorization: `Bearer ${auth.token}` };
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), { requestInit: { headers } }),
  );
  cleanups.push(() => client.close());
  return client;
}

const text = (result: unknown) =>
  (result as CallToolResult).content.map((block) => (block.type === "text" ? block.text : "")).join("\n");

describe("idempotentExecute in a fastmcp server", () => {
  it("refuses an authenticated call without a scope, rather than share the anonymous namespace", async () => {
    const sent: string[] = [];
    const client = await mailServer(sent, { token: "alice" });
    const result = (await client.callTool({
      name: "send_email",
      arguments: { to: "ada@example.com", idempotency_key: "k-1" },
    })) as CallToolResult;
    expect(result.isError).toBe(true);
    expect(text(result)).toContain("pass the scope option");
    expect(sent).toEqual([]);
  });

  it("runs an authenticated call in the namespace its scope names", async () => {
    const sent: string[] = [];
    const client = await mailServer(sent, {
      token: "alice",
      scope: (context) => `user:${context.session?.user}`,
    });
    const call = { name: "send_email", arguments: { to: "ada@example.com", idempotency_key: "k-1" } };
    expect(text(await client.callTool(call))).toBe("sent #1 to ada@example.com");
    expect(sent).toEqual(["ada@example.com"]);
  });

  it("sends once for a repeated key, and answers the repeat with the original result, marked a replay", async () => {
    const sent: string[] = [];
    const client = await mailServer(sent);
    const call = { name: "send_email", arguments: { to: "ada@example.com", idempotency_key: "k-1" } };
    const first = await client.callTool(call);
    const repeat = await client.callTool(call);
    expect(sent).toEqual(["ada@example.com"]);
    expect(text(first)).toBe("sent #1 to ada@example.com");
    expect(text(repeat)).toContain("sent #1 to ada@example.com");
    expect(text(repeat)).toContain("This is a replay");
    expect(repeat._meta?.[MetaKey.envelope]).toMatchObject({
      was_replay: true,
    } satisfies Partial<IdempotencyInfo>);
  });

  it("refuses a key reused with other arguments, and sends nothing more", async () => {
    const sent: string[] = [];
    const client = await mailServer(sent);
    await client.callTool({
      name: "send_email",
      arguments: { to: "ada@example.com", idempotency_key: "k-1" },
    });
    const conflict = await client.callTool({
      name: "send_email",
      arguments: { to: "bob@example.com", idempotency_key: "k-1" },
    });
    expect(conflict.isError).toBe(true);
    expect(conflict._meta?.[MetaKey.error]).toMatchObject({
      code: "idempotency_key_conflict",
    } satisfies Partial<IdempotencyErrorInfo>);
    expect(sent).toEqual(["ada@example.com"]);
  });

  it("lists the key as a required argument described for the model", async () => {
    const client = await mailServer([]);
    const { tools } = await client.listTools();
    const tool = tools.find((listed) => listed.name === "send_email");
    expect(tool?.inputSchema.required).toContain("idempotency_key");
    expect(JSON.stringify(tool?.inputSchema.properties)).toContain("Unique per intent");
  });
});
