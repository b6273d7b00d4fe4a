/**
 * The MCP types this entry speaks in, written against what both MCP SDKs share: a user of the 1.x SDK
 * (`@modelcontextprotocol/sdk`) or of the 2.x one (`@modelcontextprotocol/server`) compiles against these
 * without the other installed, and a client (`idempotool/mcp-client`) without zod. What differs between the
 * SDKs (the request context a tool gets) is read off the user's own server type.
 */
/** One content block of a result: `{ type: "text", text }`, an image, a resource link, … */
export interface ContentBlock {
  type: string;
  [field: string]: unknown;
}

/**
 * A tool's result as MCP carries it (`CallToolResult`): content blocks for the model, optional structured
 * content, `isError`, `_meta`.
 */
export interface ToolResult {
  content: ContentBlock[];
  structuredContent?: Record<string, unknown> | undefined;
  isError?: boolean | undefined;
  _meta?: Record<string, unknown> | undefined;
  [field: string]: unknown;
}

/**
 * A multi-round-trip answer (MCP 2026-07-28): the tool asks the client for input (an elicitation, a sampling
 * request, …) and the client sends the same call again with the answers. `inputRequired(…)` from
 * `@modelcontextprotocol/server` builds one.
 */
export interface InputRequiredResult {
  resultType: "input_required";
  inputRequests?: Record<string, unknown> | undefined;
  requestState?: string | undefined;
  [field: string]: unknown;
}

/** The part of an `McpServer` we use; the 1.x SDK's `McpServer` and the 2.x SDK's both fit. */
export interface McpServerLike {
  // Each SDK declares its own overloads and callback types: any here lets either server in, and the
  // types a tool sees are read back off the user's server below.
  // biome-ignore lint/suspicious/noExplicitAny: the SDKs' own signatures are checked by inference below.
  registerTool(name: string, config: any, callback: any): unknown;
}

type ToolCallbackOf<Server> = Server extends {
  registerTool(name: string, config: infer _Config, callback: infer Callback): unknown;
}
  ? Callback
  : never;

/**
 * What the server hands a tool beside its arguments: the 1.x SDK's `extra` (`RequestHandlerExtra`: `signal`,
 * `authInfo`, `_meta`, …) or the 2.x SDK's `ctx` (`ServerContext`: `ctx.mcpReq.signal`, `ctx.mcpReq._meta`,
 * `ctx.mcpReq.inputResponses`, `ctx.http?.authInfo`, …).
 */
export type ToolExtraOf<Server> =
  ToolCallbackOf<Server> extends (args: infer _Args, extra: infer Extra) => unknown ? Extra : never;

/** What `registerTool` hands back on this server (`RegisteredTool`). */
export type RegisteredToolOf<Server> = Server extends {
  registerTool(name: string, config: infer _Config, callback: infer _Callback): infer Registered;
}
  ? Registered
  : never;

/**
 * The fields of a request's context that this entry reads, in either SDK's spelling: 1.x puts `_meta` and
 * `authInfo` on `extra`; 2.x puts `_meta` under `ctx.mcpReq` and `authInfo` under `ctx.http`.
 */
export interface RequestContextFields {
  readonly _meta?: unknown;
  readonly authInfo?: { readonly clientId?: string | undefined } | undefined;
  readonly mcpReq?: { readonly _meta?: unknown } | undefined;
  readonly http?: { readonly authInfo?: { readonly clientId?: string | undefined } | undefined } | undefined;
}

/** The request's `_meta`, wherever the SDK put it. */
export function requestMeta(extra: RequestContextFields): unknown {
  return isObject(extra.mcpReq) ? extra.mcpReq._meta : extra._meta;
}

/** The request's authentication, wherever the SDK put it; undefined when it has none. */
export function authenticatedClient(
  extra: RequestContextFields,
): { readonly clientId?: string | undefined } | undefined {
  const auth = extra.authInfo ?? extra.http?.authInfo;
  return typeof auth === "object" && auth !== null ? auth : undefined;
}

/** True for an input-required answer: a question to the client, not an outcome. */
export function isInputRequired(value: unknown): value is InputRequiredResult {
  return isObject(value) && value.resultType === "input_required";
}

/** A JSON object: not null, not an array. */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
