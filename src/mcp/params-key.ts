/**
 * The idempotency key in `params.idempotencyKey` of `tools/call`, the field the MCP spec discussion
 * converged on. The MCP SDKs drop request params they do not know before any handler sees them, and turn
 * what a tool returns into a result; so the key is read, and a refusal of it answered, at the server's
 * transport, which sees the messages as they are.
 */
import { ErrorCode } from "../core/errors.js";
import { isObject } from "./mcp-types.js";
import { type IdempotencyErrorInfo, MetaKey } from "./tool-results.js";

/**
 * Where the transport leaves a `params.idempotencyKey` for `registerIdempotentTool` to read. A client that
 * writes this `_meta` field itself gives one more copy of its key, checked as every copy is.
 */
export const paramsKeyMetaField = "idempotool/params-idempotency-key";

/** The part of an MCP transport (SDK 1.x or 2.x) read and wrapped here. */
export interface McpTransportLike {
  // biome-ignore lint/suspicious/noExplicitAny: each SDK types its messages and extras its own way.
  onmessage?: ((message: any, ...rest: any[]) => void) | undefined;
  // biome-ignore lint/suspicious/noExplicitAny: as above.
  send(message: any, ...rest: any[]): Promise<void>;
}

/** The JSON-RPC error code of a key's refusals: the request's params cannot be served now, or ever. */
export const keyErrorCode = -32602;

/** What a refusal of a key is called in `error.data.type`, by idempotool's error code. */
const refusalTypes: Readonly<Record<string, string>> = {
  [ErrorCode.keyInUse]: "idempotency_key_in_progress",
  [ErrorCode.keyConflict]: "idempotency_key_conflict",
};

/**
 * A repeat in flight or a key reused for other arguments, as a JSON-RPC error: `error.data.type` names it
 * (`idempotency_key_in_progress`, `idempotency_key_conflict`) beside the key, and, for a call in flight,
 * how long to wait before retrying. Undefined for every other code.
 */
export function keyRefusal(
  code: string,
  message: string,
  key: string,
  retryAfterMs?: number,
): { code: number; message: string; data: Record<string, unknown> } | undefined {
  const type = refusalTypes[code];
  if (type === undefined) return undefined;
  const retry = code === ErrorCode.keyInUse && retryAfterMs !== undefined ? { retryAfterMs } : {};
  return { code: keyErrorCode, message, data: { type, idempotencyKey: key, ...retry } };
}

/**
 * Let the tools `registerIdempotentTool` registers on a server read their key from `params.idempotencyKey`
 * of `tools/call`, beside the argument and `_meta` (copies that disagree are refused, and nothing runs).
 * A call whose key came that way speaks the protocol's own idempotency, and gets a repeat still in
 * progress and a key reused with other arguments as JSON-RPC errors (code -32602, `error.data.type`
 * `idempotency_key_in_progress` or `idempotency_key_conflict`, `error.data.idempotencyKey`) instead of
 * `isError` results. Wrap the server's transport before connecting it; returns the same transport. Give
 * such tools `keyFrom: { argument: "optional" }` (or `"hidden"`), or the SDK refuses a call whose key is
 * not in its arguments.
 * @example
 * import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
 * import { acceptParamsKey } from "idempotool/mcp";
 * await server.connect(acceptParamsKey(new StdioServerTransport()));
 */
export function acceptParamsKey<T extends McpTransportLike>(transport: T): T {
  // The calls whose key came in params, by request id, until they are answered or cancelled.
  const keyed = new Set<unknown>();
  let handler: McpTransportLike["onmessage"];
  // biome-ignore lint/suspicious/noExplicitAny: passed on as the SDK gave them.
  const receive = (message: any, ...rest: any[]) => handler?.(fromParams(message, keyed), ...rest);
  // A transport may keep `onmessage` behind an accessor of its class (SDK 1.x's Streamable HTTP transport
  // hands it to an inner one): the wrapped handler goes through that accessor too.
  const inherited = accessorOf(Object.getPrototypeOf(transport), "onmessage");
  const install = (next: McpTransportLike["onmessage"]) => {
    handler = next;
    inherited?.set?.call(transport, next === undefined ? undefined : receive);
  };
  const existing = transport.onmessage;
  Object.defineProperty(transport, "onmessage", {
    configurable: true,
    enumerable: true,
    get: () => (handler === undefined ? undefined : receive),
    set: install,
  });
  if (existing !== undefined) install(existing);
  const send = transport.send.bind(transport);
  // biome-ignore lint/suspicious/noExplicitAny: as above.
  transport.send = (message: any, ...rest: any[]) => send(toJsonRpcError(message, keyed), ...rest);
  return transport;
}

/** The accessor `name` has on `prototype` or further up its chain, if it is one. */
function accessorOf(prototype: object | null, name: string): PropertyDescriptor | undefined {
  for (let at = prototype; at !== null && at !== Object.prototype; at = Object.getPrototypeOf(at)) {
    const descriptor = Object.getOwnPropertyDescriptor(at, name);
    if (descriptor) return descriptor.set ? descriptor : undefined;
  }
  return undefined;
}

/** A `tools/call` with `params.idempotencyKey`: the key moved into `_meta`, where the tool reads it. */
function fromParams(message: unknown, keyed: Set<unknown>): unknown {
  if (isObject(message) && message.method === "notifications/cancelled" && isObject(message.params)) {
    // A cancelled request is never answered, and its id may be used again for another call.
    keyed.delete(message.params.requestId);
    return message;
  }
  if (!isObject(message) || message.method !== "tools/call" || !isObject(message.params)) return message;
  if (!Object.hasOwn(message.params, "idempotencyKey")) return message;
  const { idempotencyKey, ...params } = message.params;
  if (message.id !== undefined) keyed.add(message.id);
  const meta = isObject(params._meta) ? params._meta : {};
  return { ...message, params: { ...params, _meta: { ...meta, [paramsKeyMetaField]: idempotencyKey } } };
}

/** The answer to a call whose key came in params: a refusal of that key as a JSON-RPC error. */
function toJsonRpcError(message: unknown, keyed: Set<unknown>): unknown {
  if (!isObject(message) || message.method !== undefined || !keyed.delete(message.id)) return message;
  const result = message.result;
  if (!isObject(result) || result.isError !== true || !isObject(result._meta)) return message;
  const info = result._meta[MetaKey.error] as Partial<IdempotencyErrorInfo> | undefined;
  if (typeof info?.code !== "string" || typeof info.idempotency_key !== "string") return message;
  const text = Array.isArray(result.content) ? result.content.find(isObject)?.text : undefined;
  const error = keyRefusal(
    info.code,
    typeof text === "string" ? text : info.code,
    info.idempotency_key,
    info.retry_after_ms,
  );
  return error === undefined ? message : { jsonrpc: "2.0", id: message.id, error };
}
