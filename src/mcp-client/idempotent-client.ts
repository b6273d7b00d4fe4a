import { invalidOption } from "../core/option-checks.js";
import type { ToolResult } from "../mcp/mcp-types.js";
import { callKeyOf } from "./call-key-of.js";
import {
  type Judged,
  type RetryCallOptions,
  resolveRetryCall,
  retryCall,
  unknownOutcomeResult,
} from "./retry-call.js";

const owner = "idempotentClient()";

/** A `tools/call` request's params: the tool, its arguments, and `_meta`. */
export interface ToolCallParams {
  readonly name: string;
  readonly arguments?: Record<string, unknown> | undefined;
  readonly _meta?: Record<string, unknown> | undefined;
}

/**
 * The part of an MCP SDK `Client` we use: `callTool`. The 1.x SDK's `Client` (`@modelcontextprotocol/sdk`,
 * `callTool(params, resultSchema, options)`) and the 2.x SDK's (`@modelcontextprotocol/client`,
 * `callTool(params, options)`) both fit; which one it is, is told by the client itself.
 */
export interface McpClientLike {
  // Each SDK declares its own parameter types after params: never lets either client in.
  callTool(params: ToolCallParams, ...rest: never[]): Promise<unknown>;
}

/** What a call resolves with on this client: its SDK's `CallToolResult`. */
export type CallResultOf<Client> = Client extends { callTool(...args: never[]): Promise<infer Result> }
  ? Extract<Result, { content: unknown }> extends never
    ? ToolResult
    : Extract<Result, { content: unknown }>
  : ToolResult;

/** Options passed to the SDK on each attempt, beside the timeout and signal this wrapper sets. */
export interface SdkRequestOptions {
  /** Called with each progress notification the server sends for the call. */
  readonly onprogress?:
    | ((progress: { progress: number; total?: number; message?: string }) => void)
    | undefined;
  /** Restart the attempt's timeout on each progress notification. */
  readonly resetTimeoutOnProgress?: boolean | undefined;
  /** The longest an attempt may take however much progress arrives (ms). */
  readonly maxTotalTimeout?: number | undefined;
  readonly [option: string]: unknown;
}

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
  readonly request?: SdkRequestOptions | undefined;
}

/** An MCP client whose tool calls are safe to retry. */
export interface IdempotentClient<Result = ToolResult> {
  /**
   * Call a tool once per logical call: every attempt sends the same key in `_meta`. Resolves with the
   * server's result (a replay, a conflict, a call in flight: as the server said it), or, when no attempt
   * got an answer, with an `isError` result saying the outcome is unknown, with the key to retry under.
   * Rejects with the server's error when it answers with one, and at once when `signal` aborts.
   */
  callTool(params: ToolCallParams, options?: IdempotentCallOptions): Promise<Result>;
}

/** JSON-RPC codes the 1.x SDK uses for "no answer came": the connection closed, the request timed out. */
const connectionClosed = -32000;
const requestTimeout = -32001;

/**
 * The 2.x SDK's local errors (`SdkError`, never sent by the server) that prove the request did not run:
 * refused before it was sent, or refused by the server's auth before any tool. Every other one (a closed
 * connection, a timeout, an HTTP 5xx, a result that failed validation) may follow a run, and is retried.
 */
const refusedBeforeRunning = new Set([
  "NOT_INITIALIZED",
  "CAPABILITY_NOT_SUPPORTED",
  "METHOD_NOT_SUPPORTED_BY_PROTOCOL_VERSION",
  "CLIENT_HTTP_AUTHENTICATION",
  "CLIENT_HTTP_FORBIDDEN",
]);

/** The 2.x SDK's local errors that mean the connection is gone: reconnect before the retry. */
const connectionGone = new Set(["CONNECTION_CLOSED", "NOT_CONNECTED"]);

/**
 * Wrap an MCP SDK `Client` so that each tool call gets one idempotency key, sent in `_meta` on every
 * retry of that call: after a transport error, a timeout, or a lost connection (with `reconnect`). Retries
 * are bounded, with backoff. A call whose every attempt ended without an answer is reported as "may or may
 * not have happened", with its key, and never retried under a new key. The server (an `idempotool/mcp`
 * tool, or `idempotool proxy`) runs the call once and replays its outcome to every retry.
 * @example
 * import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
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
export function idempotentClient<Client extends McpClientLike>(
  client: Client,
  options?: IdempotentClientOptions,
): IdempotentClient<CallResultOf<Client>> {
  if (typeof client !== "object" || client === null || typeof client.callTool !== "function") {
    invalidOption(owner, "client", "must be an MCP SDK Client");
  }
  const config = resolveRetryCall(owner, options);
  const reconnect = options?.reconnect;
  if (reconnect !== undefined && typeof reconnect !== "function") {
    invalidOption(owner, "reconnect", "must be a function");
  }
  // The 2.x Client takes (params, options); the 1.x one (params, resultSchema, options). Only 2.x
  // clients negotiate a protocol era.
  const takesOptionsSecond = typeof (client as { getProtocolEra?: unknown }).getProtocolEra === "function";
  const callTool = client.callTool as (params: ToolCallParams, ...rest: unknown[]) => Promise<unknown>;

  return {
    async callTool(params, callOptions = {}) {
      const { key, meta } = callKeyOf(params, callOptions.idempotencyKey, config);
      const sent = { ...params, _meta: meta };
      const outcome = await retryCall(
        config,
        (timeoutMs) => {
          const requestOptions = {
            ...callOptions.request,
            // 0 is "no limit" for us; the SDK reads a timeout of 0 as "time out at once".
            timeout: timeoutMs === 0 ? 2 ** 31 - 1 : timeoutMs,
            ...(callOptions.signal === undefined ? {} : { signal: callOptions.signal }),
          };
          return takesOptionsSecond
            ? callTool.call(client, sent, requestOptions)
            : callTool.call(client, sent, undefined, requestOptions);
        },
        judge,
        callOptions.signal,
        reconnect,
      );
      if (outcome.answered) return outcome.value as CallResultOf<Client>;
      return unknownOutcomeResult(
        params.name,
        key,
        outcome.attempts,
        outcome.lastError,
      ) as CallResultOf<Client>;
    },
  };
}

/**
 * A JSON-RPC error the server sent is its answer (1.x `McpError`, 2.x `ProtocolError`), as is a 2.x
 * refusal before anything ran; the SDK's "connection closed" and "not connected" mean the connection is
 * gone; a timeout, an HTTP error status or a transport's own failure is no answer. Anything unrecognised
 * is retried: under the same key a retry is at worst a replay.
 */
function judge(error: unknown): Judged {
  if (!(error instanceof Error)) return "no_answer";
  const code = (error as { code?: unknown }).code;
  if (error.name === "SdkError" || error.name === "SdkHttpError") {
    if (typeof code !== "string") return "no_answer";
    return connectionGone.has(code)
      ? "connection_lost"
      : refusedBeforeRunning.has(code)
        ? "answer"
        : "no_answer";
  }
  if (code === connectionClosed) return "connection_lost";
  if (code === requestTimeout) return "no_answer";
  if ((error.name === "McpError" || error.name === "ProtocolError") && typeof code === "number")
    return "answer";
  if (error.message === "Not connected") return "connection_lost";
  return "no_answer";
}
