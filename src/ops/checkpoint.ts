/**
 * OP-8, a durable pre-call checkpoint for plain loops with no durable execution of their own:
 * `in_progress` is written before the call and `completed` after, so a crash between them leaves
 * evidence, and a retry fails closed (or waits) instead of running the effect again. The claim is
 * renewed while the call runs, as `idempotent()` renews its own.
 */

import { randomUUID } from "node:crypto";
import { monotonicNow, systemClock } from "../core/clock.js";
import {
  ErrorCode,
  IdempotencyError,
  KeyConflictError,
  KeyInUseError,
  LeaseLostError,
  OutcomeUnknownError,
  ResultTooLargeError,
  ResultUnserializableError,
  retryAfterMsOf,
  StoreUnavailableError,
} from "../core/errors.js";
import { fingerprintMatches, fingerprintWith } from "../core/keyed-fingerprint.js";
import { validateKey } from "../core/keys.js";
import { lateClaim, startLease } from "../core/lease.js";
import {
  durationOption,
  invalidOptionFor,
  maxTtlMs,
  sizeOption,
  toolNameOption,
} from "../core/option-checks.js";
import { defaults, type RecordOptions } from "../core/options.js";
import { ReplayedFailureError } from "../core/outcomes.js";
import { type RecordBinding, resolveCodec } from "../core/result-codec.js";
import {
  decodeFailure,
  decodeResult,
  decodeResultProblem,
  encodeFailure,
  encodeResult,
} from "../core/serialize.js";
import {
  type ClaimResult,
  type IdempotencyRecord,
  type IdempotencyStore,
  RecordStatus,
  settleOwn,
} from "../core/store.js";
import { iso } from "../core/time.js";

/**
 * What a checkpoint guards: one call of one tool under one key. The record options are those of
 * `idempotent()` ({@link RecordOptions}).
 */
export interface CheckpointOptions
  extends Pick<
    RecordOptions<unknown, unknown>,
    "ttlMs" | "waitMs" | "maxResultBytes" | "redact" | "encryption" | "fingerprintKeys" | "clock"
  > {
  /** The tool's name, kept in the record. */
  readonly tool: string;
  /** Stable across every repeat of one logical operation (persist it before the loop calls the tool). */
  readonly key: string;
  /** The call's arguments: a key reused with other arguments is `idempotency_key_conflict`. */
  readonly args: unknown;
  /** A namespace (tenant, user, agent). Default "default". */
  readonly scope?: string | undefined;
  // Declared here, not picked: a checkpoint renews its claim until it is settled or disposed, not while a
  // tool runs.
  /**
   * How long the claim holds without renewal, whole ms from 1 to 2^31 − 1. The checkpoint renews it every
   * third of `leaseMs` until it is settled or disposed, so a long call stays live; a checkpoint whose process
   * died goes stale (outcome unknown) once `leaseMs` passes. Default 60 s.
   */
  readonly leaseMs?: number | undefined;
}

/** A claimed (or already completed) call. Dispose it with `await using`, or call a settle in `finally`. */
export interface Checkpoint<R = unknown> extends AsyncDisposable {
  /** Set when the call already completed: skip the call and use `replay.result`. */
  readonly replay: { readonly result: R; readonly original_called_at: string } | undefined;
  /** Whether the call should run now (this checkpoint owns the claim). */
  readonly shouldRun: boolean;
  readonly key: string;
  /**
   * Aborts with a `LeaseLostError` (`lease_lost`) when a renewal finds the claim gone (another worker took
   * the key over, or the record was deleted), or when no renewal reached the store before the lease passed
   * (another worker may take it over from then on). Pass it to the call so it stops early; a settle after
   * the key was taken over is refused with `lease_lost`. Never aborts on a replay, which holds no claim.
   */
  readonly signal: AbortSignal;
  /** Record the result; repeats replay it. Throws `lease_lost` if another caller took the key over. */
  complete(result: R): Promise<void>;
  /** Record a definitive failure (a card declined); repeats get it again as a replayed failure. */
  fail(error: unknown, data?: unknown): Promise<void>;
  /** Record that nobody knows whether the effect happened; repeats fail closed with `outcome_unknown`. */
  unknown(error: unknown): Promise<void>;
  /** The effect certainly did not happen: free the key so a retry runs. */
  release(): Promise<void>;
}

