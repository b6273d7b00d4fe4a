/**
 * An undo is an effect too: a refund made twice is money lost. So a compensation runs through
 * `idempotent()` as a tool of its own, `<tool>:compensate`, irreversible (a compensation that threw or
 * whose worker died leaves its outcome unknown instead of undoing twice), under a key no caller can reach.
 * `saga.compensate()` and the reconciler both undo through it, so one record is undone at most once
 * whichever of them asks, however often, and whatever crashes in between.
 */

import type { CompensateHook } from "../reconcile/hooks.js";
import { sha256Hex } from "./fingerprint.js";
import { type IdempotentTool, idempotent, type ToolContext } from "./idempotent.js";
import { compensationKeyPrefix, ownCompensationCall } from "./keys.js";
import { Effect, type RecordOptions } from "./options.js";
import type { IdempotencyRecord } from "./store.js";

/** One undo: the record, what to undo, and why (the reason is words: it is not fingerprinted). */
export interface Undo<S> {
  readonly record: IdempotencyRecord;
  readonly step: S | undefined;
  readonly reason: string;
}

/** The undone tool's record options that its compensation records share. */
export interface CompensationOptions
  extends Pick<
    RecordOptions<unknown, unknown>,
    "store" | "ttlMs" | "leaseMs" | "waitMs" | "redact" | "encryption" | "clock" | "onEvent"
  > {
  /** The name of the tool whose records it undoes. */
  readonly tool: string;
}

/** A tool's compensation, undone at most once per record: call it with {@link undoOnce}. */
export type Compensation<S> = IdempotentTool<Undo<S>, unknown>;

export function compensation<S>(
  compensate: CompensateHook<S>,
  options: CompensationOptions,
): Compensation<S> {
  return idempotent(
    (u: Undo<S>, { signal }: ToolContext) =>
      compensate(u.record, {
        key: u.record.key,
        scope: u.record.scope,
        tool: u.record.tool,
        signal,
        step: u.step,
        reason: u.reason,
      }),
    {
      name: `${options.tool}:compensate`,
      store: options.store,
      effect: Effect.irreversible,
      // The key names the record; the reason is words, and another ask with other words is the same undo.
      significant: () => null,
      // That fingerprint is a constant: keying it would only tie the undo's replays to a key's life.
      fingerprintKeys: false,
      ttlMs: options.ttlMs,
      leaseMs: options.leaseMs,
      waitMs: options.waitMs,
      redact: options.redact,
      encryption: options.encryption,
      clock: options.clock,
      onEvent: options.onEvent,
    },
  );
}

/**
 * Undo one record at most once: the first ask runs `compensate`, every later one (after a crash, from the
 * reconciler's next pass, from another process) replays what it returned, or fails closed with
 * `outcome_unknown` if it threw or its worker died. `signal` ends the wait for an undo already running
 * elsewhere, and aborts this one's `context.signal`.
 */
export async function undoOnce<S>(
  undo: Compensation<S>,
  record: IdempotencyRecord,
  step: S | undefined,
  reason: string,
  signal?: AbortSignal,
): Promise<unknown> {
  const call = ownCompensationCall({ key: compensationKey(record), scope: record.scope, signal });
  return (await undo({ record, step, reason }, call)).result;
}

/**
 * Where the undo of a record is recorded: a key only idempotool's own call may use, one per record (the same
 * key reused after its record expired is a new effect, with an undo of its own).
 */
function compensationKey(record: IdempotencyRecord): string {
  return `${compensationKeyPrefix}${sha256Hex(`${record.key}\u0000${record.createdAt}`)}`;
}
