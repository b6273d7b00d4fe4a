import {
  type Call,
  type Envelope,
  emit,
  envelope,
  errorMessage,
  leaseLost,
  releaseFenced,
  releaseUnrun,
  settleFenced,
  storeFailure,
  type Tool,
  type ToolContext,
} from "./call.js";
import {
  ErrorCode,
  IdempotencyError,
  iso,
  KeyConflictError,
  KeyInUseError,
  OutcomeUnknownError,
  ResultTooLargeError,
  ResultUnserializableError,
  retryAfterMsOf,
  StoreUnavailableError,
} from "./errors.js";
import { beginFlight, endFlight, waitForOutcome } from "./in-flight.js";
import { fingerprintWith, sameFingerprint } from "./keyed-fingerprint.js";
import { startLease } from "./lease.js";
import {
  type CallOptions,
  Effect,
  type IdempotentOptions,
  type ResolvedOptions,
  resolveOptions,
} from "./options.js";
import { DefinitiveFailure, NotExecuted, ReplayedFailureError } from "./outcomes.js";
import { ownerToken } from "./owner-token.js";
import { bindingFor } from "./record-binding.js";
import {
  decodeFailure,
  decodeResult,
  decodeResultProblem,
  type EncodedResult,
  encodeFailure,
  encodeResult,
} from "./serialize.js";
import {
  findSimilar,
  type RecentSimilarCall,
  rememberSimilar,
  similarMarkerKey,
  similarMarkerPrefix,
} from "./similar.js";
import { type ClaimResult, type IdempotencyRecord, RecordStatus } from "./store.js";
import { loneSurrogateIndex } from "./unicode.js";
import { failureNote, resolveUnknown, takeOver } from "./unknown-outcome.js";
/** A tool made safe to call twice. */
export interface IdempotentTool<A, R> {
  (args: A, call?: CallOptions): Promise<Envelope<Awaited<R>>>;
  readonly toolName: string;
  readonly effect: Effect;
  readonly ttlMs: number;
  readonly waitMs: number;
}

const maxKeyLength = 255;
/**
 * Wrap a side-effectful tool so every repeat of one intended action becomes a no-op that
 * returns the original outcome.
 *
 * @example
 * import { idempotent, memoryStore } from "idempotool";
 *
 * const sendEmail = idempotent(
 *   async (args: { to: string; subject: string }) => ({ messageId: `m-${args.to}` }),
 *   { name: "send_email", store: memoryStore(), effect: "irreversible" },
 * );
 * const first = await sendEmail({ to: "alice@example.com", subject: "Hi" }, { key: "turn-7-alice" });
 * const again = await sendEmail({ to: "alice@example.com", subject: "Hi" }, { key: "turn-7-alice" });
 * // again.was_replay === true, again.result equals first.result, and one email went out.
 */
export function idempotent<A, R>(
  fn: Tool<A, R>,
  options: IdempotentOptions<A, Awaited<R>>,
): IdempotentTool<A, R> {
  if (typeof fn !== "function") {
    throw new IdempotencyError(
      ErrorCode.invalidOptions,
      "idempotent(): the first argument must be the tool function.",
    );
  }
  const resolved = resolveOptions(options);
  const wrapped = (args: A, call: CallOptions = {}) => callOnce(fn, resolved, args, call);
  return Object.assign(wrapped, {
    toolName: resolved.name,
    effect: resolved.effect,
    ttlMs: resolved.ttlMs,
    waitMs: resolved.waitMs,
  });
}

