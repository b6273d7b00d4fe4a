/**
 * Where an approval given through `approve()` is kept: in the run's own context, which a `RunState`
 * serializes, so it reaches the process that resumes the run.
 * @module
 */
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import {
  type ApprovalBinding,
  approvalIn,
  approvalsName,
  withApproval,
} from "../tool-calls/call-approval.js";

/** The approval bound to `callId` in a run's context, if any. */
export function approvalOf(context: unknown, callId: string): ApprovalBinding | undefined {
  if (typeof context !== "object" || context === null) return undefined;
  return approvalIn((context as Record<string, unknown>)[approvalsName], callId);
}

/**
 * Record an approval for `callId` in a run's context.
 * @throws IdempotencyError `invalid_options` when the run's context is not an object.
 */
export function bindApproval(context: unknown, callId: string, binding: ApprovalBinding): void {
  if (typeof context !== "object" || context === null || Array.isArray(context)) {
    throw new IdempotencyError(
      ErrorCode.invalidOptions,
      `approve(${binding.tool}): the run's context must be an object (or left out) to carry the approval; ` +
        `it is kept there as ${approvalsName}, so that a RunState saved as a string carries it too.`,
    );
  }
  const record = context as Record<string, unknown>;
  record[approvalsName] = withApproval(record[approvalsName], callId, binding);
}

/** Remove the approval bound to `callId` from a run's context, once the approved call has run. */
export function forgetApproval(context: unknown, callId: string): void {
  if (typeof context !== "object" || context === null) return;
  const approvals = (context as Record<string, unknown>)[approvalsName];
  if (typeof approvals !== "object" || approvals === null || !Object.hasOwn(approvals, callId)) return;
  const { [callId]: _used, ...rest } = approvals as Record<string, unknown>;
  (context as Record<string, unknown>)[approvalsName] = rest;
}

/**
 * The arguments of a function call as the model wrote them (a JSON string), parsed.
 * @throws IdempotencyError `invalid_arguments` when they are not JSON.
 */
export function argumentsOfCall(json: string, tool: string): unknown {
  try {
    return JSON.parse(json) as unknown;
  } catch (error) {
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      `${tool}: the call's arguments are not JSON, so no approval can name them.`,
      { cause: error },
    );
  }
}
