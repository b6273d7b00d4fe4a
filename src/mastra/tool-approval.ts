/**
 * Approvals of agent tool calls (`requireApproval`) bound to (key, fingerprint): the approval covers
 * exactly the call a human was shown, under exactly one key, in this process or in the one that resumes
 * the suspended run from storage.
 * @module
 */
import type { ToolExecutionContext } from "@mastra/core/tools";
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import { fingerprint } from "../core/fingerprint.js";
import { iso } from "../core/time.js";
import { requestType } from "../tool-calls/approval-decision.js";
import { bindApproval, type RequestContextLike } from "./approval-binding.js";
import { keyPolicyOf } from "./idempotent-tool.js";

/** The part of a suspended agent run (what `generate()` returns with `finishReason: "suspended"`) we read. */
export interface SuspendedToolCall {
  readonly runId?: string | undefined;
  readonly suspendPayload?: unknown;
}

/** What to show the human for an agent's tool call: the call, its arguments, and the key and fingerprint an approval binds. */
export interface ToolApprovalRequest<A = unknown> {
  readonly type: typeof requestType;
  /** The tool's name in keys and records. */
  readonly tool: string;
  /** The agent run that waits; pass it to `approveToolCall({ runId })`. */
  readonly run_id: string;
  /** The id of the call waiting for approval; pass it to `approveToolCall({ toolCallId })`. */
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
 * The approval request for an agent run suspended on a call of a tool made with `idempotentTool` and
 * `requireApproval`: what to show the human, with the key the call will run under and the fingerprint
 * of its arguments.
 *
 * Pass the same `requestContext` (if any) that the run was started with, so that a `turnId` or `scope`
 * read from it gives the key the call will have.
 * @throws IdempotencyError `invalid_options` when `toolOptions` were not made by `idempotentTool`, or the
 *   run is not suspended on a call of that tool.
 * @example
 * import { Agent } from "@mastra/core/agent";
 * import { RequestContext } from "@mastra/core/request-context";
 * import { bindToolApproval, toolApprovalRequest } from "idempotool/mastra";
 *
 * declare const agent: Agent;
 * declare const sendEmailOptions: object; // what idempotentTool() returned, passed to createTool()
 * const output = await agent.generate("Email Alice the summary");
 * if (output.finishReason === "suspended") {
 *   const request = toolApprovalRequest(sendEmailOptions, output);
 *   // Show request.args to a human; on "yes":
 *   const requestContext = bindToolApproval(new RequestContext(), request);
 *   await agent.approveToolCallGenerate({ runId: request.run_id, toolCallId: request.call_id, requestContext });
 * }
 */
export function toolApprovalRequest(
  toolOptions: object,
  suspended: SuspendedToolCall,
  options: { readonly requestContext?: RequestContextLike | undefined } = {},
): ToolApprovalRequest {
  const policy = keyPolicyOf(toolOptions);
  if (policy === undefined) {
    throw new IdempotencyError(
      ErrorCode.invalidOptions,
      "toolApprovalRequest(): the first argument must be the options made by idempotentTool() (the ones passed to createTool()).",
    );
  }
  const payload = (suspended?.suspendPayload ?? {}) as {
    toolCallId?: unknown;
    toolName?: unknown;
    args?: unknown;
  };
  const runId = suspended?.runId;
  if (
    typeof runId !== "string" ||
    typeof payload.toolCallId !== "string" ||
    (payload.toolName !== policy.id && payload.toolName !== policy.tool) ||
    !("args" in payload)
  ) {
    throw new IdempotencyError(
      ErrorCode.invalidOptions,
      `${policy.tool}: the run is not suspended on a call of ${policy.id}; pass the output of a run whose ` +
        'finishReason is "suspended", together with the options of its own tool.',
    );
  }
  const context = {
    runId,
    requestContext: options.requestContext ?? emptyRequestContext,
    agent: { toolCallId: payload.toolCallId },
  } as unknown as ToolExecutionContext;
  return {
    type: requestType,
    tool: policy.tool,
    run_id: runId,
    call_id: payload.toolCallId,
    key: policy.keyOf(payload.args, context),
    scope: policy.scopeOf(context),
    fingerprint: fingerprint(payload.args, { path: "args" }),
    args: payload.args,
    requested_at: iso(policy.clock.now()),
  };
}

/**
 * Record in `requestContext` that a human approved `request`, and return it: pass it to
 * `approveToolCall()` or `approveToolCallGenerate()`. When the run resumes, here or in another process,
 * the call runs under the approved key, once, and only if its arguments are the approved ones; other
 * arguments make the call throw an `ApprovalMismatchError`, and nothing runs.
 * @throws IdempotencyError `invalid_arguments` when `request` was not made by `toolApprovalRequest`;
 *   `invalid_options` when `requestContext` is not a `RequestContext`.
 * @example
 * import { RequestContext } from "@mastra/core/request-context";
 * import { bindToolApproval, type ToolApprovalRequest } from "idempotool/mastra";
 *
 * declare const request: ToolApprovalRequest; // shown to the reviewer, who said yes
 * const requestContext = bindToolApproval(new RequestContext(), request);
 * // await agent.approveToolCallGenerate({ runId: request.run_id, toolCallId: request.call_id, requestContext });
 */
export function bindToolApproval<C extends RequestContextLike>(
  requestContext: C,
  request: ToolApprovalRequest,
): C {
  if (
    request?.type !== requestType ||
    typeof request.call_id !== "string" ||
    typeof request.key !== "string" ||
    typeof request.fingerprint !== "string"
  ) {
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      "bindToolApproval(): the second argument must be the request made by toolApprovalRequest(): an approval " +
        "must name the key and fingerprint it approves.",
    );
  }
  bindApproval(requestContext, request.call_id, {
    tool: request.tool,
    key: request.key,
    fingerprint: request.fingerprint,
    requested_at: request.requested_at,
  });
  return requestContext;
}

const emptyRequestContext: RequestContextLike = {
  get: () => undefined,
  set: () => {},
};
