/**
 * A call that holds its claim: run the tool, or ask the verify hook about an earlier attempt, then record
 * what happened. Every step is chosen by the table in decide.ts; this module only carries it out, one
 * `switch` per event.
 */
import {
  type Call,
  type Envelope,
  emit,
  envelope,
  leaseLost,
  releaseFenced,
  reportStoreError,
  settleFenced,
  stillHeld,
  type ToolContext,
  unreachable,
} from "./call.js";
import { monotonicNow } from "./clock.js";
import { decide, type Facts } from "./decide.js";
import {
  ErrorCode,
  OutcomeUnknownError,
  ResultTooLargeError,
  ResultUnserializableError,
  type StoreUnavailableError,
} from "./errors.js";
import { beginFlight, endFlight, type Flight } from "./in-flight.js";
import { type Lease, lateClaim, startLease } from "./lease.js";
import { DefinitiveFailure, messageOf, NotExecuted, ReplayedFailureError } from "./outcomes.js";
import type { RecordBinding } from "./result-codec.js";
import {
  argumentPreview,
  bindingFor,
  decodeFailure,
  encodeFailure,
  encodeResult,
  type ReviewNote,
  withReviewNote,
} from "./serialize.js";
import { findSimilar, type RecentSimilarCall, rememberSimilar } from "./similar.js";
import { type IdempotencyRecord, RecordStatus } from "./store.js";
import { iso } from "./time.js";

/** What the tool did: returned a value, or threw. */
type ToolOutcome<R> =
  | { readonly returned: true; readonly value: R }
  | { readonly returned: false; readonly error: unknown };

/**
 * Run the tool under a claim this call owns, and record what happened. The call's flight begins here, before
 * anything else (a repeat that joined its claim resumes after it and looks the flight up), and ends here once
 * the outcome is recorded; a throw before the tool is called frees the key, as a tool that did not run would.
 */
export async function execute<A, R>(
  call: Call<A, R>,
  record: IdempotencyRecord,
): Promise<Envelope<Awaited<R>>> {
  const late = lateClaim(call.options, call.claimSentAt);
  if (late !== undefined)
    return await afterTool(call, record, { returned: false, error: new NotExecuted(late) });
  let flight: Flight;
  try {
    flight = beginFlight(call.options.store, call.scope, call.key, record.token);
  } catch (error) {
    return await afterTool(call, record, { returned: false, error: new NotExecuted(error) });
  }
  emit(call, "run", record.attempts);
  call.flight = flight;
  try {
    let lease: Lease;
    try {
      const onStoreError = (error: StoreUnavailableError) => emit(call, "store_error", undefined, error);
      // Started before the near-duplicate lookup, which a slow store could make outlast the claim's lease;
      // with a lookup to wait for in between, its timer is armed at once.
      const renewals = call.similarKey === undefined ? "unless-stopped-at-once" : "now";
      lease = startLease(call.options, record, call.signal, onStoreError, {
        renewals,
        claimSentAt: call.claimSentAt,
      });
    } catch (error) {
      return await afterTool(call, record, { returned: false, error: new NotExecuted(error) });
    }
    // It never throws (a failed lookup only loses the hint), so the lease is stopped on every path below.
    const similar = call.similarKey === undefined ? undefined : await lookUpSimilar(call, call.similarKey);
    let outcome: ToolOutcome<Awaited<R>>;
    try {
      outcome = { returned: true, value: await call.fn(call.args, toolContext(call, record, lease)) };
    } catch (error) {
      outcome = { returned: false, error };
    }
    // Only a renewal in flight is waited for: awaiting the nothing most calls get back costs a microtask turn.
    const renewing = lease.stop();
    if (renewing !== undefined) await renewing;
    const answer = await afterTool(call, record, outcome);
    if (call.similarKey === undefined) return answer;
    await recordSimilar(call, call.similarKey, record);
    return similar ? { ...answer, recent_similar_call: similar } : answer;
  } finally {
    call.flight = undefined;
    endFlight(flight);
  }
}

/** Where a tool's context keeps its lease, for its `signal` getter. */
const leaseOfContext = Symbol("lease");
/**
 * The context's `signal`: read from the lease only when the tool asks, by one getter shared by every
 * context. A getter written in the object literal is a new function per call, and it puts each context in
 * V8's slow dictionary mode: about 2 µs more per first call, on every store.
 */
