/**
 * OP-5 as one helper: record the intent (the claim), make the call, keep its external id (the completed
 * result), with a compensation step. A thin layer over `idempotent()` with the `compensatable` effect:
 * the core already gives a saga what it needs (claim, fenced settle, replay, in-flight wait, and a hook
 * for stale claims), so the saga adds the external-id contract, compensation, and its reconciler entry.
 */

import { compensation, undoOnce } from "../core/compensation.js";
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import { type IdempotentTool, idempotent, type ToolContext } from "../core/idempotent.js";
import { invalidOption, invalidOptionFor } from "../core/option-checks.js";
import { Effect, type RecordOptions, type VerifyHook } from "../core/options.js";
import { resolveCodec } from "../core/result-codec.js";
import { decodeResult, decodeResultProblem } from "../core/serialize.js";
import type { CompensateHook, ReconcileHook, ReconcileTool } from "../reconcile/hooks.js";

const owner = "saga()";

/** What a saga's call leaves behind: the downstream's id for the effect, and anything else worth keeping. */
export interface SagaStep {
  readonly externalId: string;
}

/**
 * Options of {@link saga}: the record options it shares with `idempotent()` ({@link RecordOptions}), and
 * the saga's own hooks. The effect is always `compensatable`; the reconciler entry carries `ttlMs`,
 * `redact` and `encryption` too.
 */
export interface SagaOptions<A, S extends SagaStep>
  extends Pick<
    RecordOptions<A, S>,
    | "store"
    | "ttlMs"
    | "leaseMs"
    | "waitMs"
    | "significant"
    | "redact"
    | "encryption"
    | "fingerprintKeys"
    | "clock"
    | "onEvent"
  > {
  /** The tool's name, kept in the record; the reconciler finds the saga's hooks by it. */
  readonly name: string;
  /** The call itself. Pass `context.key` downstream as a reference, so `verify` can find the effect later. */
  readonly run: (args: A, context: ToolContext) => S | Promise<S>;
  // Declared here, not picked: a saga's hook is the reconciler's, which may also answer "compensate".
  /**
   * Looks an attempt up downstream (by the reference `run` sent). A retry that finds a stale claim asks it
   * at once; so does the reconciler. Without it, a stale saga fails closed until the reconciler or an
   * operator resolves it. A "compensate" answer is left to the reconciler: callers get `outcome_unknown`.
   */
  readonly verify?: ReconcileHook<S> | undefined;
  /**
   * Undo the effect (refund, correction). Run by the reconciler, or by `saga.compensate()`, which runs it
   * at most once per saga record: there, throw `notExecuted(...)` when nothing was undone (a retry runs it
   * again), or `definitiveFailure(...)` when it cannot be undone (a retry gets that failure back); any
   * other throw leaves the undo's outcome unknown.
   */
  readonly compensate?: CompensateHook<S> | undefined;
}

/** A saga: call it like any idempotent tool; it also knows how to compensate and how to be reconciled. */
export interface Saga<A, S extends SagaStep> extends IdempotentTool<A, S> {
  /**
   * Undo a completed saga's effect, explicitly (a duplicate found after the fact). The record stays
   * completed, so repeats still replay the external id and never call again. Returns what `compensate`
   * returned.
   *
   * The undo is itself an effect made at most once per saga record, whatever the `reason`: a repeat (a
   * second click on "undo", a retry after a timeout) gets the first undo's return value back without
   * calling `compensate`, one made while it runs waits for it (or gets `idempotency_key_in_use` after
   * `waitMs`), and after a `compensate` that threw, repeats get `outcome_unknown` (the undo may have
   * happened) unless it threw `notExecuted(...)` (the next call runs it) or `definitiveFailure(...)`
   * (replayed). See docs/reconcile.md.
   * @example
   * import { memoryStore } from "idempotool";
   * import { saga } from "idempotool/saga";
   *
   * const refund = saga({
   *   name: "issue_refund",
   *   store: memoryStore(),
   *   run: async (args: { orderId: string }) => ({ externalId: `re_${args.orderId}` }),
   *   compensate: async (_record, { step }) => ({ reversed: step?.externalId }),
   * });
   * await refund({ orderId: "o-1" }, { key: "refund-o-1" });
   * const undone = await refund.compensate({ key: "refund-o-1" }, "refunded twice");
   * const again = await refund.compensate({ key: "refund-o-1" }, "clicked undo again");
   * // again equals undone ({ reversed: "re_o-1" }), and the refund was reversed once.
   */
  compensate(id: { readonly key: string; readonly scope?: string }, reason: string): Promise<unknown>;
  /** The entry for `reconcile({ tools: { [saga.toolName]: saga.reconciler } })`. */
  readonly reconciler: ReconcileTool<S>;
}

