/**
 * Where an approval given through `bindToolApproval()` is kept: in the request context the application
 * passes to `approveToolCall()`/`approveToolCallGenerate()`, by tool call id.
 * @module
 */
import { ErrorCode, IdempotencyError } from "../core/errors.js";

/** The request context entry that holds the approvals, by tool call id. */
export const approvalsEntry = "idempotoolApprovals";

/** The part of Mastra's `RequestContext` the approvals use. */
export interface RequestContextLike {
  get(key: string): unknown;
  set(key: string, value: unknown): void;
}

/** What a human approved for one call: this tool, under this key, with arguments of this fingerprint. */
export interface ApprovalBinding {
  readonly tool: string;
  readonly key: string;
  readonly fingerprint: string;
  /** When the approval was requested (ISO-8601). */
  readonly requested_at: string;
}

/** The approval bound to `callId` in a request context, if any. */
export function approvalOf(requestContext: unknown, callId: string): ApprovalBinding | undefined {
  if (!isRequestContext(requestContext)) return undefined;
  const approvals = requestContext.get(approvalsEntry);
  if (typeof approvals !== "object" || approvals === null || !Object.hasOwn(approvals, callId))
    return undefined;
  const binding = (approvals as Record<string, unknown>)[callId] as Partial<ApprovalBinding> | undefined;
  if (
    typeof binding?.tool !== "string" ||
    typeof binding.key !== "string" ||
    typeof binding.fingerprint !== "string" ||
    typeof binding.requested_at !== "string"
  ) {
    return undefined;
  }
  return {
    tool: binding.tool,
    key: binding.key,
    fingerprint: binding.fingerprint,
    requested_at: binding.requested_at,
  };
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
  const approvals = requestContext.get(approvalsEntry);
  requestContext.set(approvalsEntry, {
    ...(typeof approvals === "object" && approvals !== null ? approvals : {}),
    [callId]: binding,
  });
}

function isRequestContext(value: unknown): value is RequestContextLike {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as RequestContextLike).get === "function" &&
    typeof (value as RequestContextLike).set === "function"
  );
}