const signalProperty: PropertyDescriptor = {
  get(this: { readonly [leaseOfContext]: Lease }) {
    return this[leaseOfContext].signal;
  },
  enumerable: true,
  configurable: true,
};

/** What the tool receives beside its arguments: `signal` an own enumerable getter, as in a literal. */
function toolContext<A, R>(call: Call<A, R>, record: IdempotencyRecord, lease: Lease): ToolContext {
  const context = { key: call.key, scope: call.scope, tool: call.options.name, attempt: record.attempts };
  Object.defineProperty(context, leaseOfContext, { value: lease });
  return Object.defineProperty(context, "signal", signalProperty) as typeof context & ToolContext;
}

/** The tool returned or threw (what it declared, and the effect class, decide). */
async function afterTool<A, R>(
  call: Call<A, R>,
  record: IdempotencyRecord,
  outcome: ToolOutcome<Awaited<R>>,
): Promise<Envelope<Awaited<R>>> {
  const thrown = outcome.returned ? undefined : outcome.error;
  const declared = thrown instanceof DefinitiveFailure || thrown instanceof NotExecuted;
  const cause = declared ? thrown.cause : thrown;
  const action = decide({
    event: "tool",
    outcome: outcome.returned
      ? "returned"
      : thrown instanceof DefinitiveFailure
        ? "declared_failed"
        : thrown instanceof NotExecuted
          ? "declared_not_executed"
          : "threw",
    effect: call.options.effect,
  });
  // The table settles a result only when the tool returned one, and a failure only when it threw (its
  // `needs`, in decide.test.ts).
  switch (action) {
    case "settle_completed":
      return settleCompleted(call, record, (outcome as { value: Awaited<R> }).value, "run");
    case "release":
      await releaseFenced(call, record);
      throw cause;
    case "settle_failed": {
      const data = thrown instanceof DefinitiveFailure ? thrown.data : undefined;
      return await settleFailed(call, record, cause, data, "run");
    }
    case "settle_unknown": {
      const reason = `the tool threw before reporting an outcome (${messageOf(cause)}), and its ${call.options.effect} effect may have happened`;
      const codec = call.options.codec;
      const binding = bindingFor(call, record);
      const failure = encodeFailure(
        RecordStatus.unknown,
        cause,
        undefined,
        call.options.maxResultBytes,
        codec,
        binding,
        call.options.store.maxStoredResultBytes,
      );
      const stored = withPreview(call, failure, {}, binding);
      return await settleUnknown(call, record, stored, reason, cause, "run");
    }
    default:
      return unreachable(action);
  }
}

/** Ask the verify hook what became of the earlier attempt, holding the claim while it answers. */
export async function verifyEarlierAttempt<A, R>(
  call: Call<A, R>,
  taken: IdempotencyRecord,
  reason: string,
): Promise<Envelope<Awaited<R>>> {
  // The table asks verify only when the tool has a hook (its `needs`, in decide.test.ts).
  const verify = call.options.verify!;
  emit(call, "verify", taken.attempts);
  const onStoreError = (error: StoreUnavailableError) => emit(call, "store_error", undefined, error);
  const lease = startLease(call.options, taken, call.signal, onStoreError, { claimSentAt: call.claimSentAt });
  let outcome: Awaited<ReturnType<typeof verify>> | undefined;
  let verifyError: unknown;
  try {
    outcome = await verify(taken, {
      args: call.args,
      key: call.key,
      scope: call.scope,
      signal: lease.signal,
    });
  } catch (error) {
    verifyError = error;
  } finally {
    await lease.stop();
  }
  const answered = outcome?.status;
  // The fenced renewal that tells whether the claim still holds restarts its lease when it lands: a tool
  // run next counts its lease (and whether that answer came in time) from its sending, not the takeover's.
  call.claimSentAt = monotonicNow(call.options.clock);
  const action = decide({
    event: "verified",
    outcome:
      answered === "completed" ||
      answered === "failed" ||
      answered === "not_executed" ||
      answered === "unknown"
        ? answered
        : "hook_failed",
    claim: (await stillHeld(call, taken)) ? "held" : "lost",
  });
  // The table settles a result or a failure only when verify found one (its `needs`, in decide.test.ts).
  switch (action) {
    case "lease_lost":
      throw leaseLost(call, taken);
    case "run":
      return execute(call, taken);
    case "settle_completed": {
      const found = outcome as { readonly result: Awaited<R> };
      return settleCompleted(call, taken, found.result, "verify");
    }
    case "settle_failed": {
      const found = outcome as { readonly error: unknown; readonly data?: unknown };
      return settleFailed(call, taken, found.error, found.data, "verify");
    }
    case "settle_unknown": {
      const why =
        outcome?.status === "unknown"
          ? `${reason}; verify could not tell${outcome.reason ? `: ${outcome.reason}` : ""}`
          : verifyError !== undefined
            ? `${reason}; verify failed: ${messageOf(verifyError)}`
            : `${reason}; verify returned an unrecognised outcome`;
      // The earlier attempt's stored error stays as it was, with verify's answer beside it for review.
      const said =
        outcome?.status === "unknown"
          ? outcome.reason
          : verifyError !== undefined
            ? messageOf(verifyError)
            : undefined;
      const answer = outcome?.status;
      const verified = {
        status: verifyError !== undefined ? "error" : typeof answer === "string" ? answer : "unrecognised",
        at: iso(call.options.clock.now()),
        // Stored as JSON, where an undefined reason is no reason.
        reason: said,
      };
      const stored = withPreview(call, taken.error, { verify: verified }, bindingFor(call, taken));
      return settleUnknown(call, taken, stored, why, verifyError, "verify");
    }
    default:
      return unreachable(action);
  }
}

