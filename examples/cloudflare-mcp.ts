/**
 * Runs examples/cloudflare-mcp/worker.ts in workerd, Cloudflare's runtime (through miniflare, as
 * `wrangler dev` would), and calls its `send_slack_message` tool from the MCP SDK's client over streamable
 * HTTP: twice with one key, then again from a second MCP session (a client that reconnected). Slack gets
 * one post; the repeats are replays.
 *
 * Run: node --import tsx examples/cloudflare-mcp.ts   (checks itself; exits non-zero on failure)
 */
import assert from "node:assert/strict";
import { builtinModules, createRequire } from "node:module";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { build, type Plugin } from "esbuild";
import { type IdempotencyInfo, MetaKey } from "idempotool/mcp";
import { Miniflare } from "miniflare";

const here = join(import.meta.dirname, "cloudflare-mcp");

// Bundle as wrangler does: ESM for workerd, its own and Node's built-in modules left to the runtime.
const bundle = await build({
  entryPoints: [join(here, "worker.ts")],
  bundle: true,
  write: false,
  format: "esm",
  platform: "neutral",
  target: "es2022",
  conditions: ["workerd", "worker", "browser", "import"],
  mainFields: ["module", "main"],
  external: ["cloudflare:*", "node:*", ...builtinModules],
  tsconfig: join(here, "tsconfig.json"),
  plugins: [withoutMcpSdkV2()],
  logLevel: "warning",
});

const mf = new Miniflare({
  modules: true,
  script: bundle.outputFiles[0]!.text,
  compatibilityDate: "2026-05-03",
  compatibilityFlags: ["nodejs_compat"],
  durableObjects: {
    MCP_OBJECT: { className: "SlackMcp", useSQLite: true },
    IDEMPOTOOL: { className: "IdempotencyRecords", useSQLite: true },
    SLACK: { className: "FakeSlack", useSQLite: true },
  },
});

/** An MCP session: the SDK's client over streamable HTTP, its requests served by the Worker. */
async function connect(name: string): Promise<Client> {
  const client = new Client({ name, version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL("http://example.com/mcp"), {
    fetch: (url, init) => mf.dispatchFetch(url, init as never) as unknown as Promise<Response>,
  });
  await client.connect(transport);
  return client;
}

async function send(client: Client, key: string): Promise<CallToolResult> {
  return (await client.callTool({
    name: "send_slack_message",
    arguments: { channel: "#deploys", text: "Deploy 42 is live", idempotency_key: key },
  })) as CallToolResult;
}
const text = (result: CallToolResult) =>
  result.content.map((item) => (item.type === "text" ? item.text : `[${item.type}]`)).join(" | ");
const envelope = (result: CallToolResult) => result._meta?.[MetaKey.envelope] as IdempotencyInfo | undefined;

try {
  const client = await connect("agent-host");
  const first = await send(client, "deploy-42-announce");
  console.log(`call 1: ${text(first)}`);
  assert.equal(first.isError, undefined, text(first));
  assert.equal(envelope(first)?.was_replay, false);

  const second = await send(client, "deploy-42-announce");
  console.log(`call 2 (transport retry, same key): ${text(second)}`);
  assert.equal(envelope(second)?.was_replay, true, "the second call is a replay");
  assert.match(text(second), /Posted to #deploys \(ts 1700000000\.000001\)\./);

  // A client that lost its session reconnects: a new session, so a new McpAgent object.
  const again = await connect("agent-host-reconnected");
  const third = await send(again, "deploy-42-announce");
  console.log(`call 3 (new MCP session, same key): ${text(third)}`);
  assert.equal(envelope(third)?.was_replay, true, "a repeat from another session is a replay too");

  const posts = (await (await mf.dispatchFetch("http://example.com/slack/posts")).json()) as unknown[];
  assert.deepEqual(posts, [{ channel: "#deploys", text: "Deploy 42 is live" }]);
  console.log(`OK: 3 calls over MCP, ${posts.length} Slack post.`);
  await client.close();
  await again.close();
} finally {
  await mf.dispose();
}

/**
 * `agents/mcp` imports the MCP SDK v2 server package (`@modelcontextprotocol/server`) for its newer handlers;
 * McpAgent serves the v1 SDK's McpServer and uses none of it. Where that package is not installed, stand in
 * for it with classes and functions that throw if anything reaches them.
 */
function withoutMcpSdkV2(): Plugin {
  const name = "@modelcontextprotocol/server";
  return {
    name: "without-mcp-sdk-v2",
    setup(setup) {
      try {
        createRequire(join(here, "worker.ts")).resolve(name);
        return;
      } catch {
        // Not installed: stand in below.
      }
      setup.onResolve({ filter: /^@modelcontextprotocol\/server$/ }, () => ({
        path: name,
        namespace: "absent",
      }));
      setup.onLoad({ filter: /.*/, namespace: "absent" }, () => ({
        contents: `
          const absent = () => { throw new Error("${name} is not installed"); };
          export class McpServer { constructor() { absent(); } }
          export class Server { constructor() { absent(); } }
          export class WebStandardStreamableHTTPServerTransport { constructor() { absent(); } }
          export const createMcpHandler = absent, hostHeaderValidationResponse = absent, isJSONRPCRequest = absent,
            isLegacyRequest = absent, originValidationResponse = absent;
          export const localhostAllowedHostnames = [], localhostAllowedOrigins = [];`,
        loader: "js",
      }));
    },
  };
}
