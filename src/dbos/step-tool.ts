/**
 * An idempotent tool that takes its key from the DBOS step that calls it.
 * @module
 */
import type { IdempotentTool } from "../core/idempotent.js";
import { invalidOption } from "../core/option-checks.js";
import { checkStepToolTarget, type StepTool, stepBoundTool } from "../tool-calls/step-bound-tool.js";
import { type DbosContext, stepKey } from "./step-key.js";

/** Options of {@link stepTool}. */
export interface StepToolOptions {
  /** `DBOS` from `@dbos-inc/dbos-sdk`, where the workflow and step ids are read on each call. */
  readonly dbos: DbosContext;
}

export type { StepCall, StepTool } from "../tool-calls/step-bound-tool.js";

/**
 * Bind an idempotent tool to the DBOS step that calls it: each call is keyed by
 * `stepKey(DBOS, tool.toolName)`, so every retry and every recovery of one step gets the first outcome
 * back and the effect happens once, while each other step or workflow runs it anew.
 *
 * Call it inside a step (`DBOS.registerStep`, `@DBOS.step()`, `DBOS.runStep`); anywhere else it refuses
 * with `idempotency_key_missing` and runs nothing. One step that calls the tool for several different
 * things needs a part per call: use `stepKey(DBOS, tool.toolName, part)` and the tool directly.
 * Pass `{ signal: DBOS.stepStatus?.cancelSignal }` as the second argument to stop waiting for a call in
 * flight when the workflow is cancelled.
 *
 * @throws IdempotencyError `invalid_options` when `tool` is not an idempotent tool or `dbos` is missing.
 * @example
 * import { DBOS } from "@dbos-inc/dbos-sdk";
 * import { idempotent, memoryStore } from "idempotool";
 * import { stepTool } from "idempotool/dbos";
 *
 * const sendEmail = stepTool(
 *   idempotent(async (args: { to: string }) => ({ id: `m-${args.to}` }), {
 *     name: "send_email",
 *     store: memoryStore(),
 *   }),
 *   { dbos: DBOS },
 * );
 * const notify = DBOS.registerStep(
 *   async (to: string) => (await sendEmail({ to })).result,
 *   { name: "notify" },
 * );
 */
export function stepTool<A, R>(tool: IdempotentTool<A, R>, options: StepToolOptions): StepTool<A, R> {
  checkStepToolTarget(tool);
  const dbos = options?.dbos;
  if ((typeof dbos !== "object" && typeof dbos !== "function") || dbos === null) {
    invalidOption(`stepTool(${tool.toolName})`, "dbos", "must be DBOS, the class from @dbos-inc/dbos-sdk");
  }
  return stepBoundTool(tool, () => stepKey(dbos, tool.toolName));
}
