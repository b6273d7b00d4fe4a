import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { RequestOptions } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { CallToolRequest, CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { invalidOption } from "../core/option-checks.js";
import { callKeyOf } from "./call-key-of.js";
import {
  type Judged,
  type RetryCallOptions,
  resolveRetryCall,
  retryCall,
  unknownOutcomeResult,
} from "./retry-call.js";

const owner = "idempotentClient()";

/** The part of an MCP SDK `Client` we use; an SDK 1.x `Client` fits. */
export type McpClientLike = Pick<Client, "callTool">;

/** Options of {@link idempotentClient}. */
export interface IdempotentClientOptions extends RetryCallOptions {
  /**
   * Called before a retry when the connection was lost (closed, or never connected): connect the client
   * again, `client.connect(new StreamableHTTPClientTransport(url))` say. Without it, such a call is retried
   * on the client as it is.
   */
  readonly reconnect?: (() => Promise<void>) | undefined;
}

/** Options of one call. */
export interface IdempotentCallOptions {
  /**
   * The key of this logical call, to retry a call that ended without an answer under the key it was
   * reported with. Default: the `_meta` field or `idempotency_key` argument the call carries, or a new one.
   */
  readonly idempotencyKey?: string | undefined;
  /** Aborts the call at once, without a retry; its outcome is then unknown to the caller. */
  readonly signal?: AbortSignal | undefined;
  /** Passed to the SDK on each attempt (`onprogress`, `resetTimeoutOnProgress`, …). */
  readonly request?: Omit<RequestOptions, "timeout" | "signal"> | undefined;
}

/** An MCP client whose tool calls are safe to retry. */
export interface IdempotentClient {
  /**
   * Call a tool once per logical call: every attempt sends the same key in `_meta`. Resolves with the
   * server's result (a replay, a conflict, a call in flight: as the server said it), or, when no attempt
   * got an answer, with an `isError` result saying the outcome is unknown, with the key to retry under.
   * Rejects with the server's error when it answers with one, and at once when `signal` aborts.
   */
  callTool(params: CallToolRequest["params"], options?: IdempotentCallOptions): Promise<CallToolResult>;
}

/** JSON-RPC codes the SDK uses for "no answer came": the connection closed, the request timed out. */
const connectionClosed = -32000;
const requestTimeout = -32001;

/**
 * Wrap an MCP SDK `Client` so that each tool call gets one idempotency key, sent in `_meta` on every
 * retry of that call: after a transport error, a timeout, or a lost connection (with `reconnect`). Retries
 * are bounded, with backoff. A call whose every attempt ended without an answer is reported as "may or may
 * not have happened", with its key, and never retried under a new key. The server (an `idempotool/mcp`
 * tool, or `idempotool proxy`) runs the call once and replays its outcome to every retry.
 * @example
 * import { Client } from "@modelcontextprotocol/sdk/client/index.js";
 * import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
 * import { idempotentClient } from "idempotool/mcp-client";
 *
 * const url = new URL("https://mcp.example.com/mcp");
 * const client = new Client({ name: "agent", version: "1.0.0" });
 * await client.connect(new StreamableHTTPClientTransport(url));
 * const mcp = idempotentClient(client, {
 *   retry: { maxAttempts: 4, timeoutMs: 30_000 },
 *   reconnect: () => client.connect(new StreamableHTTPClientTransport(url)),
 * });
 * const result = await mcp.callTool({ name: "send_email", arguments: { to: "ann@example.com", body: "Hi" } });
 */
export function idempotentClient(client: McpClientLike, options?: IdempotentClientOptions): IdempotentClient {
  if (typeof client !== "object" || client === null || typeof client.callTool !== "function") {
    invalidOption(owner, "client", "must be an MCP SDK Client");
  }
  const config = resolveRetryCall(owner, options);
  const reconnect = options?.reconnect;
  if (reconnect !== undefined && typeof reconnect !== "function") {
    invalidOption(owner, "reconnect", "must be a function");
  }

  return {
    async callTool(params, callOptions = {}) {
      const { key, meta } = callKeyOf(params, callOptions.idempotencyKey, config);
      const sent = { ...params, _meta: meta };
      const outcome = await retryCall(
        config,
        async (timeoutMs) =>
          (await client.callTool(sent, undefined, {
            ...callOptions.request,
            // 0 is "no limit" for us; the SDK reads a timeout of 0 as "time out at once".
            timeout: timeoutMs === 0 ? 2 ** 31 - 1 : timeoutMs,
            ...(callOptions.signal === undefined ? {} : { signal: callOptions.signal }),
          })) as CallToolResult,
        judge,
        callOptions.signal,
        reconnect,
      );
      if (outcome.answered) return outcome.value;
      return unknownOutcomeResult(params.name, key, outcome.attempts, outcome.lastError);
    },
  };
}

/**
 * A JSON-RPC error the server sent is its answer; the SDK's "connection closed" and "not connected" mean
 * the connection is gone; a timeout or a transport's own failure is no answer. Anything unrecognised is
 * retried: under the same key a retry is at worst a replay.
 */
function judge(error: unknown): Judged {
  const code = (error as { code?: unknown } | null)?.code;
  if (code === connectionClosed) return "connection_lost";
  if (code === requestTimeout) return "no_answer";
  if (error instanceof Error && error.name === "McpError" && typeof code === "number") return "answer";
  if (error instanceof Error && error.message === "Not connected") return "connection_lost";
  return "no_answer";
}