/** An unknown outcome's stored failure with `note`, and the arguments' preview when the tool keeps one. */
function withPreview<A, R>(
  call: Call<A, R>,
  error: string | null,
  note: ReviewNote,
  binding: RecordBinding | undefined,
): string | null {
  const preview = call.options.reviewPreview ? argumentPreview(call.args, call.options.codec) : undefined;
  if (note.verify === undefined && preview === undefined) return error;
  return withReviewNote(
    error,
    { ...note, arguments: preview },
    call.options.codec,
    binding,
    storedLimit(call),
  );
}

/** The most a stored result or failure may take: the tool's limit, or the store's where lower. */
function storedLimit<A, R>(call: Call<A, R>): number {
  return Math.min(
    call.options.maxResultBytes,
    call.options.store.maxStoredResultBytes ?? Number.POSITIVE_INFINITY,
  );
}

type After = Facts<"settled">["after"];

/** What a call records, with what it needs to answer its caller once the settle is answered. */
type Settling<R> =
  | { readonly status: "completed"; readonly result: R; readonly encoded: ReturnType<typeof encodeResult> }
  | { readonly status: "failed"; readonly cause: unknown }
  | { readonly status: "unknown"; readonly reason: string; readonly cause: unknown };

/** Record a result (this call's, or the one verify found) and hand it to the caller. */
function settleCompleted<A, R>(
  call: Call<A, R>,
  record: IdempotencyRecord,
  result: Awaited<R>,
  after: After,
): Promise<Envelope<Awaited<R>>> {
  const { options } = call;
  const binding = bindingFor(call, record);
  const encoded = encodeResult(
    result,
    options.maxResultBytes,
    options.codec,
    binding,
    options.store.maxStoredResultBytes,
  );
  const stored = encoded.ok ? { result: encoded.text, error: null } : { result: null, error: encoded.error };
  return settle(call, record, { status: "completed", result, encoded }, stored, after);
}

/** Record a definitive failure (this call's, or the one verify found) and pass it on. */
function settleFailed<A, R>(
  call: Call<A, R>,
  record: IdempotencyRecord,
  cause: unknown,
  data: unknown,
  after: After,
): Promise<never> {
  const { options } = call;
  const error = encodeFailure(
    RecordStatus.failed,
    cause,
    data,
    options.maxResultBytes,
    options.codec,
    bindingFor(call, record),
    options.store.maxStoredResultBytes,
  );
  return settle(call, record, { status: "failed", cause }, { result: null, error }, after) as Promise<never>;
}

/** Record that nobody knows the outcome, and fail closed. */
function settleUnknown<A, R>(
  call: Call<A, R>,
  record: IdempotencyRecord,
  stored: string | null,
  reason: string,
  cause: unknown,
  after: After,
): Promise<never> {
  const settling = { status: "unknown", reason, cause } as const;
  return settle(call, record, settling, { result: null, error: stored }, after) as Promise<never>;
}

