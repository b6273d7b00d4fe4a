/**
 * Tool definitions as the model providers and MCP write them, read into one shape. The format of each
 * entry is recognised from its fields, so one file may mix them.
 */
import { IdempotencyError } from "../core/errors.js";

/** The dialects `auditTools` reads. */
export const ToolFormat = {
  /** OpenAI Chat Completions: `{ type: "function", function: { name, description, parameters } }`. */
  openaiChat: "openai-chat",
  /** OpenAI Responses: `{ type: "function", name, description, parameters }`. */
  openaiResponses: "openai-responses",
  /** OpenAI's legacy `functions: [{ name, description, parameters }]`. */
  openaiFunction: "openai-function",
  /** Anthropic Messages: `{ name, description, input_schema }`. */
  anthropic: "anthropic",
  /** MCP `tools/list`: `{ name, description, inputSchema, annotations }`. */
  mcp: "mcp",
} as const;
export type ToolFormat = (typeof ToolFormat)[keyof typeof ToolFormat];

/** MCP's behaviour hints (all optional; MCP's defaults: readOnly false, destructive true, idempotent false). */
export interface ToolAnnotations {
  readonly title?: string;
  readonly readOnlyHint?: boolean;
  readonly destructiveHint?: boolean;
  readonly idempotentHint?: boolean;
  readonly openWorldHint?: boolean;
}

/** A JSON Schema, as far as audit reads one. */
export interface JsonSchema {
  readonly type?: string | readonly string[];
  readonly description?: string;
  readonly properties?: Readonly<Record<string, JsonSchema>>;
  readonly required?: readonly string[];
  readonly allOf?: readonly JsonSchema[];
  readonly $ref?: string;
  readonly [keyword: string]: unknown;
}

/** One tool, whatever format it came in. */
export interface ToolDefinition {
  readonly name: string;
  /** Empty when the definition has none. */
  readonly description: string;
  /** The arguments' JSON Schema, when the definition has one. */
  readonly inputSchema: JsonSchema | undefined;
  readonly annotations: ToolAnnotations | undefined;
  readonly format: ToolFormat;
}

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * Read tool definitions from any shape a tool list is kept in: an array of tools; `{ tools: [...] }`
 * (an MCP `tools/list` result, or an OpenAI or Anthropic request body); a JSON-RPC response
 * `{ result: { tools } }`; OpenAI's legacy `{ functions: [...] }`; or one tool on its own.
 * Throws an `invalid_arguments` IdempotencyError naming the entry it cannot read.
 * @example
 * import { readToolDefinitions } from "./tool-definition.js";
 *
 * const [tool] = readToolDefinitions({ tools: [{ name: "send_email", inputSchema: { type: "object" } }] });
 * // tool.format === "mcp"
 */
export function readToolDefinitions(input: unknown): ToolDefinition[] {
  const { entries, path } = toolEntries(input);
  return entries.map((entry, index) => readTool(entry, `${path}[${index}]`));
}

function toolEntries(input: unknown): { entries: readonly unknown[]; path: string } {
  if (Array.isArray(input)) return { entries: input, path: "tools" };
  if (isObject(input)) {
    if (Array.isArray(input.tools)) return { entries: input.tools, path: "tools" };
    if (isObject(input.result) && Array.isArray(input.result.tools)) {
      return { entries: input.result.tools, path: "result.tools" };
    }
    if (Array.isArray(input.functions)) return { entries: input.functions, path: "functions" };
    if (typeof input.name === "string" || isObject(input.function)) return { entries: [input], path: "tool" };
  }
  throw unreadable(
    "the input is not a tool list: expected an array of tools, { tools: [...] } (MCP tools/list, an OpenAI or " +
      "Anthropic request), { result: { tools } }, { functions: [...] } or a single tool",
  );
}

function readTool(entry: unknown, path: string): ToolDefinition {
  if (!isObject(entry)) throw unreadable(`${path} is not an object`);
  if (isObject(entry.function)) {
    const fn = entry.function;
    return tool(path, ToolFormat.openaiChat, fn.name, fn.description, fn.parameters, undefined);
  }
  if (entry.type === "function") {
    return tool(path, ToolFormat.openaiResponses, entry.name, entry.description, entry.parameters, undefined);
  }
  if ("input_schema" in entry) {
    return tool(path, ToolFormat.anthropic, entry.name, entry.description, entry.input_schema, undefined);
  }
  if ("inputSchema" in entry || "annotations" in entry) {
    return tool(path, ToolFormat.mcp, entry.name, entry.description, entry.inputSchema, entry.annotations);
  }
  if ("parameters" in entry) {
    return tool(path, ToolFormat.openaiFunction, entry.name, entry.description, entry.parameters, undefined);
  }
  throw unreadable(
    `${path} is not an OpenAI, Anthropic or MCP tool definition (it has none of function, parameters, ` +
      "input_schema or inputSchema)",
  );
}

function tool(
  path: string,
  format: ToolFormat,
  name: unknown,
  description: unknown,
  schema: unknown,
  annotations: unknown,
): ToolDefinition {
  if (typeof name !== "string" || name.length === 0) throw unreadable(`${path} has no name`);
  if (description !== undefined && description !== null && typeof description !== "string") {
    throw unreadable(`${path} (${name}): description must be a string`);
  }
  if (schema !== undefined && schema !== null && !isObject(schema)) {
    throw unreadable(`${path} (${name}): its input schema must be an object`);
  }
  if (annotations !== undefined && annotations !== null && !isObject(annotations)) {
    throw unreadable(`${path} (${name}): annotations must be an object`);
  }
  return {
    name,
    description: typeof description === "string" ? description : "",
    inputSchema: isObject(schema) ? (schema as JsonSchema) : undefined,
    annotations: isObject(annotations) ? readAnnotations(annotations) : undefined,
    format,
  };
}

function readAnnotations(raw: Json): ToolAnnotations {
  const hints: { -readonly [K in keyof ToolAnnotations]: ToolAnnotations[K] } = {};
  if (typeof raw.title === "string") hints.title = raw.title;
  for (const hint of ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] as const) {
    if (typeof raw[hint] === "boolean") hints[hint] = raw[hint];
  }
  return hints;
}

/** The definitions are data the caller read from somewhere, not options: `invalid_arguments`. */
function unreadable(problem: string): IdempotencyError {
  return new IdempotencyError("invalid_arguments", `Cannot read the tool definitions: ${problem}.`);
}