/**
 * Write `in_progress` before a side effect, and settle after it.
 * - the key completed earlier → `cp.replay` holds the stored result: skip the call;
 * - it failed definitively → throws the replayed failure;
 * - another live checkpoint holds it → waits up to `waitMs`, then `idempotency_key_in_use`;
 * - a checkpoint that was never settled (crash, early exit) past its lease, or an unknown outcome →
 *   `outcome_unknown`: fail closed until someone checks whether the effect happened.
 *
 * While it holds the claim, the checkpoint renews it every third of `leaseMs`, so a call longer than its
 * lease is never judged stale by another worker or the reconciler; `cp.signal` aborts if the claim is
 * lost anyway. Settling or disposing the checkpoint stops the renewal. Disposing a checkpoint that was
 * neither completed, failed nor released leaves it in progress on purpose: that is the evidence a crash
 * would have left, and it goes stale once its lease passes.
 *
 * @example
 * import { memoryStore } from "idempotool";
 * import { checkpoint } from "idempotool/ops";
 *
 * const store = memoryStore();
 * const sendSms = async (to: string, _signal: AbortSignal) => ({ sid: `sms-${to}` });
 * for (const call of [{ id: "turn-7-sms", to: "+15550100" }]) {
 *   await using cp = await checkpoint<{ sid: string }>(store, { tool: "send_sms", key: call.id, args: { to: call.to } });
 *   if (cp.replay) continue; // sent before: cp.replay.result is what it returned
 *   // cp.signal aborts if another worker takes the key from us: the call can stop early.
 *   await cp.complete(await sendSms(call.to, cp.signal));
 * }
 */
