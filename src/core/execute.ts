/**
 * A call that holds its claim: run the tool, or ask the verify hook about an earlier attempt, then record
 * what happened. Every step is chosen by the table in decide.ts; this module only carries it out.
 */
import {
  type Call,
  type Envelope,
  emit,
  envelope,
  errorMessage,
  leaseLost,
  releaseFenced,
  settleFenced,
  storeFailure,
  type ToolContext,
} from "./call.js";
import { Action, decide, type Facts } from "./decide.js";
import {
  ErrorCode,
  OutcomeUnknownError,
  ResultTooLargeError,
  ResultUnserializableError,
  StoreUnavailableError,
} from "./errors.js";
import { beginFlight, endFlight, type Flight } from "./in-flight.js";
import { type Lease, startLease } from "./lease.js";
import { DefinitiveFailure, NotExecuted, ReplayedFailureError } from "./outcomes.js";
import { bindingFor, decodeFailure, encodeFailure, encodeResult } from "./serialize.js";
import { findSimilar, type RecentSimilarCall, rememberSimilar } from "./similar.js";
import { type IdempotencyRecord, RecordStatus } from "./store.js";
import { iso } from "./time.js";

/**
 * Run the tool under a claim this call owns, and record what happened. The call's flight begins here, before
 * anything else (a repeat that joined its claim resumes after it and looks the flight up), and ends here once
 * the outcome is recorded; a throw before the tool is called frees the key.
 */
export async function execute<A, R>(c: Call<A, R>, record: IdempotencyRecord): Promise<Envelope<Awaited<R>>> {
  let flight: Flight;
  try {
    flight = beginFlight(c.o.store, c.scope, c.key, record.token);
  } catch (error) {
    return await releaseUnstarted(c, record, error);
  }
  emit(c, "run", record.attempts);
  c.flight = flight;
  try {
    let lease: Lease;
    try {
      const onStoreError = (error: StoreUnavailableError) => emit(c, "store_error", undefined, error);
      // Started before the near-duplicate lookup, which a slow store could make outlast the claim's lease;
      // with a lookup to wait for in between, its timer is armed at once.
      const renewals = c.similarKey === undefined ? "unless-stopped-at-once" : "now";
      lease = startLease(c.o, record, c.signal, onStoreError, renewals);
    } catch (error) {
      return await releaseUnstarted(c, record, error);
    }
    // It never throws (a failed lookup only loses the hint), so the lease is stopped on every path below.
    const similar = c.similarKey === undefined ? undefined : await lookUpSimilar(c, c.similarKey);
    let result: Awaited<R>;
    try {
      // The lease is started, the tool called and awaited, and the lease stopped as soon as this resumes,
      // each with nothing awaited in between: what lets a tool that answers at once cost no renewal timer.
      result = await c.fn(c.args, toolContext(c, record, lease));
    } catch (error) {
      const renewing = lease.stop();
      if (renewing !== undefined) await renewing;
      return await afterThrow(c, record, error);
    }
    // Only a renewal in flight is waited for: awaiting the nothing most calls get back costs a microtask turn.
    const renewing = lease.stop();
    if (renewing !== undefined) await renewing;
    const action = decide({ event: "tool", outcome: "returned", effect: c.o.effect });
    if (action !== Action.settleCompleted) throw unexpected(action, "the tool returned");
    const envelope = await settleCompleted(c, record, result, "run");
    if (c.similarKey === undefined) return envelope;
    await recordSimilar(c, c.similarKey, record);
    return similar ? { ...envelope, recent_similar_call: similar } : envelope;
  } finally {
    c.flight = undefined;
    endFlight(flight);
  }
}

/** The tool was never called: free the key, as a tool that declared it did not run would. Always throws. */
async function releaseUnstarted<A, R>(
  c: Call<A, R>,
  record: IdempotencyRecord,
  error: unknown,
): Promise<never> {
  const action = decide({ event: "tool", outcome: "declared_not_executed", effect: c.o.effect });
  if (action !== Action.release) throw unexpected(action, "a failure before the tool was called");
  await releaseFenced(c, record);
  throw error;
}

/** Where a tool's context keeps its lease, for its `signal` getter. */
const leaseOfContext = Symbol("lease");
/**
 * The context's `signal`: read from the lease only when the tool asks (Node makes an AbortController's signal
 * on first read, and reading it for every call made a first call cost 10% more instructions), by one getter
 * for every context. A getter written in the object literal is a new function per call, which puts each
 * context in dictionary mode: a first call cost 12% more instructions than with this shared one.
 */
const signalProperty: PropertyDescriptor = {
  get(this: { readonly [leaseOfContext]: Lease }) {
    return this[leaseOfContext].signal;
  },
  enumerable: true,
  configurable: true,
};

