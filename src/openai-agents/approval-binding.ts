/**
 * Where an approval given through `approve()` is kept: in the run's own context, which a `RunState`
 * serializes, so it reaches the process that resumes the run.
 * @module
 */
import { ErrorCode, IdempotencyError } from "../core/errors.js";

/** The context property that holds the approvals, by call id. */
export const approvalsField = "idempotoolApprovals";

/** What a human approved for one call: this tool, under this key, with arguments of this fingerprint. */
export interface ApprovalBinding {
  readonly tool: string;
  readonly key: string;
  readonly fingerprint: string;
  /** When the approval was requested (ISO-8601). */
  readonly requested_at: string;
}

/** The approval bound to `callId` in a run's context, if any. */
export function approvalOf(context: unknown, callId: string): ApprovalBinding | undefined {
  if (typeof context !== "object" || context === null) return undefined;
  const approvals = (context as Record<string, unknown>)[approvalsField];
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
 * Record an approval for `callId` in a run's context.
 * @throws IdempotencyError `invalid_options` when the run's context is not an object.
 */
export function bindApproval(context: unknown, callId: string, binding: ApprovalBinding): void {
  if (typeof context !== "object" || context === null || Array.isArray(context)) {
    throw new IdempotencyError(
      ErrorCode.invalidOptions,
      `approve(${binding.tool}): the run's context must be an object (or left out) to carry the approval; ` +
        `it is kept there as ${approvalsField}, so that a RunState saved as a string carries it too.`,
    );
  }
  const record = context as Record<string, unknown>;
  const approvals = record[approvalsField];
  record[approvalsField] = {
    ...(typeof approvals === "object" && approvals !== null ? approvals : {}),
    [callId]: binding,
  };
}

/** Remove the approval bound to `callId` from a run's context, once the approved call has run. */
export function forgetApproval(context: unknown, callId: string): void {
  if (typeof context !== "object" || context === null) return;
  const approvals = (context as Record<string, unknown>)[approvalsField];
  if (typeof approvals !== "object" || approvals === null || !Object.hasOwn(approvals, callId)) return;
  const { [callId]: _used, ...rest } = approvals as Record<string, unknown>;
  (context as Record<string, unknown>)[approvalsField] = rest;
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
