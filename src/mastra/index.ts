/**
 * `idempotool/mastra`: Mastra (`@mastra/core`) tools that run once per intent per run, workflow steps whose
 * effects survive `suspend()` and `resume()`, and human approvals bound to (key, fingerprint).
 *
 * - Agent tools: pass a tool's options through `idempotentTool` before `createTool()`. Each call is keyed
 *   by intent, `intentKey(runId, tool, intent fields)`: the same call twice in one response, or again in a
 *   later step, runs once; a new run (the user's next message) runs again.
 * - Workflow steps: Mastra runs a step's `execute` from the top again on resume. Wrap the step with
 *   `idempotentStep` and run each effect through `idempotent()` under `keyFromStep(params, name)`:
 *   the re-run replays the first outcome.
 * - Approvals: `toolApprovalRequest` and `bindToolApproval` for a tool with `requireApproval`;
 *   `approvalRequest` and `runApproved` for a step that suspends for a human, who resumes it with
 *   `approve` or `reject` from `idempotool/langgraph`.
 *
 * The helpers every agent integration shares are exported once: `ToolCallError`, `OutputMode` and
 * `intentKey` from `idempotool/loops`; `ApprovalMismatchError` and the output types from `idempotool`.
 *
 * Only types are imported from `@mastra/core`: this entry loads no part of Mastra at runtime.
 * @example
 * import { Agent } from "@mastra/core/agent";
 * import { createTool } from "@mastra/core/tools";
 * import { z } from "zod";
 * import { sqliteStore } from "idempotool/sqlite";
 * import { idempotentTool } from "idempotool/mastra";
 *
 * const sendEmail = createTool(
 *   idempotentTool(
 *     {
 *       id: "send_email",
 *       description: "Send an email",
 *       inputSchema: z.object({ to: z.string(), subject: z.string(), body: z.string() }),
 *       execute: async ({ to }) => ({ messageId: `m-${to}` }),
 *     },
 *     { store: sqliteStore({ path: "idempotool.db" }), scope: "user-42", intentFields: ["to", "subject"] },
 *   ),
 * );
 * declare const model: ConstructorParameters<typeof Agent>[0]["model"];
 * const agent = new Agent({ id: "mailer", name: "mailer", instructions: "Help.", model, tools: { sendEmail } });
 * await agent.generate("Send Alice the summary");
 * @module
 */

export type { RequestContextLike } from "./approval-binding.js";
export type { IdempotentToolOptions, InputOf, MastraToolOptions } from "./idempotent-tool.js";
export { idempotentTool, toolContextOf } from "./idempotent-tool.js";
export type { MastraStep, StepParams } from "./step.js";
export { idempotentStep, keyFromStep } from "./step.js";
export { approvalRequest, runApproved } from "./step-approval.js";
export type { SuspendedToolCall, ToolApprovalRequest } from "./tool-approval.js";
export { bindToolApproval, toolApprovalRequest } from "./tool-approval.js";