async function callOnce<A, R>(
  fn: Tool<A, R>,
  o: ResolvedOptions<A, Awaited<R>>,
  args: A,
  options: CallOptions,
): Promise<Envelope<Awaited<R>>> {
  // Bad input is rejected here, before the store or the tool is touched.
  const key = validateKey(options.key ?? o.key?.(args, options), o.name);
  const scope = validateScope(options.scope);
  const print = fingerprintWith(o.codec?.fingerprintKeys, o.significant ? o.significant(args) : args, {
    bigint: o.bigint,
  });
  const c: Call<A, R> = {
    fn,
    o,
    args,
    key,
    scope,
    fingerprint: print,
    similarKey: o.similar
      ? similarMarkerKey(o.name, o.similar.pick(args), o.bigint, o.codec?.fingerprintKeys)
      : undefined,
    startedAt: o.clock.now(),
    signal: options.signal,
    callId: undefined,
  };

  // One token for every claim this call makes: a claim whose reply was lost and that the client resent
  // (or that this loop makes again) finds its own record, and a claim given up on can be released.
  const token = ownerToken();
  let waitingSince: number | undefined;
  let pollMs = 10;
  for (;;) {
    if (options.signal?.aborted) {
      if (waitingSince !== undefined) emit(c, "in_flight_gave_up", undefined, options.signal.reason);
      options.signal.throwIfAborted();
    }
    let claim: ClaimResult;
    try {
      claim = await o.store.claim({
        scope,
        key,
        tool: o.name,
        fingerprint: print,
        token,
        leaseMs: o.leaseMs,
        ttlMs: o.ttlMs,
        now: o.clock.now(),
      });
    } catch (error) {
      const failure = storeFailure(c, "claim", error);
      // The claim may have landed with its reply lost: the tool has not run, so free the key.
      await releaseUnrun(c, token);
      throw failure;
    }
    if (claim.claimed) return await execute(c, claim.record);

    const record = claim.record;
    if (record.token === token) {
      // Our own claim, seen through a resent command: the tool has not run under it.
      if (record.leaseExpiresAt > claim.now) return await execute(c, record);
      // Its lease passed before we heard of it: take it back the way any stale claim is taken.
      const taken = await takeOver(c, record);
      if (taken) return await execute(c, taken);
      continue;
    }
    if (record.tool !== o.name || !sameFingerprint(c, record.fingerprint)) {
      const error = new KeyConflictError(record, print, o.name);
      emit(c, "conflict", undefined, error);
      throw error;
    }
    switch (record.status) {
      case RecordStatus.completed:
        return replayCompleted(c, record);
      case RecordStatus.failed:
        emit(c, "replay", record.attempts);
        throw new ReplayedFailureError(
          decodeFailure(RecordStatus.failed, record.error, c.o.codec, bindingFor(c, record)),
          iso(record.createdAt),
          key,
        );
      case RecordStatus.unknown: {
        const reason = `the attempt at ${iso(record.updatedAt)} ended without a known outcome${failureNote(c, record)}`;
        const outcome = await resolveUnknown(c, record, reason, execute);
        if (outcome) return outcome;
        continue;
      }
      case RecordStatus.inProgress: {
        if (record.leaseExpiresAt <= claim.now) {
          const reason =
            `the worker that claimed it stopped renewing its lease at ${iso(record.leaseExpiresAt)} ` +
            "(it may have crashed after the effect)";
          const outcome = await resolveUnknown(c, record, reason, execute);
          if (outcome) return outcome;
          continue;
        }
        const now = o.clock.now();
        if (waitingSince === undefined) {
          waitingSince = now;
          emit(c, "in_flight_wait", record.attempts);
        }
        const waited = now - waitingSince;
        if (waited >= o.waitMs) {
          const error = new KeyInUseError(record, waited, retryAfterMsOf(record, claim.now));
          emit(c, "in_flight_gave_up", record.attempts, error);
          throw error;
        }
        try {
          await waitForOutcome(
            o.store,
            scope,
            key,
            o.clock,
            Math.min(jitter(pollMs), o.waitMs - waited),
            c.signal,
          );
        } catch (error) {
          // Only the caller's signal ends a wait early.
          emit(c, "in_flight_gave_up", record.attempts, error);
          throw error;
        }
        pollMs = Math.min(pollMs * 2, 250);
        continue;
      }
    }
  }
}

