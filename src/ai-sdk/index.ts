/**
 * `idempotool/ai-sdk`: Vercel AI SDK tools (`ai` 6) that run once per intent per turn.
 *
 * Within one `generateText`/`streamText` call a model repeats itself: the same tool call twice in one
 * step (executed concurrently, each with its own `toolCallId`) or again in a later step. A wrapped tool
 * keys each call by intent, `intentKey(turnId, tool, intent fields)`, with the turn read from the
 * conversation, so the repeats get the first call's outcome (`was_replay: true`) and the effect happens
 * once. A new user message is a new turn and runs again (Case 2 in docs/operation-models.md).
 *
 * Only types are imported from `ai`: this entry loads no part of the AI SDK at runtime. The helpers every
 * agent integration shares are exported once: `ToolCallError`, `OutputMode` and `intentKey` from
 * `idempotool/loops`; the output types (`EnvelopeOutput`, `MergedOutput`, …) from `idempotool`.
 * @example
 * import { generateText, stepCountIs, tool } from "ai";
 * import { z } from "zod";
 * import { sqliteStore } from "idempotool/sqlite";
 * import { idempotentTools } from "idempotool/ai-sdk";
 *
 * const tools = idempotentTools(
 *   {
 *     send_email: tool({
 *       description: "Send an email",
 *       inputSchema: z.object({ to: z.string(), subject: z.string(), body: z.string() }),
 *       execute: async ({ to }) => ({ messageId: `m-${to}` }),
 *     }),
 *   },
 *   { store: sqliteStore({ path: "idempotool.db" }), scope: "user-42", perTool: { send_email: { intentFields: ["to", "subject"] } } },
 * );
 * declare const model: Parameters<typeof generateText>[0]["model"];
 * await generateText({ model, tools, stopWhen: stepCountIs(5), prompt: "Send Alice the summary" });
 * @module
 */

export type { IdempotentToolOptions } from "./idempotent-tool.js";
export { idempotentTool, toolContextOf } from "./idempotent-tool.js";
export type { IdempotentToolSet, IdempotentToolsOptions, PerToolOptions } from "./idempotent-tools.js";
export { idempotentTools } from "./idempotent-tools.js";
export { turnIdFromMessages } from "./turn-id.js";
