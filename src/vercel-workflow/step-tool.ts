/**
 * An idempotent tool that takes its key from the Workflow step that calls it.
 * @module
 */
import type { IdempotentTool } from "../core/idempotent.js";
import { invalidOption } from "../core/option-checks.js";
import { checkStepToolTarget, type StepTool, stepBoundTool } from "../tool-calls/step-bound-tool.js";
import { type GetStepMetadata, stepKey } from "./step-key.js";

/** Options of {@link stepTool}. */
export interface StepToolOptions {
  /** `getStepMetadata` from `workflow`, called on each call to read the step's id. */
  readonly getStepMetadata: GetStepMetadata;
}

export type { StepCall, StepTool } from "../tool-calls/step-bound-tool.js";

/**
 * Bind an idempotent tool to the Workflow step that calls it: each call is keyed by
 * `stepKey(getStepMetadata, tool.toolName)`, so every retry of one step gets the first outcome back and
 * the effect happens once, while every other step invocation runs it anew.
 *
 * Call it inside a function marked `"use step"`; anywhere else it refuses with `idempotency_key_missing`
 * and runs nothing. One step that calls the tool for several different things needs a part per call:
 * use `stepKey(getStepMetadata, tool.toolName, part)` and the tool directly.
 *
 * @throws IdempotencyError `invalid_options` when `tool` is not an idempotent tool or `getStepMetadata`
 *   is not a function.
 * @example
 * import { getStepMetadata } from "workflow";
 * import { idempotent, memoryStore } from "idempotool";
 * import { stepTool } from "idempotool/vercel-workflow";
 *
 * const sendEmail = stepTool(
 *   idempotent(async (args: { to: string }) => ({ id: `m-${args.to}` }), {
 *     name: "send_email",
 *     store: memoryStore(),
 *   }),
 *   { getStepMetadata },
 * );
 * async function notify(to: string) {
 *   "use step";
 *   return (await sendEmail({ to })).result;
 * }
 */
export function stepTool<A, R>(tool: IdempotentTool<A, R>, options: StepToolOptions): StepTool<A, R> {
  checkStepToolTarget(tool);
  const getStepMetadata = options?.getStepMetadata;
  if (typeof getStepMetadata !== "function") {
    invalidOption(
      `stepTool(${tool.toolName})`,
      "getStepMetadata",
      "must be getStepMetadata, the function from the workflow package",
    );
  }
  return stepBoundTool(tool, () => stepKey(getStepMetadata, tool.toolName));
}