/** Run the tool under a claim this call owns, and record what happened. */
async function execute<A, R>(c: Call<A, R>, record: IdempotencyRecord): Promise<Envelope<Awaited<R>>> {
  emit(c, "run", record.attempts);
  const flight = beginFlight(c.o.store, c.scope, c.key);
  try {
    const similar = c.similarKey === undefined ? undefined : await lookUpSimilar(c, c.similarKey);
    const lease = startLease(c.o, record, c.signal, (error) => emit(c, "store_error", undefined, error));
    let result: Awaited<R>;
    try {
      result = await c.fn(c.args, {
        key: c.key,
        scope: c.scope,
        tool: c.o.name,
        attempt: record.attempts,
        get signal() {
          return lease.signal;
        },
      });
    } catch (error) {
      await lease.stop();
      return await settleThrow(c, record, error);
    }
    // Most calls end before their first renewal: then there is nothing to wait for.
    const renewing = lease.stop();
    if (renewing) await renewing;
    const encoded = encodeResult(result, c.o.maxResultBytes, c.o.codec, bindingFor(c, record));
    const settled = await settleFenced(
      c,
      record,
      RecordStatus.completed,
      encoded.ok ? encoded.text : null,
      encoded.ok ? null : encoded.error,
    );
    const envelope = completedEnvelope(c, record, result, encoded, settled);
    if (c.similarKey === undefined) return envelope;
    await recordSimilar(c, c.similarKey, record);
    return similar ? { ...envelope, recent_similar_call: similar } : envelope;
  } finally {
    endFlight(flight);
  }
}

/** The near-duplicate hint is advisory: a store error here costs the hint, never the call. */
async function lookUpSimilar<A, R>(
  c: Call<A, R>,
  similarKey: string,
): Promise<RecentSimilarCall | undefined> {
  try {
    return await findSimilar(c.o.store, c.scope, similarKey, c.key, c.o.clock.now());
  } catch (error) {
    emit(c, "store_error", undefined, new StoreUnavailableError("similar-call lookup", { cause: error }));
    return undefined;
  }
}

async function recordSimilar<A, R>(
  c: Call<A, R>,
  similarKey: string,
  record: IdempotencyRecord,
): Promise<void> {
  if (c.o.similar === undefined) return;
  try {
    const now = c.o.clock.now();
    await rememberSimilar(c.o.store, c.scope, similarKey, c.key, record.createdAt, now, c.o.similar.windowMs);
  } catch (error) {
    emit(c, "store_error", undefined, new StoreUnavailableError("similar-call record", { cause: error }));
  }
}

/** What the caller of a completed run gets, once its settle has been tried (no await: one frame less). */
function completedEnvelope<A, R>(
  c: Call<A, R>,
  record: IdempotencyRecord,
  result: Awaited<R>,
  encoded: EncodedResult,
  settled: IdempotencyRecord | "lost" | "store_failed",
): Envelope<Awaited<R>> {
  if (settled === "lost") throw leaseLost(c, record);
  const notKept = encoded.ok
    ? undefined
    : encoded.problem.code === ErrorCode.resultTooLarge
      ? new ResultTooLargeError(encoded.problem.sizeBytes, encoded.problem.maxBytes)
      : new IdempotencyError(ErrorCode.resultUnserializable, encoded.problem.reason);
  emit(c, "completed", record.attempts, notKept);
  // The effect happened: this caller gets its result even if the store could not record it.
  if (settled === "store_failed") {
    return envelope(c, result, false, record.createdAt, c.o.clock.now() + c.o.ttlMs);
  }
  return envelope(c, result, false, settled.createdAt, settled.expiresAt);
}

/** The tool threw: decide by what it declared and by the effect class. Always throws. */
async function settleThrow<A, R>(c: Call<A, R>, record: IdempotencyRecord, error: unknown): Promise<never> {
  if (error instanceof NotExecuted) {
    await releaseFenced(c, record);
    throw error.cause;
  }
  if (error instanceof DefinitiveFailure) {
    const settled = await settleFenced(
      c,
      record,
      RecordStatus.failed,
      null,
      encodeFailure(RecordStatus.failed, error.cause, error.data, c.o.codec, bindingFor(c, record)),
    );
    if (settled === "lost") throw leaseLost(c, record, error.cause);
    emit(c, "failed", record.attempts, error.cause);
    throw error.cause;
  }
  if (c.o.effect === Effect.nativeKey || c.o.effect === Effect.ownedStore) {
    await releaseFenced(c, record);
    throw error;
  }
  const settled = await settleFenced(
    c,
    record,
    RecordStatus.unknown,
    null,
    encodeFailure(RecordStatus.unknown, error, undefined, c.o.codec, bindingFor(c, record)),
  );
  if (settled === "lost") throw leaseLost(c, record, error);
  const kept = settled === "store_failed" ? record : settled;
  const unknown = new OutcomeUnknownError(
    kept,
    `the tool threw before reporting an outcome (${errorMessage(error)}), and its ${c.o.effect} effect may have happened`,
    { cause: error },
  );
  emit(c, "outcome_unknown", record.attempts, unknown);
  throw unknown;
}

