/**
 * Running a call under a human approval bound to (key, fingerprint): the checks every integration with
 * approvals shares (LangGraph's `runApproved`, Mastra's), and the request they pause with.
 */
import { ApprovalMismatchError, ErrorCode, IdempotencyError } from "../core/errors.js";
import { fingerprint } from "../core/fingerprint.js";
import type { Envelope, IdempotentTool } from "../core/idempotent.js";
import { validateKey } from "../core/keys.js";
import { type ApprovedDecision, readDecision } from "./approval-decision.js";

/** Options of `runApproved`. */
export interface RunApprovedOptions {
  /** The key this call expects (from state, checkpoint or step); an approval for any other key is refused. */
  readonly key?: string | undefined;
  /** A namespace (tenant, user). Default "default". */
  readonly scope?: string | undefined;
  /** Aborts waiting for a call in flight. */
  readonly signal?: AbortSignal | undefined;
}

/**
 * Run `tool(args)` under `decision` after checking that it approves this key and exactly these arguments.
 * `howToResume` names the framework's way to resume with a decision, for the error a non-decision gets.
 */
export async function runApprovedCall<A, R>(
  tool: IdempotentTool<A, R>,
  args: A,
  decision: ApprovedDecision,
  options: RunApprovedOptions,
  howToResume: string,
): Promise<Envelope<Awaited<R>>> {
  const toolName = requireToolName(tool, "runApproved");
  const approval = readDecision(decision, toolName, howToResume);
  if (!approval.approved) {
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      `${toolName} was not approved${approval.reason ? ` (${approval.reason})` : ""}: runApproved runs only an approved call.`,
    );
  }
  const key = options.key === undefined ? approval.key : validateKey(options.key, toolName);
  checkBinding(approval, toolName, key, fingerprint(args, { path: "args" }), options.scope);
  return tool(args, {
    key: approval.key,
    ...(options.scope === undefined ? {} : { scope: options.scope }),
    ...(options.signal === undefined ? {} : { signal: options.signal }),
  });
}

/**
 * Throw unless `decision` approves exactly `key` and the arguments of fingerprint `print`.
 * @throws ApprovalMismatchError when it names another key or other arguments.
 */
export function checkBinding(
  decision: ApprovedDecision,
  toolName: string,
  key: string,
  print: string,
  scope: string | undefined,
): void {
  if (decision.key === key && decision.fingerprint === print) return;
  throw new ApprovalMismatchError({
    tool: toolName,
    scope: scope ?? "default",
    key,
    approvedKey: decision.key,
    approvedFingerprint: decision.fingerprint,
    fingerprint: print,
    requestedAt: decision.requested_at ?? "",
  });
}

/** The tool's name, checked to be a tool wrapped by `idempotent()`. */
export function requireToolName(tool: { readonly toolName: string }, helper: string): string {
  if ((typeof tool !== "object" && typeof tool !== "function") || tool === null) {
    throw new IdempotencyError(ErrorCode.invalidOptions, `${helper}(): the first argument must be the tool.`);
  }
  if (typeof tool.toolName !== "string" || tool.toolName.length === 0) {
    throw new IdempotencyError(
      ErrorCode.invalidOptions,
      `${helper}(): the tool has no toolName; pass a tool wrapped by idempotent().`,
    );
  }
  return tool.toolName;
}