/** What the tool receives beside its arguments: `signal` an own enumerable getter, as in a literal. */
function toolContext<A, R>(c: Call<A, R>, record: IdempotencyRecord, lease: Lease): ToolContext {
  const context = { key: c.key, scope: c.scope, tool: c.o.name, attempt: record.attempts };
  Object.defineProperty(context, leaseOfContext, { value: lease });
  return Object.defineProperty(context, "signal", signalProperty) as typeof context & ToolContext;
}

/** The tool threw: what it declared and the effect class decide. Always throws. */
async function afterThrow<A, R>(c: Call<A, R>, record: IdempotencyRecord, error: unknown): Promise<never> {
  const declared = error instanceof DefinitiveFailure || error instanceof NotExecuted;
  const cause = declared ? error.cause : error;
  const outcome =
    error instanceof DefinitiveFailure
      ? "declared_failed"
      : error instanceof NotExecuted
        ? "declared_not_executed"
        : "threw";
  const action = decide({ event: "tool", outcome, effect: c.o.effect });
  switch (action) {
    case Action.release:
      await releaseFenced(c, record);
      throw cause;
    case Action.settleFailed: {
      const data = error instanceof DefinitiveFailure ? error.data : undefined;
      return await settleFailed(c, record, cause, data, "run");
    }
    case Action.settleUnknown: {
      const reason = `the tool threw before reporting an outcome (${errorMessage(cause)}), and its ${c.o.effect} effect may have happened`;
      const stored = encodeFailure(RecordStatus.unknown, cause, undefined, c.o.codec, bindingFor(c, record));
      return await settleUnknown(c, record, stored, reason, cause, "run");
    }
    default:
      throw unexpected(action, "the tool threw");
  }
}

/** Ask the verify hook what became of the earlier attempt, holding the claim while it answers. */
export async function verifyEarlierAttempt<A, R>(
  c: Call<A, R>,
  taken: IdempotencyRecord,
  reason: string,
): Promise<Envelope<Awaited<R>>> {
  const verify = c.o.verify;
  if (verify === undefined) throw unexpected(Action.verify, "a takeover with no verify hook");
  emit(c, "verify", taken.attempts);
  const lease = startLease(c.o, taken, c.signal, (error) => emit(c, "store_error", undefined, error));
  let outcome: Awaited<ReturnType<typeof verify>> | undefined;
  let verifyError: unknown;
  try {
    outcome = await verify(taken, { args: c.args, key: c.key, scope: c.scope, signal: lease.signal });
  } catch (error) {
    verifyError = error;
  } finally {
    await lease.stop();
  }
  const answered = outcome?.status;
  const action = decide({
    event: "verified",
    outcome:
      answered === "completed" ||
      answered === "failed" ||
      answered === "not_executed" ||
      answered === "unknown"
        ? answered
        : "hook_failed",
    claim: (await stillHeld(c, taken)) ? "held" : "lost",
  });
  switch (action) {
    case Action.leaseLost:
      throw leaseLost(c, taken);
    case Action.run:
      return execute(c, taken);
    case Action.settleCompleted:
      if (outcome?.status !== "completed") break;
      return settleCompleted(c, taken, outcome.result, "verify");
    case Action.settleFailed:
      if (outcome?.status !== "failed") break;
      return settleFailed(c, taken, outcome.error, outcome.data, "verify");
    case Action.settleUnknown: {
      const why =
        outcome?.status === "unknown"
          ? `${reason}; verify could not tell${outcome.reason ? `: ${outcome.reason}` : ""}`
          : verifyError !== undefined
            ? `${reason}; verify failed: ${errorMessage(verifyError)}`
            : `${reason}; verify returned an unrecognised outcome`;
      // The earlier attempt's stored error stays as it was.
      return settleUnknown(c, taken, taken.error, why, verifyError, "verify");
    }
  }
  throw unexpected(action, `verify answered ${String(answered)}`);
}

/**
 * Whether this call still holds the record, by a renewal fenced by its token: the hook may have answered
 * after the lease passed and another caller took the record. A store that does not answer is reported.
 */
async function stillHeld<A, R>(c: Call<A, R>, record: IdempotencyRecord): Promise<boolean> {
  try {
    return await c.o.store.renew({
      scope: c.scope,
      key: c.key,
      token: record.token,
      leaseMs: c.o.leaseMs,
      ttlMs: c.o.ttlMs,
      now: c.o.clock.now(),
    });
  } catch (error) {
    throw storeFailure(c, "renew", error);
  }
}

type After = "run" | "verify";

