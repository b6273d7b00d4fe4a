/**
 * Keys for side effects inside DBOS steps, from the workflow's id and the step's id.
 * @module
 */
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import { keys } from "../core/keys.js";

/**
 * The part of DBOS we read: the `DBOS` class itself fits (its static `workflowID` and `stepID`). Typed by
 * shape so this entry never imports DBOS.
 */
export interface DbosContext {
  /** The id of the workflow running now; undefined outside a workflow. */
  readonly workflowID: string | undefined;
  /** The id of the step running now (its position in the workflow); undefined outside a step. */
  readonly stepID: number | undefined;
}

/**
 * A key for one effect of one DBOS step: the workflow's id, the step's id and any `parts` you add (such as
 * the tool's name), hashed: `composite_` and 64 hex characters.
 *
 * DBOS runs a step at least once: when the step throws and its retries are on, and when the process dies
 * before DBOS recorded the step's output, recovery runs the workflow again and the step again. Every one of
 * those runs sees the same workflow id and the same step id (DBOS numbers the steps of a workflow in the
 * order they run), so they all get the same key, and the first outcome is replayed. Another step, another
 * workflow, or a fork of the workflow (a new workflow id: DBOS runs the forked steps again on purpose) gets
 * another key.
 *
 * Add a part when one step calls the tool several times for different things
 * (`stepKey(DBOS, "send_email", recipient)`).
 *
 * @throws IdempotencyError `idempotency_key_missing` outside a DBOS step (no workflow id, or in the body of
 *   a workflow rather than a step, whose effects DBOS never records); `invalid_arguments` for parts that
 *   are not JSON data.
 * @example
 * import { DBOS } from "@dbos-inc/dbos-sdk";
 * import { stepKey } from "idempotool/dbos";
 *
 * const notify = DBOS.registerStep(async (to: string) => {
 *   const key = stepKey(DBOS, "send_email"); // the same on every retry and recovery of this step
 *   return { key, to };
 * }, { name: "notify" });
 */
export function stepKey(dbos: DbosContext, ...parts: unknown[]): string {
  if ((typeof dbos !== "object" && typeof dbos !== "function") || dbos === null) {
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      "stepKey needs DBOS (the class from @dbos-inc/dbos-sdk) as its first argument.",
    );
  }
  const workflowId = dbos.workflowID;
  if (typeof workflowId !== "string" || workflowId.length === 0) {
    throw new IdempotencyError(
      ErrorCode.keyMissing,
      "stepKey: no DBOS workflow is running here. Call it inside a step of a workflow " +
        "(DBOS.registerStep, @DBOS.step() or DBOS.runStep); outside a workflow nothing can tell a retry " +
        "from a new call.",
    );
  }
  const stepId = dbos.stepID;
  if (!Number.isSafeInteger(stepId)) {
    throw new IdempotencyError(
      ErrorCode.keyMissing,
      `stepKey: workflow ${workflowId} is not in a step here. Run the side effect inside a step ` +
        "(DBOS.registerStep, @DBOS.step() or DBOS.runStep): DBOS records a step's output, not the effects " +
        "of a workflow's own body.",
    );
  }
  return keys.composite("dbos", workflowId, stepId, ...parts);
}
