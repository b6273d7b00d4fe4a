/**
 * `idempotool/openai-agents`: OpenAI Agents SDK (`@openai/agents`) tools that run once per intent per run,
 * and human approvals bound to (key, fingerprint).
 *
 * A model repeats itself: the same function call twice in one response (the SDK runs both, each with its
 * own `callId`) or again in a later step. Pass a tool's options through `idempotentTool` before `tool()`:
 * each call is keyed by intent, `intentKey(turnId, tool, intent fields)`, so the repeats get the first
 * call's outcome (`was_replay: true`) and the effect happens once. A new run is a new turn and runs again.
 * An approval given with `approve(state, item, approvalRequest(...))` travels with the saved `RunState`
 * and lets exactly the approved call run, once.
 *
 * Only types are imported from `@openai/agents`: this entry loads no part of the SDK at runtime. The
 * helpers every agent integration shares are exported once: `ToolCallError`, `OutputMode` and `intentKey`
 * from `idempotool/loops`; `ApprovalMismatchError` and the output types from `idempotool`.
 * @example
 * import { Agent, run, tool } from "@openai/agents";
 * import { z } from "zod";
 * import { sqliteStore } from "idempotool/sqlite";
 * import { idempotentTool } from "idempotool/openai-agents";
 *
 * const sendEmail = tool(
 *   idempotentTool(
 *     {
 *       name: "send_email",
 *       description: "Send an email",
 *       parameters: z.object({ to: z.string(), subject: z.string(), body: z.string() }),
 *       execute: async ({ to }) => ({ messageId: `m-${to}` }),
 *     },
 *     { store: sqliteStore({ path: "idempotool.db" }), scope: "user-42", intentFields: ["to", "subject"] },
 *   ),
 * );
 * const agent = new Agent({ name: "mailer", tools: [sendEmail] });
 * await run(agent, "Send Alice the summary");
 * @module
 */

export type { ApprovableState, ApprovalItem, ApprovalRequest } from "./approval.js";
export { approvalRequest, approve } from "./approval.js";
export type { AgentToolCall, IdempotentToolOptions } from "./idempotent-tool.js";
export { idempotentTool, toolContextOf } from "./idempotent-tool.js";