/** Record a result (this call's, or the one verify found) and hand it to the caller. */
async function settleCompleted<A, R>(
  c: Call<A, R>,
  record: IdempotencyRecord,
  result: Awaited<R>,
  after: After,
): Promise<Envelope<Awaited<R>>> {
  const encoded = encodeResult(
    result,
    c.o.maxResultBytes,
    c.o.codec,
    bindingFor(c, record),
    c.o.store.maxStoredResultBytes,
  );
  const settled = await settleFenced(
    c,
    record,
    RecordStatus.completed,
    encoded.ok ? encoded.text : null,
    encoded.ok ? null : encoded.error,
  );
  const kept = typeof settled === "string" ? undefined : settled;
  // The effect happened: this caller gets its result even if the store could not record it.
  const expiresAt = kept?.expiresAt ?? c.o.clock.now() + c.o.ttlMs;
  const action = decide({ event: "settled", status: "completed", after, answer: answerOf(settled) });
  switch (action) {
    case Action.leaseLost:
      throw leaseLost(c, record);
    case Action.returnResult: {
      const notKept = encoded.ok
        ? undefined
        : encoded.problem.code === ErrorCode.resultTooLarge
          ? new ResultTooLargeError(encoded.problem.sizeBytes, encoded.problem.maxBytes)
          : new ResultUnserializableError(kept ?? record, encoded.problem.reason);
      emit(c, "completed", record.attempts, notKept);
      return envelope(c, result, false, kept?.createdAt ?? record.createdAt, expiresAt);
    }
    case Action.replay:
      emit(c, "replay", record.attempts);
      // The effect happened on an earlier attempt: this is its outcome, handed back.
      return envelope(c, result, true, record.createdAt, expiresAt);
    default:
      throw unexpected(action, "a completed settle");
  }
}

/** Record a definitive failure (this call's, or the one verify found) and pass it on. Always throws. */
async function settleFailed<A, R>(
  c: Call<A, R>,
  record: IdempotencyRecord,
  cause: unknown,
  data: unknown,
  after: After,
): Promise<never> {
  const stored = encodeFailure(RecordStatus.failed, cause, data, c.o.codec, bindingFor(c, record));
  const settled = await settleFenced(c, record, RecordStatus.failed, null, stored);
  const action = decide({ event: "settled", status: "failed", after, answer: answerOf(settled) });
  switch (action) {
    case Action.leaseLost:
      throw leaseLost(c, record, cause);
    case Action.throwFailure:
      emit(c, "failed", record.attempts, cause);
      throw cause;
    case Action.replayFailure: {
      emit(c, "replay", record.attempts);
      const failure = decodeFailure(RecordStatus.failed, encodeFailure(RecordStatus.failed, cause, data));
      throw new ReplayedFailureError(failure, iso(record.createdAt), c.key);
    }
    default:
      throw unexpected(action, "a failed settle");
  }
}

/** Record that nobody knows the outcome, and fail closed. Always throws. */
async function settleUnknown<A, R>(
  c: Call<A, R>,
  record: IdempotencyRecord,
  stored: string | null,
  reason: string,
  cause: unknown,
  after: After,
): Promise<never> {
  const settled = await settleFenced(c, record, RecordStatus.unknown, null, stored);
  const action = decide({ event: "settled", status: "unknown", after, answer: answerOf(settled) });
  switch (action) {
    case Action.leaseLost:
      throw leaseLost(c, record, cause);
    case Action.outcomeUnknown: {
      const kept = typeof settled === "string" ? record : settled;
      const error = new OutcomeUnknownError(kept, reason, cause === undefined ? undefined : { cause });
      emit(c, "outcome_unknown", record.attempts, error);
      throw error;
    }
    default:
      throw unexpected(action, "an unknown settle");
  }
}

function answerOf(settled: IdempotencyRecord | "lost" | "store_failed"): Facts<"settled">["answer"] {
  return settled === "lost" ? "lost" : settled === "store_failed" ? "store_failed" : "settled";
}

/** The table chose an action this step cannot carry out: a bug in idempotool, so nothing more runs. */
export function unexpected(action: Action, after: string): Error {
  return new Error(`idempotool: the decision table chose "${action}" after ${after}; nothing more runs.`);
}

/** The near-duplicate hint is advisory: a store error here costs the hint, never the call. */
async function lookUpSimilar<A, R>(
  c: Call<A, R>,
  similarKey: string,
): Promise<RecentSimilarCall | undefined> {
  try {
    return await findSimilar(c.o.store, c.scope, similarKey, c.key, c.o.clock.now());
  } catch (error) {
    const consequence = "The call goes on without its near-duplicate hint.";
    emit(
      c,
      "store_error",
      undefined,
      new StoreUnavailableError("similar-call lookup", { cause: error, consequence }),
    );
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
    const consequence = "The tool ran; later calls may miss the near-duplicate hint.";
    emit(
      c,
      "store_error",
      undefined,
      new StoreUnavailableError("similar-call record", { cause: error, consequence }),
    );
  }
}
