/**
 * Approvals in workflow steps, bound to (key, fingerprint): a step suspends with the request, the reviewer
 * resumes with `approve(request)`, and the re-run of the step runs the call only if its arguments are the
 * approved ones.
 * @module
 */

import { type Clock, systemClock } from "../core/clock.js";
import { fingerprint } from "../core/fingerprint.js";
import type { Envelope, IdempotentTool } from "../core/idempotent.js";
import { validateKey } from "../core/keys.js";
import { iso } from "../core/time.js";
import { type ApprovalRequest, requestType } from "../tool-calls/approval-decision.js";
import { type RunApprovedOptions, requireToolName, runApprovedCall } from "../tool-calls/approved-call.js";

/**
 * The request a step suspends with to ask a human to approve `tool(args)` under `key`: its key and the
 * fingerprint of its arguments go into the run's snapshot with it. Resume with `approve(request)`
 * (from `idempotool/langgraph`).
 * @throws IdempotencyError `invalid_options` when `tool` is not wrapped by `idempotent()`; `invalid_arguments`
 *   for a key that is not one.
 * @example
 * import { idempotent, memoryStore } from "idempotool";
 * import { approvalRequest, keyFromStep } from "idempotool/mastra";
 *
 * const sendEmail = idempotent(async (args: { to: string }) => ({ id: `m-${args.to}` }), {
 *   name: "send_email",
 *   store: memoryStore(),
 * });
 * declare const params: { runId: string; workflowId: string; suspend(payload: unknown): Promise<void> };
 * const args = { to: "alice@example.com" };
 * await params.suspend(approvalRequest(sendEmail, args, { key: keyFromStep(params, "send_email") }));
 */
export function approvalRequest<A>(
  tool: { readonly toolName: string },
  args: A,
  options: { readonly key: string; readonly clock?: Clock | undefined },
): ApprovalRequest<A> {
  const toolName = requireToolName(tool, "approvalRequest");
  return {
    type: requestType,
    tool: toolName,
    key: validateKey(options?.key, toolName),
    fingerprint: fingerprint(args, { path: "args" }),
    args,
    requested_at: iso((options.clock ?? systemClock).now()),
  };
}

/**
 * Run `tool(args)` under the reviewer's decision (the step's `resumeData`), after checking that it
 * approves this key and exactly these arguments. The step re-runs from the top on resume and computes
 * its arguments again: if they are not the ones the human saw, nothing runs.
 *
 * The call runs under the approved key through the idempotency store, so a second resume of the same
 * snapshot (a retry after a crash) gets the first outcome back.
 * @throws ApprovalMismatchError (`idempotency_key_conflict`, 422) when the arguments or `options.key`
 *   differ from the approved ones; nothing runs.
 * @throws IdempotencyError `invalid_arguments` when `decision` is not an approval (a rejection, or a bare
 *   `{ approved: true }` that names no key and fingerprint).
 * @example
 * import { idempotent, memoryStore } from "idempotool";
 * import { keyFromStep, runApproved } from "idempotool/mastra";
 *
 * const sendEmail = idempotent(async (args: { to: string }) => ({ id: `m-${args.to}` }), {
 *   name: "send_email",
 *   store: memoryStore(),
 * });
 * declare const params: { runId: string; workflowId: string; resumeData?: unknown };
 * const sent = await runApproved(sendEmail, { to: "alice@example.com" }, params.resumeData, {
 *   key: keyFromStep(params, "send_email"),
 * });
 */
export async function runApproved<A, R>(
  tool: IdempotentTool<A, R>,
  args: A,
  decision: unknown,
  options: RunApprovedOptions = {},
): Promise<Envelope<Awaited<R>>> {
  return runApprovedCall(tool, args, decision as never, options, howToResume);
}

const howToResume =
  "run.resume({ step, resumeData: approve(request) }), where request is the step's suspend payload";
