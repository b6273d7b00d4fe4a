import { invalidOption } from "../core/option-checks.js";
import { callKeyOf } from "./call-key-of.js";
import {
  type Judged,
  keyArgument,
  type RetryCallOptions,
  resolveRetryCall,
  retryCall,
  unknownOutcomeResult,
} from "./retry-call.js";

const owner = "idempotentMcpTools()";

/** The part of an AI SDK tool we use: its `execute` and, to see whether it lists a key argument, its schema. */
export interface McpToolLike {
  // The AI SDK's own tools type their input as any, and their options by the SDK's major: any lets every
  // major in without this entry's types naming the `ai` package (a project with only an MCP SDK has none).
  // biome-ignore lint/suspicious/noExplicitAny: see above.
  execute?: ((input: any, options: any) => unknown) | undefined;
  readonly inputSchema?: unknown;
}

/** What the AI SDK hands `execute` beside the input; this wrapper reads `abortSignal` and passes the rest on. */
interface ExecuteOptions {
  readonly abortSignal?: AbortSignal | undefined;
  readonly [option: string]: unknown;
}

/** The part of a transport we use: `send`. An AI SDK `MCPTransport` and the MCP SDK's transports fit. */
export interface SendingTransport {
  send(message: unknown, options?: unknown): Promise<void>;
}

/** What {@link idempotentMcpTools} returns: a transport wrapper and a tool-set wrapper that work as a pair. */
export interface IdempotentMcpTools {
  /**
   * The transport, made to carry each call's key in `_meta`: pass what it returns (the same object) to
   * `createMCPClient({ transport })`. @ai-sdk/mcp sends `tools/call` with the arguments only; this is where
   * the key is added to the request.
   */
  transport<T extends SendingTransport>(transport: T): T;
  /** The tool set from `mcpClient.tools()`, each tool's `execute` giving every logical call one key. */
  tools<T extends Record<string, McpToolLike>>(tools: T): T;
}

/**
 * Tools of the AI SDK's MCP client (`@ai-sdk/mcp`) whose calls are safe to retry: each time the model
 * calls a tool is one logical call with one key (the model's `idempotency_key` argument, if the tool lists
 * one and the model gave it, else a new one), sent in `_meta` on every attempt: the client's own
 * `maxRetries`, and this wrapper's retries after a timeout or a transport error, bounded with backoff. The
 * server's answer (a replay, a conflict, a call in flight) is passed on. A call whose every attempt ended
 * without an answer is reported to the model as "may or may not have happened", with its key, and never
 * retried under a new one.
 * @example
 * import { createMCPClient } from "@ai-sdk/mcp";
 * import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
 * import { idempotentMcpTools } from "idempotool/mcp-client";
 *
 * const idempotent = idempotentMcpTools({ retry: { maxAttempts: 3, timeoutMs: 30_000 } });
 * const mcp = await createMCPClient({
 *   transport: idempotent.transport(new StreamableHTTPClientTransport(new URL("https://mcp.example.com/mcp"))),
 *   maxRetries: 2,
 * });
 * const tools = idempotent.tools(await mcp.tools());
 */
