import type { Tool } from "ai";

/**
 * What the AI SDK hands a tool's `execute` besides its input: `toolCallId`, `messages`, `abortSignal`, and
 * the tool's context (`context` on AI SDK 7, from `toolsContext`; `experimental_context` on AI SDK 6).
 * Read off `Tool` rather than named, so one declaration fits both majors: the SDK's own
 * `ToolExecutionOptions` takes a type parameter on 7 and none on 6.
 */
export type ToolExecutionOptions = Parameters<NonNullable<Tool["execute"]>>[1];
