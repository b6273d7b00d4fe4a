/**
 * An idempotent tool keyed on each call by the durable-execution step that calls it: what `stepTool` of
 * `idempotool/dbos` and of `idempotool/vercel-workflow` share. Each passes where its step's key comes from.
 */
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import type { Envelope, IdempotentTool } from "../core/idempotent.js";

/** What a step may pass on each call besides the arguments. */
export interface StepCall {
  /** A namespace (tenant, user). Default "default". */
  readonly scope?: string;
  /** Aborts waiting for a call in flight. */
  readonly signal?: AbortSignal;
}

/** An idempotent tool keyed by the step that calls it. */
export interface StepTool<A, R> {
  (args: A, call?: StepCall): Promise<Envelope<Awaited<R>>>;
  /** The wrapped tool, to call with a key of your own. */
  readonly tool: IdempotentTool<A, R>;
}

/**
 * Refuse a first argument that is not a tool wrapped by `idempotent()`, before the caller reads its name.
 * @throws IdempotencyError `invalid_options`.
 */
export function checkStepToolTarget(tool: unknown): void {
  if (typeof tool !== "function" || typeof (tool as { toolName?: unknown }).toolName !== "string") {
    throw new IdempotencyError(
      ErrorCode.invalidOptions,
      "stepTool(): the first argument must be a tool wrapped by idempotent().",
    );
  }
}

/**
 * `tool`, called on each call under the key `keyOf()` reads from the step that calls it. `keyOf` throws
 * (`idempotency_key_missing`) outside a step; the call then rejects and runs nothing.
 */
export function stepBoundTool<A, R>(tool: IdempotentTool<A, R>, keyOf: () => string): StepTool<A, R> {
  // async, so a call outside a step rejects the promise like every other refusal.
  const call = async (args: A, step: StepCall = {}) => {
    // Derived before the tool is touched: a call that cannot name its step runs nothing.
    const key = keyOf();
    return tool(args, {
      key,
      ...(step.scope === undefined ? {} : { scope: step.scope }),
      ...(step.signal === undefined ? {} : { signal: step.signal }),
    });
  };
  return Object.assign(call, { tool });
}
