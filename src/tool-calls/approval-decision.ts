/**
 * The reviewer's side of an approval: the request a paused run shows (a LangGraph node's `interrupt()`, a
 * Mastra step's `suspend()`), and the decision to resume it with. Shared by the LangGraph and Mastra
 * integrations.
 * @module
 */
import { ErrorCode, IdempotencyError } from "../core/errors.js";

export const requestType = "idempotool.approval_request";

/**
 * What a paused run shows (a LangGraph node hands it to `interrupt()`, a Mastra step to `suspend()`), and
 * what the reviewer (a UI, an operator) sees: the call to approve.
 * snake_case where it is JSON for people and clients, like the envelope.
 */
export interface ApprovalRequest<A = unknown> {
  readonly type: typeof requestType;
  readonly tool: string;
  readonly key: string;
  /** SHA-256 of the canonical JSON of `args`: what the approval is bound to. */
  readonly fingerprint: string;
  readonly args: A;
  /** When this request was made (ISO-8601). */
  readonly requested_at: string;
}

/** The resume value that approves one request; build it with {@link approve}. */
export interface ApprovedDecision {
  readonly approved: true;
  readonly key: string;
  readonly fingerprint: string;
  readonly requested_at?: string;
}

/** The resume value that turns a request down; build it with {@link reject}. */
export interface RejectedDecision {
  readonly approved: false;
  readonly key?: string;
  readonly reason?: string;
}

/**
 * A reviewer's answer: the value to resume with (LangGraph: `new Command({ resume: decision })`; Mastra:
 * `run.resume({ step, resumeData: decision })`). Plain JSON, so a run can keep it in its state.
 */
export type ApprovalDecision = ApprovedDecision | RejectedDecision;

/**
 * The resume value that approves `request`, bound to its key and fingerprint.
 * @example
 * import { approve, isApprovalRequest } from "idempotool/langgraph";
 *
 * // const paused = await graph.invoke(input, config);
 * const paused = { __interrupt__: [] as { value: unknown }[] };
 * const request = paused.__interrupt__.map((i) => i.value).find(isApprovalRequest);
 * if (request) {
 *   const resume = approve(request); // then: graph.invoke(new Command({ resume }), config)
 * }
 */
export function approve(request: ApprovalRequest): ApprovedDecision {
  if (!isApprovalRequest(request)) {
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      "approve() needs the ApprovalRequest the run paused with (LangGraph: the interrupt's value; Mastra: the " +
        "step's suspend payload).",
    );
  }
  return {
    approved: true,
    key: request.key,
    fingerprint: request.fingerprint,
    requested_at: request.requested_at,
  };
}

/**
 * The resume value that turns `request` down. The node gets `{ approved: false }` and runs nothing.
 * @example
 * import { type ApprovalRequest, reject } from "idempotool/langgraph";
 *
 * declare const request: ApprovalRequest;
 * const resume = reject(request, "wrong tone"); // then: graph.invoke(new Command({ resume }), config)
 */
export function reject(request?: ApprovalRequest, reason?: string): RejectedDecision {
  return {
    approved: false,
    ...(isApprovalRequest(request) ? { key: request.key } : {}),
    ...(reason === undefined ? {} : { reason }),
  };
}

/**
 * Whether `value` is an {@link ApprovalRequest}: use it to find the approval among a paused graph's
 * `__interrupt__` values.
 * @example
 * import { isApprovalRequest } from "idempotool/langgraph";
 *
 * const interrupts: { value: unknown }[] = [];
 * const requests = interrupts.map((i) => i.value).filter(isApprovalRequest);
 */
export function isApprovalRequest(value: unknown): value is ApprovalRequest {
  if (typeof value !== "object" || value === null) return false;
  const request = value as Record<string, unknown>;
  return (
    request.type === requestType &&
    typeof request.tool === "string" &&
    typeof request.key === "string" &&
    typeof request.fingerprint === "string" &&
    typeof request.requested_at === "string" &&
    "args" in request
  );
}

/**
 * Validate a resume value (or a decision read back from state) and copy out just its fields. `howToResume`
 * names the framework's way to resume with a decision, for the error message.
 */
export function readDecision(
  value: unknown,
  toolName: string,
  howToResume = "new Command({ resume: approve(request) }) or reject(request), where request is the interrupt's value",
): ApprovalDecision {
  const decision = (typeof value === "object" && value !== null ? value : {}) as Record<string, unknown>;
  if (decision.approved === false) {
    return {
      approved: false,
      ...(typeof decision.key === "string" ? { key: decision.key } : {}),
      ...(typeof decision.reason === "string" ? { reason: decision.reason } : {}),
    };
  }
  if (
    decision.approved === true &&
    typeof decision.key === "string" &&
    typeof decision.fingerprint === "string"
  ) {
    return {
      approved: true,
      key: decision.key,
      fingerprint: decision.fingerprint,
      ...(typeof decision.requested_at === "string" ? { requested_at: decision.requested_at } : {}),
    };
  }
  throw new IdempotencyError(
    ErrorCode.invalidArguments,
    `${toolName}: the resume value ${preview(value)} is not an approval decision. Resume with ` +
      `${howToResume}: an approval must name the key and fingerprint it approves, or it would approve ` +
      "whatever a re-run computes.",
  );
}

/** A short, safe rendering of a resume value for an error message. */
function preview(value: unknown): string {
  if (typeof value === "object" && value !== null) return "(an object without approved, key and fingerprint)";
  return typeof value === "string" ? JSON.stringify(value) : String(value);
}
