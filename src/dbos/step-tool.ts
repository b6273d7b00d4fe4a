/**
 * An idempotent tool that takes its key from the DBOS step that calls it.
 * @module
 */
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import type { Envelope, IdempotentTool } from "../core/idempotent.js";
import { invalidOption } from "../core/option-checks.js";
import { type DbosContext, stepKey } from "./step-key.js";

/** Options of {@link stepTool}. */
export interface StepToolOptions {
  /** `DBOS` from `@dbos-inc/dbos-sdk`, where the workflow and step ids are read on each call. */
  readonly dbos: DbosContext;
}

/** What a step may pass on each call besides the arguments. */
export interface StepCall {
  /** A namespace (tenant, user). Default "default". */
  readonly scope?: string;
  /** Aborts waiting for a call in flight (pass `DBOS.stepStatus?.cancelSignal` to follow the workflow's cancellation). */
  readonly signal?: AbortSignal;
}

/** An idempotent tool keyed by the DBOS step that calls it. */
export interface StepTool<A, R> {
  (args: A, call?: StepCall): Promise<Envelope<Awaited<R>>>;
  /** The wrapped tool, to call with a key of your own. */
  readonly tool: IdempotentTool<A, R>;
}

/**
 * Bind an idempotent tool to the DBOS step that calls it: each call is keyed by
 * `stepKey(DBOS, tool.toolName)`, so every retry and every recovery of one step gets the first outcome
 * back and the effect happens once, while each other step or workflow runs it anew.
 *
 * Call it inside a step (`DBOS.registerStep`, `@DBOS.step()`, `DBOS.runStep`); anywhere else it refuses
 * with `idempotency_key_missing` and runs nothing. One step that calls the tool for several different
 * things needs a part per call: use `stepKey(DBOS, tool.toolName, part)` and the tool directly.
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
  if (typeof tool !== "function" || typeof tool.toolName !== "string") {
    throw new IdempotencyError(
      ErrorCode.invalidOptions,
      "stepTool(): the first argument must be a tool wrapped by idempotent().",
    );
  }
  const dbos = options?.dbos;
  if ((typeof dbos !== "object" && typeof dbos !== "function") || dbos === null) {
    invalidOption(`stepTool(${tool.toolName})`, "dbos", "must be DBOS, the class from @dbos-inc/dbos-sdk");
  }
  // async, so a step without ids rejects the promise like every other refusal.
  const call = async (args: A, step: StepCall = {}) => {
    // Derived before the tool is touched: a call that cannot name its step runs nothing.
    const key = stepKey(dbos, tool.toolName);
    return tool(args, {
      key,
      ...(step.scope === undefined ? {} : { scope: step.scope }),
      ...(step.signal === undefined ? {} : { signal: step.signal }),
    });
  };
  return Object.assign(call, { tool });
}
