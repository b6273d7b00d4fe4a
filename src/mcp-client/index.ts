/**
 * `idempotool/mcp-client`: MCP clients whose tool calls are safe to retry. Each logical tool call gets one
 * idempotency key, sent in the request's `_meta` on every retry of that call (a transport error, a
 * timeout, a reconnect, the client's own retries), so a server built with `idempotool/mcp`, or one behind
 * `idempotool proxy`, runs it once however often it arrives. Retries are bounded, with backoff; a call that
 * never got an answer is reported as "may or may not have happened", with its key, never retried under a
 * new one.
 *
 * `idempotentClient` wraps the MCP SDK's `Client` (1.x or 2.x); `idempotentMcpTools` the AI SDK's MCP client
 * (`@ai-sdk/mcp`). This entry imports neither, nor any server code, at runtime.
 * @module
 */
export {
  type CallResultOf,
  type IdempotentCallOptions,
  type IdempotentClient,
  type IdempotentClientOptions,
  idempotentClient,
  type McpClientLike,
  type SdkRequestOptions,
  type ToolCallParams,
} from "./idempotent-client.js";
export {
  type IdempotentMcpTools,
  idempotentMcpTools,
  type McpToolLike,
  type SendingTransport,
} from "./idempotent-mcp-tools.js";
export type { RetryCallOptions } from "./retry-call.js";
