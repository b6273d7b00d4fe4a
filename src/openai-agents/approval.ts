/**
 * Human approvals bound to (key, fingerprint): an approval covers exactly the call a human was shown,
 * under exactly one key, in this process or in the one that resumes the saved run.
 * @module
 */
import type { RunContext } from "@openai/agents";
import { ApprovalMismatchError, ErrorCode, IdempotencyError } from "../core/errors.js";
import { fingerprint } from "../core/fingerprint.js";
import { iso } from "../core/time.js";
import { argumentsOfCall, bindApproval } from "./approval-binding.js";
import { type AgentToolCall, keyPolicyOf } from "./idempotent-tool.js";

/** The part of a `RunState` the approval helpers use. */
export interface ApprovableState {
  readonly _context: RunContext<unknown>;
  approve(item: never): void;
}

/** The part of an interruption (`RunToolApprovalItem`) the approval helpers read. */
export interface ApprovalItem {
  readonly rawItem: unknown;
}

/** What to show the human: the call, its arguments, and the key and fingerprint an approval binds. */
export interface ApprovalRequest<A = unknown> {
  readonly type: "idempotool.approval_request";
  /** The tool's name in keys and records. */
  readonly tool: string;
  /** The name the model called the tool by (the same unless `idempotentTool` was given another `name`). */
  readonly call_name: string;
  /** The SDK's id of the call waiting for approval. */
  readonly call_id: string;
  /** The key the approved call runs under. */
  readonly key: string;
  readonly scope: string;
  /** `fingerprint(args)`: the approval covers these arguments and no others. */
  readonly fingerprint: string;
  /** The arguments as the model wrote them. */
  readonly args: A;
  /** When the request was made (ISO-8601). */
  readonly requested_at: string;
}

/**
 * The approval request for an interruption of a tool made by `idempotentTool`: what to show the human,
 * with the key the call will run under and the fingerprint of its arguments.
 *
 * Two interruptions of one intent (the model emitted the same call twice) have the same key: show it once,
 * and approve both; the call runs once.
 * @throws IdempotencyError `invalid_options` when `toolOptions` were not made by `idempotentTool`, or the
 *   item is not a call of that tool; `invalid_arguments` when its arguments are not JSON.
 * @example
 * import { Agent, run, tool } from "@openai/agents";
 * import { z } from "zod";
 * import { memoryStore } from "idempotool";
 * import { approvalRequest, approve, idempotentTool } from "idempotool/openai-agents";
 *
 * const sendEmailOptions = idempotentTool(
 *   {
 *     name: "send_email",
 *     description: "Send an email",
 *     parameters: z.object({ to: z.string(), body: z.string() }),
 *     needsApproval: true,
 *     execute: async ({ to }) => ({ messageId: `m-${to}` }),
 *   },
 *   { store: memoryStore() },
 * );
 * const agent = new Agent({ name: "mailer", tools: [tool(sendEmailOptions)] });
 * const result = await run(agent, "Email Alice the summary");
 * for (const item of result.interruptions) {
 *   const request = approvalRequest(sendEmailOptions, result.state, item);
 *   // Show request.args to a human; on "yes":
 *   approve(result.state, item, request);
 * }
 */
export function approvalRequest(
  toolOptions: object,
  state: ApprovableState,
  item: ApprovalItem,
): ApprovalRequest {
  const policy = keyPolicyOf(toolOptions);
  if (policy === undefined) {
    throw new IdempotencyError(
      ErrorCode.invalidOptions,
      "approvalRequest(): the first argument must be the options made by idempotentTool() (the ones passed to tool()).",
    );
  }
  const call = callOf(item, policy.callName);
  const args = argumentsOfCall(call.arguments, policy.tool);
  return {
    type: "idempotool.approval_request",
    tool: policy.tool,
    call_name: call.name,
    call_id: call.callId,
    key: policy.keyOf(args, state._context, call),
    scope: policy.scopeOf(state._context),
    fingerprint: fingerprint(args, { path: "args" }),
    args,
    requested_at: iso(policy.clock.now()),
  };
}

/**
 * Approve an interruption as `request` showed it: check that the item is the call the request names,
 * with the same arguments, then record the approval in the run's context (a `RunState` saved with
 * `toString()` carries it) and approve the item in the SDK.
 *
 * When the run resumes, here or in another process, the call runs under the approved key, once: a
 * resumed run that is retried after the effect gets the first outcome back. If the call's arguments are
 * no longer the approved ones, the resumed run fails with an `ApprovalMismatchError` and nothing runs.
 * @throws ApprovalMismatchError when the item's arguments or call differ from the request's; nothing is approved.
 * @throws IdempotencyError `invalid_options` when the run's context is not an object.
 * @example
 * import type { RunState, RunToolApprovalItem } from "@openai/agents";
 * import { type ApprovalRequest, approve } from "idempotool/openai-agents";
 *
 * declare const state: RunState<unknown, never>;
 * declare const item: RunToolApprovalItem;
 * declare const request: ApprovalRequest; // shown to the reviewer, who said yes
 * approve(state, item, request);
 * // const resumed = await run(agent, state);
 */
export function approve(state: ApprovableState, item: ApprovalItem, request: ApprovalRequest): void {
  if (request?.type !== "idempotool.approval_request") {
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      "approve(): the third argument must be the request made by approvalRequest(): an approval must name the " +
        "key and fingerprint it approves.",
    );
  }
  const call = callOf(item, request.call_name);
  const print = fingerprint(argumentsOfCall(call.arguments, request.tool), { path: "args" });
  if (call.callId !== request.call_id || print !== request.fingerprint) {
    throw new ApprovalMismatchError({
      tool: request.tool,
      scope: request.scope,
      key: request.key,
      approvedKey: request.key,
      approvedFingerprint: request.fingerprint,
      fingerprint: print,
      requestedAt: request.requested_at,
    });
  }
  bindApproval(state._context.context, call.callId, {
    tool: request.tool,
    key: request.key,
    fingerprint: request.fingerprint,
    requested_at: request.requested_at,
  });
  state.approve(item as never);
}

/** The function call an interruption waits on, checked to be a call of `tool`. */
function callOf(item: ApprovalItem, tool: string): AgentToolCall {
  const raw = (typeof item === "object" && item !== null ? item.rawItem : undefined) as
    | Partial<AgentToolCall & { type: string }>
    | undefined;
  if (
    raw?.type !== "function_call" ||
    raw.name !== tool ||
    typeof raw.callId !== "string" ||
    typeof raw.arguments !== "string"
  ) {
    throw new IdempotencyError(
      ErrorCode.invalidOptions,
      `${tool}: the interruption is not a function call of ${tool}; pass the item from result.interruptions ` +
        "together with the options of its own tool.",
    );
  }
  return { callId: raw.callId, name: raw.name, arguments: raw.arguments };
}
