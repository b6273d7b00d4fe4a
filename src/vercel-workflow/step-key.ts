/**
 * Keys for side effects inside Vercel Workflow steps, from the step's `stepId`.
 * @module
 */
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import { keys } from "../core/keys.js";

/**
 * The part of a step's metadata we read. `getStepMetadata()` from `workflow` returns it; typed by shape
 * so this entry never imports the Workflow SDK.
 */
export interface StepMetadata {
  /** The id of the step invocation: the same on every attempt of it, unique to it. */
  readonly stepId: string;
}

/** `getStepMetadata` from `workflow`: pass the function itself, so a call outside a step is refused cleanly. */
export type GetStepMetadata = () => StepMetadata;

/**
 * A key for one effect of one Workflow step: its `stepId` and any `parts` you add (such as the tool's
 * name), hashed: `composite_` and 64 hex characters.
 *
 * The Workflow SDK retries a step that throws, and may deliver a step more than once; every attempt of one
 * step invocation has the same `stepId`, so every attempt gets the same key and the first outcome is
 * replayed. Another step invocation (the same step function called again, in this run or another) has
 * another `stepId` and gets another key.
 *
 * Pass `getStepMetadata` itself, not its result: outside a step it throws, and `stepKey` turns that into
 * `idempotency_key_missing` before anything runs. Add a part when one step calls the tool several times
 * for different things (`stepKey(getStepMetadata, "send_email", recipient)`).
 *
 * @throws IdempotencyError `idempotency_key_missing` outside a step (in a workflow function, or outside a
 *   run), `invalid_arguments` when the first argument is not a function or parts are not JSON data.
 * @example
 * import { getStepMetadata } from "workflow";
 * import { stepKey } from "idempotool/vercel-workflow";
 *
 * async function chargeCustomer(customerId: string, cents: number) {
 *   "use step";
 *   const key = stepKey(getStepMetadata, "charge"); // the same on every retry of this step
 *   return { key, customerId, cents };
 * }
 */
export function stepKey(getStepMetadata: GetStepMetadata, ...parts: unknown[]): string {
  if (typeof getStepMetadata !== "function") {
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      "stepKey needs getStepMetadata (the function from the workflow package) as its first argument.",
    );
  }
  let stepId: unknown;
  try {
    stepId = getStepMetadata().stepId;
  } catch (error) {
    throw new IdempotencyError(
      ErrorCode.keyMissing,
      'stepKey: no Workflow step is running here. Call it inside a function marked "use step"; a ' +
        "workflow function replays on every resume and records no effects of its own.",
      { cause: error },
    );
  }
  if (typeof stepId !== "string" || stepId.length === 0) {
    throw new IdempotencyError(
      ErrorCode.keyMissing,
      'stepKey: the step metadata has no stepId. Call it inside a function marked "use step".',
    );
  }
  return keys.composite("workflow", stepId, ...parts);
}
