/**
 * Approvals kept beside a run by tool call id, where an agent SDK has no interrupt to carry them (Mastra
 * keeps them in the request context, the OpenAI Agents SDK in the run's context): what a human approved
 * for a call, and the key the call runs under once its arguments are checked against it.
 */
import { ApprovalMismatchError } from "../core/errors.js";
import { fingerprint } from "../core/fingerprint.js";

/** The name the approvals are kept under, by call id. */
export const approvalsName = "idempotoolApprovals";

/** What a human approved for one call: this tool, under this key, with arguments of this fingerprint. */
export interface ApprovalBinding {
  readonly tool: string;
  readonly key: string;
  readonly fingerprint: string;
  /** When the approval was requested (ISO-8601). */
  readonly requested_at: string;
}

/** The approval for `callId` among `approvals` (what is kept under {@link approvalsName}), if a whole one is there. */
export function approvalIn(approvals: unknown, callId: string): ApprovalBinding | undefined {
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

/** `approvals` with `binding` for `callId`, as a new object (anything but an object counts as none). */
export function withApproval(approvals: unknown, callId: string, binding: ApprovalBinding): object {
  return { ...(typeof approvals === "object" && approvals !== null ? approvals : {}), [callId]: binding };
}

/**
 * The key a human approved this call of `tool` under, once its arguments (read only then) are the
 * approved ones; undefined when there is no approval for `tool`.
 * @throws ApprovalMismatchError when the arguments differ from the approved ones: nothing may run.
 */
export function approvedKeyOf(
  approval: ApprovalBinding | undefined,
  tool: string,
  scope: string,
  argsOf: () => unknown,
): string | undefined {
  if (approval === undefined || approval.tool !== tool) return undefined;
  const print = fingerprint(argsOf(), { path: "args" });
  if (print === approval.fingerprint) return approval.key;
  throw new ApprovalMismatchError({
    tool,
    scope,
    key: approval.key,
    approvedKey: approval.key,
    approvedFingerprint: approval.fingerprint,
    fingerprint: print,
    requestedAt: approval.requested_at,
  });
}
