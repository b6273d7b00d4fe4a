/**
 * An idempotent tool that takes its key from the Workflow step that calls it.
 * @module
 */
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import type { Envelope, IdempotentTool } from "../core/idempotent.js";
import { invalidOption } from "../core/option-checks.js";
import { type GetStepMetadata, stepKey } from "./step-key.js";

/** Options of {@link stepTool}. */
export interface StepToolOptions {
  /** `getStepMetadata` from `workflow`, called on each call to read the step's id. */
  readonly getStepMetadata: GetStepMetadata;
}

/** What a step may pass on each call besides the arguments. */
export interface StepCall {
  /** A namespace (tenant, user). Default "default". */
  readonly scope?: string;
  /** Aborts waiting for a call in flight. */
  readonly signal?: AbortSignal;
}

/** An idempotent tool keyed by the Workflow step that calls it. */
export interface StepTool<A, R> {
  (args: A, call?: StepCall): Promise<Envelope<Awaited<R>>>;
  /** The wrapped tool, to call with a key of your own. */
  readonly tool: IdempotentTool<A, R>;
}

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
  if (typeof tool !== "function" || typeof tool.toolName !== "string") {
    throw new IdempotencyError(
      ErrorCode.invalidOptions,
      "stepTool(): the first argument must be a tool wrapped by idempotent().",
    );
  }
  const getStepMetadata = options?.getStepMetadata;
  if (typeof getStepMetadata !== "function") {
    invalidOption(
      `stepTool(${tool.toolName})`,
      "getStepMetadata",
      "must be getStepMetadata, the function from the workflow package",
    );
  }
  // async, so a call outside a step rejects the promise like every other refusal.
  const call = async (args: A, step: StepCall = {}) => {
    // Derived before the tool is touched: a call that cannot name its step runs nothing.
    const key = stepKey(getStepMetadata, tool.toolName);
    return tool(args, {
      key,
      ...(step.scope === undefined ? {} : { scope: step.scope }),
      ...(step.signal === undefined ? {} : { signal: step.signal }),
    });
  };
  return Object.assign(call, { tool });
}
