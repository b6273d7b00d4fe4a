/**
 * A remote MCP server on Cloudflare Workers (the `agents` package's `McpAgent`) whose side-effectful tool,
 * `send_slack_message`, is wrapped with idempotool: it requires an `idempotency_key`, and every repeat of
 * one key posts once, whichever MCP session it comes from.
 *
 * Each MCP session runs in its own `SlackMcp` Durable Object, so the records cannot live there: a retry
 * that comes back on a new session would meet an empty store. They live in one `IdempotencyRecords`
 * object per key space, reached by name from every session (the routing recipe).
 *
 * Run it: `wrangler dev` with wrangler.jsonc beside this file, or `node --import tsx
 * examples/cloudflare-mcp.ts`, which runs it in workerd and calls it from an MCP client.
 */

import { DurableObject } from "cloudflare:workers";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { McpAgent } from "agents/mcp";
import {
  durableObjectStore,
  durableObjectStoreClient,
  handleStoreCall,
  type StoreCall,
} from "idempotool/cloudflare";
import { registerIdempotentTool } from "idempotool/mcp";
import { z } from "zod";

interface Env {
  readonly MCP_OBJECT: DurableObjectNamespace<SlackMcp>;
  readonly IDEMPOTOOL: DurableObjectNamespace<IdempotencyRecords>;
  readonly SLACK: DurableObjectNamespace<FakeSlack>;
}

/** Keeps the idempotency records of one key space in its SQLite storage, and answers store calls over RPC. */
export class IdempotencyRecords extends DurableObject<Env> {
  readonly store = durableObjectStore({ storage: this.ctx.storage });

  idempotency(call: StoreCall) {
    return handleStoreCall(this.store, call);
  }
}

/** Stands in for Slack's Web API: like `chat.postMessage`, it posts every time it is called. */
export class FakeSlack extends DurableObject<Env> {
  post(channel: string, text: string): { ts: string } {
    this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS posts (channel TEXT, text TEXT)");
    this.ctx.storage.sql.exec("INSERT INTO posts VALUES (?, ?)", channel, text);
    const count = this.ctx.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM posts").one().n;
    return { ts: `1700000000.${String(count).padStart(6, "0")}` };
  }

  posts(): { channel: string; text: string }[] {
    this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS posts (channel TEXT, text TEXT)");
    return this.ctx.storage.sql
      .exec<{ channel: string; text: string }>("SELECT channel, text FROM posts")
      .toArray();
  }
}

/** The MCP server: one object per session. */
export class SlackMcp extends McpAgent<Env> {
  server = new McpServer({ name: "slack", version: "1.0.0" });

  async init() {
    // Every session meets the one object of the "slack-tools" key space, so a repeat is a replay wherever
    // it comes from. Leases are judged by that object's clock. A function, so a broken stub is replaced.
    const store = durableObjectStoreClient(() => this.env.IDEMPOTOOL.getByName("slack-tools"));
    registerIdempotentTool(
      this.server,
      "send_slack_message",
      {
        title: "Send a Slack message",
        description: "Post a message to a Slack channel.",
        inputSchema: { channel: z.string().describe("Channel name, like #deploys"), text: z.string() },
        annotations: { destructiveHint: false, openWorldHint: true },
      },
      async ({ channel, text }) => {
        const { ts } = await this.env.SLACK.getByName("workspace").post(channel, text);
        return { content: [{ type: "text", text: `Posted to ${channel} (ts ${ts}).` }] };
      },
      // A posted message cannot be unposted: if the tool dies mid-call, fail closed rather than post twice.
      // `z` because a Worker's bundle has no `require` to find zod with.
      { store, effect: "irreversible", z },
    );
  }
}

const mcp = SlackMcp.serve("/mcp", { binding: "MCP_OBJECT" });

export default {
  async fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    // For the check script: what Slack received.
    if (new URL(request.url).pathname === "/slack/posts") {
      return Response.json(await env.SLACK.getByName("workspace").posts());
    }
    return mcp.fetch(request, env, ctx);
  },
} satisfies ExportedHandler<Env>;
