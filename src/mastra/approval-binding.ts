/**
 * Where an approval given through `bindToolApproval()` is kept: in the request context the application
 * passes to `approveToolCall()`/`approveToolCallGenerate()`, by tool call id.
 * @module
 */
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import {
  type ApprovalBinding,
  approvalIn,
  approvalsName,
  withApproval,
} from "../tool-calls/call-approval.js";

/** The part of Mastra's `RequestContext` the approvals use. */
export interface RequestContextLike {
  get(key: string): unknown;
  set(key: string, value: unknown): void;
}

/** The approval bound to `callId` in a request context, if any. */
export function approvalOf(requestContext: unknown, callId: string): ApprovalBinding | undefined {
  if (!isRequestContext(requestContext)) return undefined;
  return approvalIn(requestContext.get(approvalsName), callId);
}

/**
 * Record an approval for `callId` in a request context.
 * @throws IdempotencyError `invalid_options` when `requestContext` is not a `RequestContext`.
 */
export function bindApproval(requestContext: unknown, callId: string, binding: ApprovalBinding): void {
  if (!isRequestContext(requestContext)) {
    throw new IdempotencyError(
      ErrorCode.invalidOptions,
      `bindToolApproval(${binding.tool}): the first argument must be a RequestContext (from ` +
        '"@mastra/core/request-context"); pass the same one to approveToolCall() or approveToolCallGenerate().',
    );
  }
  requestContext.set(approvalsName, withApproval(requestContext.get(approvalsName), callId, binding));
}

function isRequestContext(value: unknown): value is RequestContextLike {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as RequestContextLike).get === "function" &&
    typeof (value as RequestContextLike).set === "function"
  );
}
