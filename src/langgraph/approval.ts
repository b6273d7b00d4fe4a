/**
 * The node's side of an approval, bound to (key, fingerprint) (docs/integrations/langgraph.md, "Approvals"):
 * an approval given at `interrupt()` covers exactly the arguments it was shown, under exactly one key.
 * @module
 */

import { type Clock, systemClock } from "../core/clock.js";
import { fingerprint } from "../core/fingerprint.js";
import type { Envelope, IdempotentTool } from "../core/idempotent.js";
import { validateKey } from "../core/keys.js";
import { invalidOption } from "../core/option-checks.js";
import { iso } from "../core/time.js";
import {
  type ApprovalDecision,
  type ApprovalRequest,
  type ApprovedDecision,
  readDecision,
  requestType,
} from "../tool-calls/approval-decision.js";
import {
  checkBinding,
  type RunApprovedOptions,
  requireToolName,
  runApprovedCall,
} from "../tool-calls/approved-call.js";

export type { RunApprovedOptions };

/** The `interrupt` a node calls: LangGraph's own (`import { interrupt } from "@langchain/langgraph"`) or `config.interrupt`. */
export type Interrupt<A> = (request: ApprovalRequest<A>) => unknown;

/** Options of {@link requestApproval}. */
export interface RequestApprovalOptions<A> {
  /** The key the approved call will run under: from `keyFromState` or `keyFromCheckpoint`. */
  readonly key: string;
  /** LangGraph's `interrupt`, passed in so this entry never imports LangGraph. */
  readonly interrupt: Interrupt<A>;
  /** Reported by an {@link ApprovalMismatchError}. Default "default". */
  readonly scope?: string | undefined;
  /** Stamps `requested_at`. Default the system clock. */
  readonly clock?: Clock | undefined;
}

/**
 * Ask a human to approve `tool(args)` under `key`, pausing the graph with `interrupt()`, and return
 * their decision once the graph is resumed.
 *
 * The interrupt's value is an {@link ApprovalRequest} carrying `key` and `fingerprint(args)`; the
 * reviewer resumes with `approve(request)` (or `reject(request)`), which echoes both back. LangGraph
 * re-runs the node from the top on resume, so the arguments are computed again, and `interrupt()` hands
 * back the decision without comparing anything. This does the comparing: if the re-run's arguments or
 * key differ from the approved ones (the model rewrote the draft), it throws instead of returning an
 * approval for something nobody saw.
 *
 * A `GraphInterrupt` thrown by `interrupt()` passes through untouched.
 *
 * @throws ApprovalMismatchError (`idempotency_key_conflict`, 422) when the approval names other arguments or another key.
 * @throws IdempotencyError `invalid_arguments` when the resume value is not an approval decision: a bare
 *   `true` cannot say which arguments it approves.
 * @example
 * import { interrupt } from "@langchain/langgraph";
 * import { idempotent, memoryStore } from "idempotool";
 * import { keyFromState, requestApproval, runApproved } from "idempotool/langgraph";
 *
 * const sendEmail = idempotent(async (args: { to: string; body: string }) => ({ id: `m-${args.to}` }), {
 *   name: "send_email",
 *   store: memoryStore(),
 * });
 * const reviewAndSend = async (state: { to: string; draft: string; send_email_idempotency_key: string }) => {
 *   const args = { to: state.to, body: state.draft };
 *   const decision = requestApproval(sendEmail, args, { key: keyFromState(state, "send_email"), interrupt });
 *   if (!decision.approved) return { status: "rejected" };
 *   const sent = await runApproved(sendEmail, args, decision);
 *   return { status: "sent", messageId: sent.result.id };
 * };
 */
export function requestApproval<A>(
  tool: { readonly toolName: string },
  args: A,
  options: RequestApprovalOptions<A>,
): ApprovalDecision {
  const toolName = requireToolName(tool, "requestApproval");
  const key = validateKey(options?.key, toolName);
  if (typeof options?.interrupt !== "function") {
    invalidOption(`requestApproval(${toolName})`, "interrupt", "must be LangGraph's interrupt function");
  }
  const print = fingerprint(args, { path: "args" });
  const request: ApprovalRequest<A> = {
    type: requestType,
    tool: toolName,
    key,
    fingerprint: print,
    args,
    requested_at: iso((options.clock ?? systemClock).now()),
  };
  // First pass: throws GraphInterrupt, which must reach LangGraph. On resume: the reviewer's answer.
  const decision = readDecision(options.interrupt(request), toolName);
  if (decision.approved) checkBinding(decision, toolName, key, print, options.scope);
  return decision;
}

/**
 * Run `tool(args)` under an approval, after checking that the approval names this key and exactly these
 * arguments. The tool runs with the approved key, through the idempotency store, so a re-run after the
 * effect replays it.
 *
 * Call it in the node that asked (right after {@link requestApproval}), or in a downstream node with the
 * decision kept in state: the check runs again there, so arguments edited between the two never run.
 *
 * @throws ApprovalMismatchError (`idempotency_key_conflict`, 422) when the arguments or `options.key`
 *   differ from the approved ones; nothing runs.
 * @throws IdempotencyError `invalid_arguments` when `decision` is not an approval.
 * @example
 * import { idempotent, memoryStore } from "idempotool";
 * import { type ApprovalDecision, runApproved } from "idempotool/langgraph";
 *
 * const sendEmail = idempotent(async (args: { to: string; body: string }) => ({ id: `m-${args.to}` }), {
 *   name: "send_email",
 *   store: memoryStore(),
 * });
 * // A downstream node; the review node stored the decision in state.
 * const sendNode = async (state: { to: string; draft: string; approval: ApprovalDecision }) => {
 *   if (!state.approval.approved) return { status: "rejected" };
 *   const sent = await runApproved(sendEmail, { to: state.to, body: state.draft }, state.approval);
 *   return { status: "sent", messageId: sent.result.id };
 * };
 */
export async function runApproved<A, R>(
  tool: IdempotentTool<A, R>,
  args: A,
  decision: ApprovedDecision,
  options: RunApprovedOptions = {},
): Promise<Envelope<Awaited<R>>> {
  return runApprovedCall(tool, args, decision, options, howToResume);
}

const howToResume =
  "new Command({ resume: approve(request) }) or reject(request), where request is the interrupt's value";