/**
 * Make a compensatable call at most once, keeping its external id.
 * @example
 * import { memoryStore } from "idempotool";
 * import { saga } from "idempotool/saga";
 *
 * const refunds = new Map<string, string>(); // the bank, by our reference
 * const refund = saga({
 *   name: "issue_refund",
 *   store: memoryStore(),
 *   run: async (args: { orderId: string; cents: number }, { key }) => {
 *     refunds.set(key, `re_${args.orderId}`);
 *     return { externalId: `re_${args.orderId}`, cents: args.cents };
 *   },
 *   verify: async (record) => {
 *     const id = refunds.get(record.key);
 *     return id ? { status: "completed", result: { externalId: id, cents: 0 } } : { status: "not_executed" };
 *   },
 *   compensate: async (_record, { step }) => { if (step) refunds.delete(step.externalId); },
 * });
 * const first = await refund({ orderId: "o-1", cents: 500 }, { key: "refund-o-1" });
 * const again = await refund({ orderId: "o-1", cents: 500 }, { key: "refund-o-1" });
 * // again.was_replay === true and again.result.externalId === first.result.externalId
 */
export function saga<A, S extends SagaStep>(options: SagaOptions<A, S>): Saga<A, S> {
  if (typeof options?.run !== "function") invalidOption(owner, "run", "must be a function");
  if (options.verify !== undefined && typeof options.verify !== "function")
    invalidOption(owner, "verify", "must be a function");
  if (options.compensate !== undefined && typeof options.compensate !== "function") {
    invalidOption(owner, "compensate", "must be a function");
  }
  const { run, verify, compensate, ...rest } = options;
  // The core's hook has no "compensate" answer: until the reconciler undoes the effect, callers fail closed.
  const inline: VerifyHook<A, S> | undefined = verify
    ? async (record, context) => {
        const outcome = await verify(record, { ...context, tool: options.name });
        if (outcome.status !== "compensate") return outcome;
        return {
          status: "unknown",
          reason: `the effect must be compensated${outcome.reason ? ` (${outcome.reason})` : ""}; the reconciler does that`,
        };
      }
    : undefined;
  const tool = idempotent<A, S>(run, {
    ...rest,
    effect: Effect.compensatable,
    // S is a plain object type, so Awaited<S> is S; the compiler cannot see that for a generic S.
    ...(inline ? { reconcile: inline as unknown as VerifyHook<A, Awaited<S>> } : {}),
  });
  const unverified: ReconcileHook<S> = () => ({
    status: "unknown",
    reason: `${options.name} has no verify hook`,
  });
  const reconciler: ReconcileTool<S> = {
    verify: verify ?? unverified,
    ...(compensate ? { compensate } : {}),
    ...(options.ttlMs !== undefined ? { ttlMs: options.ttlMs } : {}),
    ...(options.redact !== undefined ? { redact: options.redact } : {}),
    ...(options.encryption !== undefined ? { encryption: options.encryption } : {}),
  };
  const undo = compensate
    ? compensation(compensate, {
        tool: options.name,
        store: options.store,
        ttlMs: options.ttlMs,
        leaseMs: options.leaseMs,
        waitMs: options.waitMs,
        redact: options.redact,
        encryption: options.encryption,
        clock: options.clock,
        onEvent: options.onEvent,
      })
    : undefined;
  // Already validated by idempotent() above.
  const codec = resolveCodec(options.redact, options.encryption, invalidOptionFor(owner));
  return Object.assign(tool, {
    reconciler,
    async compensate(
      id: { readonly key: string; readonly scope?: string },
      reason: string,
    ): Promise<unknown> {
      if (!undo) invalidOption(owner, "compensate", "is needed to compensate a saga");
      const scope = id.scope ?? "default";
      const record = await options.store.get(
        { scope, key: id.key },
        options.clock ? options.clock.now() : Date.now(),
      );
      if (record === undefined || record.tool !== options.name || record.status !== "completed") {
        throw new IdempotencyError(
          ErrorCode.invalidArguments,
          `${options.name}: no completed saga with key "${id.key}" in scope "${scope}" to compensate` +
            `${record ? ` (it is ${record.status}; the reconciler resolves stale and unknown ones)` : ""}.`,
        );
      }
      const binding =
        codec?.encryption === undefined
          ? undefined
          : { scope, key: id.key, tool: options.name, fingerprint: record.fingerprint };
      // A step too large or unserializable to keep was never stored: compensate without it.
      const notKept =
        record.result === null && decodeResultProblem(record.error, codec, binding) !== undefined;
      const step = notKept ? undefined : (decodeResult(record.result, codec, binding) as S | undefined);
      return undoOnce(undo, record, step, reason);
    },
  });
}