export function idempotentMcpTools(options?: RetryCallOptions): IdempotentMcpTools {
  const config = resolveRetryCall(owner, options);
  // Each logical call's arguments object, as @ai-sdk/mcp puts it (the same object, on every attempt) in
  // the request it hands the transport: the transport finds the call's key by it.
  const keys = new WeakMap<object, string>();

  return {
    transport(transport) {
      if (typeof transport !== "object" || transport === null || typeof transport.send !== "function") {
        invalidOption(owner, "transport", "must be an MCP transport (with send)");
      }
      const send = transport.send.bind(transport);
      transport.send = (message: unknown, sendOptions?: unknown) =>
        send(withKeyInMeta(message, keys, config.metaField), sendOptions);
      return transport;
    },
    tools(tools) {
      if (typeof tools !== "object" || tools === null) invalidOption(owner, "tools", "must be a tool set");
      const wrapped: Record<string, McpToolLike> = {};
      for (const [name, tool] of Object.entries(tools)) {
        const execute = tool.execute;
        if (typeof execute !== "function") {
          wrapped[name] = tool;
          continue;
        }
        const listsKey = listsKeyArgument(tool.inputSchema);
        wrapped[name] = {
          ...tool,
          async execute(input: unknown, executeOptions: ExecuteOptions) {
            const given =
              typeof input === "object" && input !== null ? (input as Record<string, unknown>) : {};
            const { key } = callKeyOf({ arguments: given }, undefined, config);
            // One object for every attempt: the transport knows the call by it. A tool that lists the key
            // argument gets it there too, so it works without the transport.
            // A tool that does not list it gets no key argument (the model may have copied one from an
            // earlier "outcome unknown"): it goes in `_meta` only.
            const { [keyArgument]: _fromModel, ...own } = given;
            const args = listsKey ? { ...own, [keyArgument]: key } : own;
            keys.set(args, key);
            const caller = executeOptions?.abortSignal;
            const outcome = await retryCall(
              config,
              (timeoutMs) => attempt(execute, args, executeOptions, caller, timeoutMs, config.clock),
              judge,
              caller,
            );
            if (outcome.answered) return outcome.value;
            return unknownOutcomeResult(name, key, outcome.attempts, outcome.lastError);
          },
        };
      }
      return wrapped as typeof tools;
    },
  };
}

async function attempt(
  execute: NonNullable<McpToolLike["execute"]>,
  args: Record<string, unknown>,
  options: ExecuteOptions,
  caller: AbortSignal | undefined,
  timeoutMs: number,
  clock: ReturnType<typeof resolveRetryCall>["clock"],
): Promise<unknown> {
  // @ai-sdk/mcp puts no time limit on a tool call: without one, a lost reply would wait forever.
  const timeout = new AbortController();
  const timer = new AbortController();
  if (timeoutMs > 0) {
    void clock.sleep(timeoutMs, timer.signal).then(
      () => timeout.abort(new DOMException(`no answer within ${timeoutMs} ms`, "TimeoutError")),
      () => undefined,
    );
  }
  try {
    const signal = caller === undefined ? timeout.signal : AbortSignal.any([caller, timeout.signal]);
    return await execute(args, { ...options, abortSignal: signal });
  } finally {
    timer.abort();
  }
}

/**
 * A JSON-RPC error the server sent (it has a code), or a result that came but did not parse, is an answer.
 * Anything else (a timeout, a closed connection, a transport's failure, the client's own retries giving up)
 * is no answer: under the same key a retry is at worst a replay.
 */
function judge(error: unknown): Judged {
  // Only the client's own error carries the server's JSON-RPC code (a DOMException has a numeric code too).
  if (
    error instanceof Error &&
    error.name === "MCPClientError" &&
    typeof (error as { code?: unknown }).code === "number"
  ) {
    return "answer";
  }
  const message = error instanceof Error ? error.message : "";
  if (
    message.startsWith("Failed to parse server response") ||
    /^Tool ".*" (returned|did not return)/.test(message)
  ) {
    return "answer";
  }
  return "no_answer";
}

/** A `tools/call` request whose arguments are a call we keyed, with the key added to its `_meta`. */
function withKeyInMeta(message: unknown, keys: WeakMap<object, string>, field: string): unknown {
  if (typeof message !== "object" || message === null) return message;
  const request = message as { method?: unknown; params?: { arguments?: unknown; _meta?: unknown } };
  if (request.method !== "tools/call" || typeof request.params?.arguments !== "object") return message;
  const key = request.params.arguments === null ? undefined : keys.get(request.params.arguments);
  if (key === undefined) return message;
  const meta =
    typeof request.params._meta === "object" && request.params._meta !== null ? request.params._meta : {};
  return { ...request, params: { ...request.params, _meta: { ...meta, [field]: key } } };
}

/** Whether a tool's input schema (the AI SDK's JSON schema wrapper, or a plain JSON schema) lists the key. */
function listsKeyArgument(schema: unknown): boolean {
  const json = (schema as { jsonSchema?: unknown } | undefined)?.jsonSchema ?? schema;
  const properties = (json as { properties?: unknown } | undefined)?.properties;
  return typeof properties === "object" && properties !== null && Object.hasOwn(properties, keyArgument);
}
