/**
 * Effects in Mastra workflow steps that survive a resume: Mastra runs a step's `execute` from the top
 * again when the run resumes after `suspend()`, so an effect before the suspend would run twice. A key
 * from the run and the step makes the re-run a replay.
 * @module
 */
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import { keys } from "../core/keys.js";

/** The part of a step's `execute` parameters the key reads. */
export interface StepParams {
  readonly runId: string;
  readonly workflowId: string;
}

/** The part of a step (what `createStep()` returns) that the wrapper reads. */
export interface MastraStep {
  readonly id: string;
  // biome-ignore lint/suspicious/noExplicitAny: the parameters are the step's own.
  readonly execute: (params: any) => Promise<unknown>;
}

/** The step id of each `execute` parameters object handed to a wrapped step. */
const steps = new WeakMap<object, string>();

/**
 * Let a step's `execute` key its effects by the run and the step: pass the step `createStep()` made
 * through this, and use the step it returns. Inside, {@link keyFromStep} makes the key from the
 * `execute` parameters.
 *
 * Mastra does not tell a step its own id; this records it for each call of `execute`, on the parameters
 * object, so that `keyFromStep` cannot be handed another step's id by mistake.
 * @throws IdempotencyError `invalid_options` when the step has no `id` or no `execute`.
 * @example
 * import { createStep } from "@mastra/core/workflows";
 * import { z } from "zod";
 * import { idempotent, memoryStore } from "idempotool";
 * import { idempotentStep, keyFromStep } from "idempotool/mastra";
 *
 * const sendEmail = idempotent(async (args: { to: string }) => ({ id: `m-${args.to}` }), {
 *   name: "send_email",
 *   store: memoryStore(),
 * });
 * const notify = idempotentStep(
 *   createStep({
 *     id: "notify",
 *     inputSchema: z.object({ to: z.string() }),
 *     outputSchema: z.object({ messageId: z.string() }),
 *     execute: async (params) => {
 *       const sent = await sendEmail({ to: params.inputData.to }, { key: keyFromStep(params, "send_email") });
 *       if (params.resumeData === undefined) return params.suspend({ sent: sent.result.id });
 *       return { messageId: sent.result.id };
 *     },
 *   }),
 * );
 */
export function idempotentStep<T extends MastraStep>(step: T): T {
  const given = step as unknown as Partial<Record<string, unknown>> | undefined;
  if (
    typeof given !== "object" ||
    given === null ||
    typeof given.id !== "string" ||
    given.id.length === 0 ||
    typeof given.execute !== "function"
  ) {
    throw new IdempotencyError(
      ErrorCode.invalidOptions,
      "idempotentStep(): the argument must be a step made by createStep(), with an id and an execute function.",
    );
  }
  const id = given.id;
  const execute = given.execute as (params: unknown) => Promise<unknown>;
  return {
    ...step,
    execute: (params: unknown) => {
      if (typeof params === "object" && params !== null) steps.set(params, id);
      return execute(params);
    },
  };
}

/**
 * The key of an effect in a workflow step: `keys.composite(workflowId, runId, stepId, ...parts)`, from
 * the parameters of the step's `execute` (a step wrapped by {@link idempotentStep}). Add the tool's name as
 * a part, and another part for each different effect of one step.
 *
 * Every run of the step's body in one workflow run gets the same key: the first run and the re-run after
 * `resume()` (in this process or another that loads the run's snapshot), and a retry after a failure.
 * Another run, another workflow or another step gets another. The same step run for several items
 * (`foreach`) gets one key for all of them: add the item's id as a part.
 * @throws IdempotencyError `idempotency_key_missing` when `params` are not the parameters of a step made
 *   with `idempotentStep`, or have no run id; `invalid_arguments` for parts that are not JSON data.
 * @example
 * import { keyFromStep } from "idempotool/mastra";
 *
 * declare const params: { runId: string; workflowId: string }; // execute's parameters
 * const key = keyFromStep(params, "send_email");
 */
export function keyFromStep(params: StepParams, ...parts: unknown[]): string {
  const stepId = typeof params === "object" && params !== null ? steps.get(params) : undefined;
  if (stepId === undefined) {
    throw new IdempotencyError(
      ErrorCode.keyMissing,
      "keyFromStep: pass the parameters of the execute of a step wrapped by idempotentStep(createStep({ ... })) " +
        "(the object itself, not a copy): only that step knows its own id.",
    );
  }
  if (typeof params.runId !== "string" || params.runId.length === 0) {
    throw new IdempotencyError(
      ErrorCode.keyMissing,
      `keyFromStep: step ${stepId} has no run id, so nothing can tell a re-run from a new run.`,
    );
  }
  return keys.composite(params.workflowId, params.runId, stepId, ...parts);
}
