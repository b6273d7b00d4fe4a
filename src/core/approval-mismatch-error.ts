/**
 * The error for a run whose arguments (or key) differ from what a human approved: shared by the LangGraph
 * and OpenAI Agents integrations (docs/integrations/langgraph.md and openai-agents.md, "Approvals").
 * @module
 */
import { KeyConflictError } from "./errors.js";

/** What the approval named, and what the run has instead. */
export interface ApprovalMismatch {
  readonly tool: string;
  readonly scope: string;
  /** The key of the call that was about to run. */
  readonly key: string;
  readonly approvedKey: string;
  /** Fingerprint of the approved arguments. */
  readonly approvedFingerprint: string;
  /** Fingerprint of the arguments that were about to run. */
  readonly fingerprint: string;
  /** When the approved request was made (ISO-8601), or "" when the decision did not carry it. */
  readonly requestedAt: string;
}

/**
 * A human approved one call, and the run now holds another: different arguments (the model rewrote the
 * draft when the node re-ran, or a saved run state was edited), or an approval given for another key.
 * Nothing was executed.
 *
 * It is a `KeyConflictError` (code `idempotency_key_conflict`, 422), as for the same key arriving with
 * different arguments: it is that same caller bug, caught at the approval instead of at the store. Its
 * fields are a conflict's (`key`, `scope`, `originalFingerprint`, `fingerprint`, `originalCalledAt`, with
 * the approved fingerprint as the original), so code that handles conflicts handles it too.
 *
 * @example
 * import { ApprovalMismatchError } from "idempotool/langgraph";
 *
 * try {
 *   // await graph.invoke(new Command({ resume: approve(request) }), config);
 * } catch (error) {
 *   if (error instanceof ApprovalMismatchError) console.error(`ask again for ${error.tool}: ${error.message}`);
 * }
 */
export class ApprovalMismatchError extends KeyConflictError {
  override name = "ApprovalMismatchError";
  readonly approvedKey: string;

  constructor(mismatch: ApprovalMismatch) {
    const what =
      mismatch.approvedKey === mismatch.key
        ? `its arguments (fingerprint ${short(mismatch.fingerprint)}) differ from the ones a human approved ` +
          `(fingerprint ${short(mismatch.approvedFingerprint)})`
        : `the approval was given for key "${mismatch.approvedKey}", not for this call's key`;
    super(
      {
        key: mismatch.key,
        scope: mismatch.scope,
        originalTool: mismatch.tool,
        tool: mismatch.tool,
        originalFingerprint: mismatch.approvedFingerprint,
        fingerprint: mismatch.fingerprint,
        originalCalledAt: mismatch.requestedAt,
      },
      `${mismatch.tool} with key "${mismatch.key}" was not executed: ${what}. An approval covers exactly the ` +
        "arguments it was shown. Ask for approval of the new arguments under a new key, or run the approved ones.",
    );
    this.approvedKey = mismatch.approvedKey;
  }
}

function short(fingerprint: string): string {
  return `${fingerprint.slice(0, 12)}…`;
}
