/**
 * The demo's integration rows (MCP, the MCP proxy, LangGraph, HTTP): what they share, and how they are
 * loaded.
 *
 * Each row lives in its own module that imports its framework at the top (demo-mcp.ts, demo-proxy.ts,
 * demo-langgraph.ts, demo-http.ts). The frameworks are optional peers, so the demo loads each module with
 * a dynamic `import()` and shows the row as skipped when its framework is not installed. This module
 * imports none.
 * @module
 */
import { appendFileSync } from "node:fs";
import type { IdempotencyStore } from "../core/store.js";
import { type Email, readOutbox, type SentEmail } from "./demo-tool.js";

/** What an integration row gets: the demo's SQLite store and outbox, and a scope of its own. */
export interface IntegrationContext {
  readonly store: IdempotencyStore;
  readonly outbox: string;
  readonly scope: string;
  readonly email: Email;
}

/** Runs a row's calls and returns what each caller got, in order. */
export type IntegrationRun = (context: IntegrationContext) => Promise<string[]>;

export interface Integration {
  readonly source: string;
  /** The packages to install to see the row, when its module cannot be loaded. */
  readonly install: readonly string[];
  readonly load: () => Promise<IntegrationRun>;
}

export const integrations: readonly Integration[] = [
  {
    source: "MCP: client re-sends tools/call",
    install: ["@modelcontextprotocol/sdk", "zod"],
    load: async () => (await import("./demo-mcp.js")).runMcpRow,
  },
  {
    source: "Proxy: keyless MCP server, re-send",
    install: ["@modelcontextprotocol/sdk", "zod"],
    load: async () => (await import("./demo-proxy.js")).runProxyRow,
  },
  {
    source: "LangGraph: resume re-runs the node",
    install: ["@langchain/langgraph"],
    load: async () => (await import("./demo-langgraph.js")).runLangGraphRow,
  },
  {
    source: "HTTP: response lost, client retries",
    install: ["hono"],
    load: async () => (await import("./demo-http.js")).runHttpRow,
  },
];

/**
 * The email provider without any dedup, as the MCP and HTTP handlers call it: every call appends an
 * email to the outbox, in the same form as the demo's send_email tool does.
 */
export function deliverEmail(
  outbox: string,
  email: Email,
  scope: string,
  key: string,
): { messageId: string } {
  const messageId = `msg-${readOutbox(outbox).length + 1}`;
  const sent: SentEmail = { ...email, scope, key, messageId };
  appendFileSync(outbox, `${JSON.stringify(sent)}\n`);
  return { messageId };
}
