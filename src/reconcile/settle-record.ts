/** What the hook answered, and how the reconciler carries it out under the claim it took. */

import { settleAttempts } from "../core/call.js";
import { undoOnce } from "../core/compensation.js";
import type { Lease } from "../core/lease.js";
import { defaults } from "../core/options.js";
import type { RecordBinding, ResultCodec } from "../core/result-codec.js";
import { encodeFailure, encodeResult, withReviewNote } from "../core/serialize.js";
import { type IdempotencyRecord, RecordStatus, settleOwn } from "../core/store.js";
import { iso } from "../core/time.js";
import { Decision } from "./decision.js";
import type { ReconcileOutcome, ReconcileTool } from "./hooks.js";
import type { Resolved } from "./reconcile.js";

/** A record's outcome recorded by a compensation: repeats get it back, and the tool never runs again for the key. */
export class CompensatedError extends Error {
  override name = "CompensatedError";
  readonly code = "compensated";
}

export type Answer = { ok: true; outcome: ReconcileOutcome } | { ok: false; error: unknown };

export async function ask(
  tool: ReconcileTool,
  record: IdempotencyRecord,
  signal: AbortSignal,
): Promise<Answer> {
  try {
    const outcome = await tool.verify(record, {
      key: record.key,
      scope: record.scope,
      tool: record.tool,
      signal,
    });
    return { ok: true, outcome };
  } catch (error) {
    return { ok: false, error };
  }
}

/** What an answer means, before anything is applied. */
export function plan(
  answer: Answer,
  tool: ReconcileTool,
): { decision: Decision; reason: string; error?: unknown } {
  if (!answer.ok)
    return {
      decision: Decision.error,
      reason: `the hook failed: ${message(answer.error)}`,
      error: answer.error,
    };
  const outcome = answer.outcome;
  switch (outcome?.status) {
    case "completed":
      return { decision: Decision.completed, reason: "the hook found the effect; settle completed" };
    case "failed":
      return { decision: Decision.failed, reason: "the hook found a definitive failure; settle failed" };
    case "not_executed":
      return { decision: Decision.released, reason: "the hook found no effect; release the key" };
    case "compensate":
      return tool.compensate
        ? {
            decision: Decision.compensated,
            reason: `compensate${outcome.reason ? ` (${outcome.reason})` : ""}`,
          }
        : {
            decision: Decision.needsReview,
            reason: "the hook asks for compensation, but the tool has no compensate",
          };
    case "unknown":
      return {
        decision: Decision.needsReview,
        reason: `the hook cannot tell${outcome.reason ? `: ${outcome.reason}` : ""}`,
      };
    default:
      return { decision: Decision.needsReview, reason: "the hook answered an unrecognised outcome" };
  }
}

/**
 * Carry out the answer under the claim just taken, held by `lease` while a compensation runs and stopped
 * before any write; anything short of an outcome puts the record back as unknown.
 */
export async function apply(
  o: Resolved,
  tool: ReconcileTool,
  taken: IdempotencyRecord,
  answer: Answer,
  lease: Lease,
): Promise<{ decision?: Decision; reason?: string; error?: unknown }> {
  const ttlMs = tool.ttlMs ?? defaults.ttlMs;
  const id = { scope: taken.scope, key: taken.key, token: taken.token, ttlMs };
  const settle = async (
    status: "completed" | "failed" | "unknown",
    result: string | null,
    error: string | null,
  ) => {
    await lease.stop();
    // A store blip must not leave the record in progress: the next pass would take it over and do the
    // hook's work (a compensation) again. So try a few times, and read back before calling it lost: a
    // refusal can be our own settle, applied with its reply lost.
    let lastError: unknown;
    for (let attempt = 0; attempt < settleAttempts; attempt++) {
      let settled: IdempotencyRecord | null;
      try {
        settled = await settleOwn(o.store, { ...id, status, result, error, now: o.clock.now() });
      } catch (failure) {
        lastError = failure;
        continue;
      }
      if (settled) return;
      throw new Error("the reconciler lost its claim on the record before settling it");
    }
    throw lastError;
  };
  const codec = o.codecs.get(taken.tool);
  const binding: RecordBinding | undefined =
    codec?.encryption === undefined
      ? undefined
      : { scope: taken.scope, key: taken.key, tool: taken.tool, fingerprint: taken.fingerprint };
  const maxBytes = tool.maxResultBytes ?? defaults.maxResultBytes;
  const storeMax = o.store.maxStoredResultBytes;
  // The record keeps the hook's answer, so the review queue can show what was asked and when.
  const backToUnknown = (why?: string) =>
    settle(
      RecordStatus.unknown,
      null,
      withVerifyNote(taken, answer, why, o.clock.now(), codec, binding, o.store.maxStoredResultBytes),
    );
  try {
    const outcome = answer.ok ? answer.outcome : undefined;
    switch (outcome?.status) {
      case "completed": {
        const encoded = encodeResult(outcome.result, maxBytes, codec, binding, storeMax);
        await settle(
          RecordStatus.completed,
          encoded.ok ? encoded.text : null,
          encoded.ok ? null : encoded.error,
        );
        return {};
      }
      case "failed":
        await settle(
          RecordStatus.failed,
          null,
          encodeFailure(RecordStatus.failed, outcome.error, outcome.data, maxBytes, codec, binding, storeMax),
        );
        return {};
      case "not_executed":
        await lease.stop();
        if (!(await o.store.release({ scope: taken.scope, key: taken.key, token: taken.token }))) {
          throw new Error("the reconciler lost its claim on the record before releasing it");
        }
        return {};
      case "compensate": {
        const undo = o.undo(taken.tool);
        if (!undo) break;
        const reason = outcome.reason ?? "the reconciler found an effect to undo";
        let undone: unknown;
        try {
          // At most once per record: after a crash between this undo and the settle below, the next pass
          // replays what it returned instead of undoing again.
          undone = await undoOnce(undo, taken, outcome.found, reason, lease.signal);
        } catch (error) {
          await backToUnknown(`compensate failed: ${message(error)}`);
          return { decision: Decision.error, reason: `compensate failed: ${message(error)}`, error };
        }
        const failure = new CompensatedError(`compensated by the reconciler: ${reason}`);
        const data = undone === undefined ? null : undone;
        await settle(
          RecordStatus.failed,
          null,
          encodeFailure(RecordStatus.failed, failure, data, maxBytes, codec, binding, storeMax),
        );
        return {};
      }
    }
    // Needs review, or the hook failed: callers fail closed at once instead of waiting out our lease.
    await backToUnknown();
    return {};
  } catch (error) {
    return { decision: Decision.error, reason: `the store refused the outcome: ${message(error)}`, error };
  }
}

/** The unknown record's failure with the hook's answer beside it (`review.verify`). */
function withVerifyNote(
  taken: IdempotencyRecord,
  answer: Answer,
  why: string | undefined,
  now: number,
  codec: ResultCodec | undefined,
  binding: RecordBinding | undefined,
  storeMaxBytes: number | undefined,
): string | null {
  const status = answer.ok ? String((answer.outcome as { status?: unknown } | undefined)?.status) : "error";
  const stated = answer.ok
    ? (answer.outcome as { reason?: unknown } | undefined)?.reason
    : message(answer.error);
  const reason = why ?? (typeof stated === "string" ? stated : undefined);
  const verify = { status, at: iso(now), ...(reason !== undefined ? { reason } : {}) };
  return withReviewNote(taken.error, { verify }, codec, binding, storeMaxBytes);
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
