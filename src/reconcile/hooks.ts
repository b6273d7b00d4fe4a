/**
 * What the reconciler asks of a tool: a hook that looks an earlier attempt up downstream, and an optional
 * compensation step. The shapes fit `idempotent({ verify })` too, so one hook serves both paths.
 */
import type { RecordOptions, VerifyOutcome } from "../core/options.js";
import type { EncryptionOptions } from "../core/result-codec.js";
import type { IdempotencyRecord } from "../core/store.js";

/** What a hook sees beside the record. The reconciler has no arguments: only what the record keeps. */
export interface ReconcileContext {
  readonly key: string;
  readonly scope: string;
  readonly tool: string;
  /**
   * Aborts when the reconciler is stopped, or with a `LeaseLostError` when it loses its claim on the record:
   * its lease is renewed while the hook runs, so only another worker taking the record, or a store that no
   * renewal could reach before the lease passed, makes that happen.
   */
  readonly signal: AbortSignal;
}

/**
 * What the hook learned: the four outcomes of `verify`, plus, for compensatable effects, "compensate":
 * the effect happened and must be undone (a duplicate found after the fact, an intent that went stale).
 */
export type ReconcileOutcome<R = unknown> =
  | VerifyOutcome<R>
  | {
      readonly status: "compensate";
      /** What the lookup found (the external id to undo), handed to `compensate`. */
      readonly found?: R;
      readonly reason?: string;
    };

/**
 * Asks the downstream system what became of an attempt whose outcome is unknown. It must only read:
 * a dry run asks it too. A hook that ignores `args` also fits `idempotent({ verify })`.
 * @example
 * const verify: ReconcileHook<{ messageId: string }> = async (record) => {
 *   const found = await outbox.findByKey(record.key);
 *   return found ? { status: "completed", result: { messageId: found.id } } : { status: "not_executed" };
 * };
 */
export type ReconcileHook<R = unknown> = (
  record: IdempotencyRecord,
  context: ReconcileContext,
) => ReconcileOutcome<R> | Promise<ReconcileOutcome<R>>;

export interface CompensateContext<R = unknown> extends ReconcileContext {
  /** What to undo: the lookup's `found`, or the stored result of a completed record. */
  readonly step: R | undefined;
  readonly reason: string;
}

/** Undo an effect (refund the charge, send the correction). Throw if it could not be undone. */
export type CompensateHook<R = unknown> = (
  record: IdempotencyRecord,
  context: CompensateContext<R>,
) => unknown;

// A method's parameters are checked bivariantly: that is what lets a tool typed by its result fit the map
// of all tools, and the reconciler hands `compensate` only what that same tool's `verify` found.
type BivariantCompensate<R> = {
  compensate(record: IdempotencyRecord, context: CompensateContext<R>): unknown;
}["compensate"];

/**
 * One tool's entry in `reconcile({ tools })`. A tool typed by its result (`ReconcileTool<Refund>`) fits
 * the map of all tools, `ReconcileTool` (of `unknown`). Give `ttlMs`, `maxResultBytes`, `redact` and
 * `encryption` as the tool gives them to `idempotent()`, so a record the reconciler settles is kept and
 * stored alike.
 */
export interface ReconcileTool<R = unknown>
  extends Pick<RecordOptions<unknown, R>, "ttlMs" | "maxResultBytes" | "redact"> {
  readonly verify: ReconcileHook<R>;
  /** Undo the effect. Without it, a "compensate" answer leaves the record for review. */
  readonly compensate?: BivariantCompensate<R> | undefined;
  // Declared here, not picked: leaving it out has a consequence of its own (plaintext the tool refuses).
  /**
   * The tool's `encryption`: give the same as `idempotent()`. Outcomes the reconciler records are then
   * sealed for their record; without it they are stored in plaintext, which the tool refuses to replay.
   */
  readonly encryption?: EncryptionOptions | undefined;
}