function replayCompleted<A, R>(c: Call<A, R>, record: IdempotencyRecord): Envelope<Awaited<R>> {
  emit(c, "replay", record.attempts);
  if (record.result === null) {
    const problem = decodeResultProblem(record.error, c.o.codec, bindingFor(c, record));
    if (problem?.code === ErrorCode.resultTooLarge) {
      throw new ResultTooLargeError(problem.sizeBytes, problem.maxBytes, record);
    }
    if (problem?.code === ErrorCode.resultUnserializable) {
      throw new ResultUnserializableError(record, problem.reason);
    }
  }
  return envelope(
    c,
    decodeResult(record.result, c.o.codec, bindingFor(c, record)) as Awaited<R>,
    true,
    record.createdAt,
    record.expiresAt,
  );
}

/**
 * Check a caller's key: a string of 1–255 characters. A missing key is an error, never a fresh UUID.
 * @example
 * validateKey("turn-7-alice", "send_email"); // "turn-7-alice"
 */
export function validateKey(key: unknown, tool: string): string {
  if (key === undefined || key === null) {
    throw new IdempotencyError(
      ErrorCode.keyMissing,
      `${tool}: no idempotency key. Pass { key }, chosen by the caller before the call and stable across ` +
        "every repeat (see keys.fromState and keys.intent); idempotool never makes one up.",
    );
  }
  if (typeof key !== "string") {
    throw new IdempotencyError(
      ErrorCode.keyInvalid,
      `${tool}: the idempotency key must be a string, got ${typeof key}.`,
    );
  }
  if (key.length === 0 || key.length > maxKeyLength) {
    throw new IdempotencyError(
      ErrorCode.keyInvalid,
      `${tool}: the idempotency key must be 1–${maxKeyLength} characters, got ${key.length}.`,
    );
  }
  if (key.startsWith(similarMarkerPrefix)) {
    throw new IdempotencyError(
      ErrorCode.keyInvalid,
      `${tool}: idempotency keys starting with "${similarMarkerPrefix}" are reserved for idempotool's ` +
        "near-duplicate markers; choose another key.",
    );
  }
  const lone = loneSurrogateIndex(key);
  if (lone !== -1) {
    throw new IdempotencyError(
      ErrorCode.keyInvalid,
      `${tool}: the idempotency key has a lone UTF-16 surrogate at index ${lone} (a string cut in the middle ` +
        "of a character?). Stores keep it as U+FFFD, so two keys that differ only there would be one record.",
    );
  }
  return key;
}

function validateScope(scope: unknown): string {
  if (scope === undefined) return "default";
  if (typeof scope !== "string" || scope.length === 0 || scope.length > maxKeyLength) {
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      `The scope must be a string of 1–${maxKeyLength} characters, got ${typeof scope === "string" ? `${scope.length} characters` : typeof scope}.`,
    );
  }
  const lone = loneSurrogateIndex(scope);
  if (lone !== -1) {
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      `The scope has a lone UTF-16 surrogate at index ${lone}: stores keep it as U+FFFD, so two scopes that ` +
        "differ only there would be one.",
    );
  }
  return scope;
}

/** Spread pollers apart so a crowd of waiters does not hit the store in lockstep. */
function jitter(ms: number): number {
  return Math.round(ms * (0.75 + Math.random() * 0.5));
}

export type { CallOptions, Envelope, IdempotentOptions, RecentSimilarCall, Tool, ToolContext };