export async function checkpoint<R = unknown>(
  store: IdempotencyStore,
  options: CheckpointOptions,
): Promise<Checkpoint<R>> {
  const owner = "checkpoint()";
  toolNameOption(owner, "tool", options.tool);
  const key = validateKey(options.key, options.tool);
  const scope = options.scope ?? "default";
  const clock = options.clock ?? systemClock;
  const leaseMs = durationOption(owner, "leaseMs", options.leaseMs, defaults.leaseMs);
  const ttlMs = durationOption(owner, "ttlMs", options.ttlMs, defaults.ttlMs, { max: maxTtlMs });
  const waitMs = durationOption(owner, "waitMs", options.waitMs, defaults.waitMs, { min: 0 });
  const maxResultBytes = sizeOption(owner, "maxResultBytes", options.maxResultBytes, defaults.maxResultBytes);
  const codec = resolveCodec(
    options.redact,
    options.encryption,
    invalidOptionFor(owner),
    options.fingerprintKeys,
  );
  const print = fingerprintWith(codec?.fingerprintKeys, options.args);
  const bound = (record: IdempotencyRecord): RecordBinding | undefined =>
    codec?.encryption === undefined
      ? undefined
      : { scope, key, tool: options.tool, fingerprint: record.fingerprint };
  const token = randomUUID();
  const startedAt = clock.now();
  let pollMs = 10;

  for (;;) {
    let claim: ClaimResult;
    let sentAt = monotonicNow(clock);
    try {
      claim = await store.claim({
        scope,
        key,
        tool: options.tool,
        fingerprint: print,
        token,
        leaseMs,
        ttlMs,
        now: clock.now(),
      });
    } catch (error) {
      // The claim may have landed with its reply lost: nothing ran under it, so free the key if we can.
      await store.release({ scope, key, token }).catch(() => false);
      throw error instanceof IdempotencyError ? error : new StoreUnavailableError("claim", { cause: error });
    }
    const record = claim.record;
    if (claim.claimed) return await owned(record, sentAt);
    if (record.token === token) {
      // Our own claim, seen through a resent command: nothing ran under it yet.
      if (record.leaseExpiresAt > claim.now) return await owned(record, sentAt);
      sentAt = monotonicNow(clock);
      const taken = await storeCall("takeover", () =>
        store.takeover({ scope, key, fromToken: token, token, leaseMs, ttlMs, now: clock.now() }),
      );
      if (taken) return await owned(taken, sentAt);
      continue;
    }
    if (record.tool !== options.tool || !fingerprintMatches(codec, record.fingerprint, print, options.args)) {
      throw new KeyConflictError(record, print, options.tool);
    }
    switch (record.status) {
      case RecordStatus.completed: {
        const problem =
          record.result === null ? decodeResultProblem(record.error, codec, bound(record)) : undefined;
        // It ran; only its result was not kept. Never run again, and say why there is nothing to replay.
        if (problem?.code === ErrorCode.resultTooLarge) {
          throw new ResultTooLargeError(problem.sizeBytes, problem.maxBytes, record);
        }
        if (problem?.code === ErrorCode.resultUnserializable)
          throw new ResultUnserializableError(record, problem.reason);
        return replayed(record);
      }
      case RecordStatus.failed:
        throw new ReplayedFailureError(
          decodeFailure(RecordStatus.failed, record.error, codec, bound(record)),
          iso(record.createdAt),
          key,
        );
      case RecordStatus.unknown:
        throw new OutcomeUnknownError(
          record,
          `the attempt at ${iso(record.updatedAt)} ended without a known outcome`,
        );
      case RecordStatus.inProgress: {
        if (record.leaseExpiresAt <= claim.now) {
          throw new OutcomeUnknownError(
            record,
            `a checkpoint claimed it at ${iso(record.createdAt)} and was never settled (the process may have crashed after the effect)`,
          );
        }
        const waited = clock.now() - startedAt;
        if (waited >= waitMs) {
          throw new KeyInUseError(record, waited, retryAfterMsOf(record, claim.now));
        }
        await clock.sleep(Math.min(pollMs, waitMs - waited));
        pollMs = Math.min(pollMs * 2, 250);
      }
    }
  }

  function replayed(record: IdempotencyRecord): Checkpoint<R> {
    const done = async () => {
      throw new IdempotencyError(
        ErrorCode.invalidArguments,
        `checkpoint(${key}): it is a replay; there is nothing to settle.`,
      );
    };
    return {
      replay: {
        result: decodeResult(record.result, codec, bound(record)) as R,
        original_called_at: iso(record.createdAt),
      },
      shouldRun: false,
      key,
      signal: new AbortController().signal,
      complete: done,
      fail: done,
      unknown: done,
      release: done,
      [Symbol.asyncDispose]: async () => undefined,
    };
  }

  /** The claim (or takeover) sent at `sentAt` took `record`: the caller runs the effect under its lease. */
  async function owned(record: IdempotencyRecord, sentAt: number): Promise<Checkpoint<R>> {
    const late = lateClaim({ clock, leaseMs }, sentAt);
    if (late !== undefined) {
      // Nothing ran under it: free the key if it is still ours.
      await store.release({ scope, key, token }).catch(() => false);
      throw late;
    }
    // A failed renewal is retried on the next beat: the settle's fencing decides whether the claim held.
    const lease = startLease({ store, clock, leaseMs, ttlMs }, record, undefined, () => {}, {
      claimSentAt: sentAt,
    });
    let settled = false;
    const settle = async (
      status: "completed" | "failed" | "unknown",
      result: string | null,
      error: string | null,
    ) => {
      if (settled)
        throw new IdempotencyError(ErrorCode.invalidArguments, `checkpoint(${key}): already settled.`);
      await lease.stop();
      // Refused, or our own settle resent after its reply was lost: settleOwn reads back which.
      const done = await storeCall(
        "settle",
        () =>
          settleOwn(store, {
            scope,
            key,
            token: record.token,
            status,
            result,
            error,
            ttlMs,
            now: clock.now(),
          }),
        "The outcome is not recorded: the record stays in progress until its lease passes.",
      );
      if (done === null) throw new LeaseLostError(key);
      settled = true;
    };
    return {
      replay: undefined,
      shouldRun: true,
      key,
      get signal() {
        return lease.signal;
      },
      async complete(result) {
        const encoded = encodeResult(
          result,
          maxResultBytes,
          codec,
          bound(record),
          store.maxStoredResultBytes,
        );
        await settle(
          RecordStatus.completed,
          encoded.ok ? encoded.text : null,
          encoded.ok ? null : encoded.error,
        );
      },
      fail: (error, data) =>
        settle(
          RecordStatus.failed,
          null,
          encodeFailure(
            RecordStatus.failed,
            error,
            data,
            maxResultBytes,
            codec,
            bound(record),
            store.maxStoredResultBytes,
          ),
        ),
      unknown: (error) =>
        settle(
          RecordStatus.unknown,
          null,
          encodeFailure(
            RecordStatus.unknown,
            error,
            undefined,
            maxResultBytes,
            codec,
            bound(record),
            store.maxStoredResultBytes,
          ),
        ),
      async release() {
        if (settled)
          throw new IdempotencyError(ErrorCode.invalidArguments, `checkpoint(${key}): already settled.`);
        await lease.stop();
        const released = await storeCall(
          "release",
          () => store.release({ scope, key, token: record.token }),
          "The key stays claimed until its lease passes.",
        );
        if (!released) throw new LeaseLostError(key);
        settled = true;
      },
      // Left unsettled on purpose: the record stays in progress as evidence, goes stale once its lease
      // passes, and a retry fails closed.
      [Symbol.asyncDispose]: async () => {
        await lease.stop();
      },
    };
  }
}

/** A store operation; a failure is `store_unavailable`, saying what it means (by default, that nothing ran). */
async function storeCall<T>(operation: string, run: () => Promise<T>, consequence?: string): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof IdempotencyError) throw error;
    throw new StoreUnavailableError(operation, { cause: error, ...(consequence ? { consequence } : {}) });
  }
}
