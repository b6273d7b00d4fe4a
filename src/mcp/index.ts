/**
 * `idempotool/mcp`: side-effectful MCP tools that are safe to call twice (OP-7 in docs/operation-models.md).
 * A tool registered with `registerIdempotentTool` requires an `idempotency_key` whose description states the
 * dedup window, dedupes through an idempotency store, and tells the model when a result is a replay and what
 * to do on a conflict, a call in flight or an unknown outcome.
 *
 * The MCP SDK (1.x `@modelcontextprotocol/sdk` or 2.x `@modelcontextprotocol/server`) and zod are the
 * user's: this entry imports neither at runtime, and its types need only the one the user has.
 * @module
 */
export {
  type ExecuteAnswer,
  type IdempotentExecuteOptions,
  idempotentExecute,
} from "./idempotent-execute.js";
export { keyDescription } from "./key-description.js";
export type {
  ContentBlock,
  InputRequiredResult,
  McpServerLike,
  RegisteredToolOf,
  RequestContextFields,
  ToolExtraOf,
  ToolResult,
} from "./mcp-types.js";
export { acceptParamsKey, type McpTransportLike } from "./params-key.js";
export type { QuestionBinding, QuestionSeal, SealedQuestion } from "./question-seal.js";
export {
  type IdempotentToolConfig,
  type IdempotentToolHandler,
  type IdempotentToolOptions,
  type KeyArgument,
  type KeyFrom,
  keyField,
  registerIdempotentTool,
} from "./register-idempotent-tool.js";
export { type IdempotencyErrorInfo, type IdempotencyInfo, MetaKey, structuredField } from "./tool-results.js";
export type {
  AnySchema,
  ArgsOf,
  ObjectSchema,
  RawShape,
  ToolSchema,
  ZodNamespace,
  ZodObjectBuilder,
  ZodStringBuilder,
} from "./zod-namespace.js";