/** Settle, fenced by the owner token, then answer the caller as the table says. */
async function settle<A, R>(
  call: Call<A, R>,
  record: IdempotencyRecord,
  settling: Settling<Awaited<R>>,
  stored: { readonly result: string | null; readonly error: string | null },
  after: After,
): Promise<Envelope<Awaited<R>>> {
  const settled = await settleFenced(call, record, settling.status, stored.result, stored.error);
  const kept = typeof settled === "string" ? undefined : settled;
  const action = decide({ event: "settled", status: settling.status, after, answer: answerOf(settled) });
  const cause = settling.status === "completed" ? undefined : settling.cause;
  // The table hands back a result only after a completed settle, a failure only after a failed one, and an
  // unknown outcome only after an unknown one (its `needs`, in decide.test.ts).
  switch (action) {
    case "lease_lost":
      throw leaseLost(call, record, cause);
    case "return_result": {
      const { result, encoded } = settling as Extract<Settling<Awaited<R>>, { status: "completed" }>;
      const notKept = encoded.ok
        ? undefined
        : encoded.problem.code === ErrorCode.resultTooLarge
          ? new ResultTooLargeError(encoded.problem.sizeBytes, encoded.problem.maxBytes)
          : new ResultUnserializableError(kept ?? record, encoded.problem.reason);
      emit(call, "completed", record.attempts, notKept);
      // The effect happened: this caller gets its result even if the store could not record it.
      return envelope(call, result, false, kept?.createdAt ?? record.createdAt, expiresAt(call, kept));
    }
    case "replay": {
      const { result } = settling as Extract<Settling<Awaited<R>>, { status: "completed" }>;
      emit(call, "replay", record.attempts);
      // The effect happened on an earlier attempt: this is its outcome, handed back.
      return envelope(call, result, true, record.createdAt, expiresAt(call, kept));
    }
    case "throw_failure":
      emit(call, "failed", record.attempts, cause);
      throw cause;
    case "replay_failure": {
      emit(call, "replay", record.attempts);
      // What the record keeps (its data dropped when over the limit), as any later repeat gets it.
      const failure = decodeFailure(
        RecordStatus.failed,
        stored.error,
        call.options.codec,
        bindingFor(call, record),
      );
      throw new ReplayedFailureError(failure, iso(record.createdAt), call.key);
    }
    case "outcome_unknown": {
      const { reason } = settling as Extract<Settling<Awaited<R>>, { status: "unknown" }>;
      const error = new OutcomeUnknownError(
        kept ?? record,
        reason,
        cause === undefined ? undefined : { cause },
      );
      emit(call, "outcome_unknown", record.attempts, error);
      throw error;
    }
    default:
      return unreachable(action);
  }
}

/** Until when a repeat replays this result: as stored, or from now when the store could not keep it. */
function expiresAt<A, R>(call: Call<A, R>, kept: IdempotencyRecord | undefined): number {
  return kept?.expiresAt ?? call.options.clock.now() + call.options.ttlMs;
}

function answerOf(settled: IdempotencyRecord | "lost" | "store_failed"): Facts<"settled">["answer"] {
  return settled === "lost" ? "lost" : settled === "store_failed" ? "store_failed" : "settled";
}

/** The near-duplicate hint is advisory: a store error here costs the hint, never the call. */
async function lookUpSimilar<A, R>(
  call: Call<A, R>,
  similarKey: string,
): Promise<RecentSimilarCall | undefined> {
  try {
    return await findSimilar(call.options.store, call.scope, similarKey, call.key, call.options.clock.now());
  } catch (error) {
    reportStoreError(call, "similar-call lookup", error, "The call goes on without its near-duplicate hint.");
    return undefined;
  }
}

async function recordSimilar<A, R>(
  call: Call<A, R>,
  similarKey: string,
  record: IdempotencyRecord,
): Promise<void> {
  const { options } = call;
  if (options.similar === undefined) return;
  try {
    const now = options.clock.now();
    await rememberSimilar(
      options.store,
      call.scope,
      similarKey,
      call.key,
      record.createdAt,
      now,
      options.similar.windowMs,
    );
  } catch (error) {
    const consequence = "The tool ran; later calls may miss the near-duplicate hint.";
    reportStoreError(call, "similar-call record", error, consequence);
  }
}
