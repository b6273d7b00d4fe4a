import {
  type Call,
  type Envelope,
  emit,
  envelope,
  releaseUnrun,
  storeFailure,
  type Tool,
  type ToolContext,
  takeOver,
} from "./call.js";
import { Action, decide, found } from "./decide.js";
import {
  ErrorCode,
  IdempotencyError,
  KeyConflictError,
  KeyInUseError,
  OutcomeUnknownError,
  ResultTooLargeError,
  ResultUnserializableError,
  retryAfterMsOf,
} from "./errors.js";
import { execute, unexpected, verifyEarlierAttempt } from "./execute.js";
import {
  type ClaimMark,
  claimOnItsWay,
  type Flight,
  type Flights,
  flightsOf,
  holderOf,
  joinClaim,
  markClaim,
  outcomeFor,
  unmarkClaim,
  waitForOutcome,
} from "./in-flight.js";
import { fingerprintWith, sameFingerprint } from "./keyed-fingerprint.js";
import { similarMarkerKey, validateCallKey, validateScope } from "./keys.js";
import {
  type CallOptions,
  type Effect,
  type IdempotentOptions,
  type ResolvedOptions,
  resolveOptions,
} from "./options.js";
import { ReplayedFailureError } from "./outcomes.js";
import { bindingFor, decodeFailure, decodeResult, decodeResultProblem } from "./serialize.js";
import type { RecentSimilarCall } from "./similar.js";
import { type ClaimResult, type IdempotencyRecord, ownerToken, RecordStatus } from "./store.js";
import { iso } from "./time.js";
/** What every tool made by {@link idempotent} tells about itself. */
export interface IdempotentToolInfo {
  readonly toolName: string;
  readonly effect: Effect;
  readonly ttlMs: number;
  readonly waitMs: number;
}

/**
 * The options of a call to a tool whose `idempotent()` has no `key` option: the key is not optional.
 * (Named so a compiler error reads as the fix: a call needs `{ key }`.)
 */
export interface CallWithKey extends CallOptions {
  /**
   * Required: no `key` option of this tool's `idempotent()` derives it. Pass `{ key }`, chosen before the
   * call and stable across every repeat (see `keys.fromState`, `keys.intent`), or give `idempotent()` a
   * `key` option that derives it from the arguments.
   */
  readonly key: string;
}

/**
 * A tool made safe to call twice. Each call gives its key: `tool(args, { key })`. Every tool made by
 * {@link idempotent} is one, including one whose `key` option derives the key
 * ({@link IdempotentToolWithDerivedKey}), so a function taking an `IdempotentTool` takes either.
 */
export interface IdempotentTool<A, R> extends IdempotentToolInfo {
  (args: A, callWithKey: CallWithKey): Promise<Envelope<Awaited<R>>>;
}

/** A tool made safe to call twice whose `key` option derives the key: the call options may be left out. */
export interface IdempotentToolWithDerivedKey<A, R> extends IdempotentToolInfo {
  (args: A, call?: CallOptions): Promise<Envelope<Awaited<R>>>;
}

/** The `key` option of {@link idempotent}: derives the key from the arguments when the call gives none. */
export type KeyOption<A> = (args: A, call: CallOptions) => string | undefined;

/**
 * How `idempotent()` sees whether its `key` option was given: `K` is inferred from it (`unknown` when it
 * is left out), and picks the tool's type.
 */
export interface KeyOptionOf<K> {
  readonly key?: K;
}

/**
 * The tool `idempotent()` returns: one whose calls may leave the key out only when a `key` option that
 * is certainly a function was given (an options object typed with `key` optional gets the strict one).
 */
export type IdempotentToolFor<A, R, K> = [K] extends [KeyOption<A>]
  ? IdempotentToolWithDerivedKey<A, R>
  : IdempotentTool<A, R>;

/**
 * Wrap a side-effectful tool so every repeat of one intended action becomes a no-op that
 * returns the original outcome.
 *
 * Without a `key` option, each call must give `{ key }`: leaving it out is a compile error (and, from
 * JavaScript, `idempotency_key_missing` at run time). With a `key` option, the call options are optional.
 * @typeParam K - the type of the `key` option, inferred; it decides whether a call may leave out `{ key }`.
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
export function idempotent<A, R, K = unknown>(
  fn: Tool<A, R>,
  options: IdempotentOptions<A, Awaited<R>> & KeyOptionOf<K>,
): IdempotentToolFor<A, R, K> {
  if (typeof fn !== "function") {
    throw new IdempotencyError(
      ErrorCode.invalidOptions,
      "idempotent(): the first argument must be the tool function.",
    );
  }
  const resolved = resolveOptions(options);
  const flights = flightsOf(resolved.store);
  const wrapped = (args: A, call: CallOptions = {}) => callOnce(fn, resolved, flights, args, call);
  const tool: IdempotentToolWithDerivedKey<A, R> = Object.assign(wrapped, {
    toolName: resolved.name,
    effect: resolved.effect,
    ttlMs: resolved.ttlMs,
    waitMs: resolved.waitMs,
  });
  // Only the type differs: a call without a key still fails at run time with `idempotency_key_missing`
  // (a JavaScript caller, or a `key` option that derives none), before the store or the tool is touched.
  return tool as IdempotentToolFor<A, R, K>;
}

async function callOnce<A, R>(
  fn: Tool<A, R>,
  o: ResolvedOptions<A, Awaited<R>>,
  flights: Flights,
  args: A,
  options: CallOptions,
): Promise<Envelope<Awaited<R>>> {
  // Bad input is rejected here, before the store or the tool is touched.
  const key = validateCallKey(options.key ?? o.key?.(args, options), o.name, options);
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
    flight: undefined,
  };

  // One token for every claim this call makes: a claim whose reply was lost and that the client resent
  // (or that this loop makes again) finds its own record, and a claim given up on can be released.
  const token = ownerToken();
  let waitingSince: number | undefined;
  let pollMs = 10;
  // The call in this process whose claim this one joined, instead of sending its own (see in-flight.ts).
  let joined: Flight | undefined;
  // The outcome the holder this call waited on settled, handed over on waking (see outcomeFor).
  let handed: ClaimResult | undefined;
  for (;;) {
    if (options.signal?.aborted) {
      if (waitingSince !== undefined) emit(c, "in_flight_gave_up", undefined, options.signal.reason);
      options.signal.throwIfAborted();
    }
    let claim = handed;
    handed = undefined;
    // Only before its first wait: a crowd of waiters woken together gains nothing by queueing behind one.
    if (claim === undefined && waitingSince === undefined) {
      const other = claimOnItsWay(flights, scope, key);
      if (other !== undefined) {
        const answer = await joinClaim(flights, scope, key, other);
        claim = answer?.claim;
        joined = answer?.holder;
      }
    }
    if (claim === undefined) {
      // Marked while on its way, so a repeat in this process can join it; a claim that finds a record (a
      // replay) leaves nothing else behind.
      let mark: ClaimMark | undefined;
      let sent: Promise<ClaimResult> | undefined;
      try {
        sent = o.store.claim({
          scope,
          key,
          tool: o.name,
          fingerprint: print,
          token,
          leaseMs: o.leaseMs,
          ttlMs: o.ttlMs,
          now: o.clock.now(),
        });
        mark = markClaim(flights, scope, key, sent);
        claim = await sent;
      } catch (error) {
        if (mark !== undefined) unmarkClaim(flights, key, mark);
        // A throw while the claim was on its way (marking it) must not release before the claim is answered:
        // a release that comes first frees nothing, and the claim would land with nobody behind it.
        if (sent !== undefined) await sent.then(ignore, ignore);
        const failure = storeFailure(c, "claim", error);
        const action = decide({ event: "claim_failed" });
        if (action !== Action.releaseUnrun) throw unexpected(action, "a claim with no answer");
        await releaseUnrun(c, token);
        throw failure;
      }
      unmarkClaim(flights, key, mark);
      if (claim.claimed) {
        const action = decide({ event: "claimed" });
        if (action !== Action.run) throw unexpected(action, "a claim that landed");
        // execute registers the call's flight before any repeat that joined this claim resumes (they await
        // the same answer, after this call did), and ends it when the call has settled, waking them.
        return await execute(c, claim.record);
      }
    }
    const record = claim.record;

    const now = o.clock.now();
    const waitedMs = waitingSince === undefined ? 0 : now - waitingSince;
    const request = {
      tool: o.name,
      sameFingerprint: (fingerprint: string) => sameFingerprint(c, fingerprint),
      token,
      effect: o.effect,
      verify: o.verify !== undefined,
    };
    const action = decide(found(record, request, claim.now, waitedMs, o.waitMs));
    switch (action) {
      case Action.run:
        return await execute(c, record);
      case Action.conflict: {
        const error = new KeyConflictError(record, print, o.name);
        emit(c, "conflict", undefined, error);
        throw error;
      }
      case Action.replay:
        return replayCompleted(c, record);
      case Action.replayFailure:
        emit(c, "replay", record.attempts);
        throw new ReplayedFailureError(
          decodeFailure(RecordStatus.failed, record.error, c.o.codec, bindingFor(c, record)),
          iso(record.createdAt),
          key,
        );
      case Action.wait:
        if (waitingSince === undefined) {
          waitingSince = now;
          emit(c, "in_flight_wait", record.attempts);
        }
        try {
          const joinedHolder = joined;
          const local = joinedHolder ?? holderOf(o.store, scope, key);
          // A holder in this process wakes its waiters when it ends, so they need not poll meanwhile; they
          // look again when its lease would pass, in case its renewals stopped reaching the store.
          const ms =
            local !== undefined && !local.ended
              ? Math.max(0, Math.min(o.waitMs - waitedMs, record.leaseExpiresAt - claim.now))
              : Math.min(jitter(pollMs), o.waitMs - waitedMs);
          joined = undefined;
          // Its outcome is this call's when this call began before the holder settled: always for a repeat
          // that joined the holder's claim on its way (the holder settles only after that claim's answer, and
          // with a quick tool it may have begun to before the repeat resumes), else only if it was not settling.
          const beforeSettle = local !== undefined && (local === joinedHolder || !local.settling);
          await waitForOutcome(o.store, scope, key, o.clock, ms, c.signal, local);
          if (local?.ended === true) handed = outcomeFor(local, beforeSettle);
        } catch (error) {
          // Only the caller's signal ends a wait early.
          emit(c, "in_flight_gave_up", record.attempts, error);
          throw error;
        }
        pollMs = Math.min(pollMs * 2, 250);
        continue;
      case Action.giveUp: {
        // A call that may not wait at all (waitMs 0) still reports the wait it gave up on.
        if (waitingSince === undefined) emit(c, "in_flight_wait", record.attempts);
        const error = new KeyInUseError(record, waitedMs, retryAfterMsOf(record, claim.now));
        emit(c, "in_flight_gave_up", record.attempts, error);
        throw error;
      }
      case Action.takeOver: {
        const outcome = await takeOverThen(c, record, record.token === token ? "own" : "other");
        if (outcome) return outcome;
        continue;
      }
      case Action.outcomeUnknown: {
        const error = new OutcomeUnknownError(record, unknownReason(c, record));
        emit(c, "outcome_unknown", record.attempts, error);
        throw error;
      }
      default:
        throw unexpected(action, "a claim that found a record");
    }
  }
}

/**
 * Take the record over from its previous owner, then run, verify or fail closed as the table says.
 * Returns undefined when another caller moved the record first (look again).
 */
async function takeOverThen<A, R>(
  c: Call<A, R>,
  record: IdempotencyRecord,
  whose: "own" | "other",
): Promise<Envelope<Awaited<R>> | undefined> {
  const taken = await takeOver(c, record);
  const action = decide({
    event: "takeover",
    taken: taken ? "yes" : "no",
    token: whose,
    effect: c.o.effect,
    verify: c.o.verify ? "given" : "none",
  });
  if (action === Action.lookAgain) return undefined;
  if (taken === null) throw unexpected(action, "a takeover that did not land");
  // Taking back this call's own claim is no takeover of anyone else's attempt.
  if (whose === "other") emit(c, "takeover", taken.attempts);
  switch (action) {
    case Action.run:
      return execute(c, taken);
    case Action.verify:
      return verifyEarlierAttempt(c, taken, unknownReason(c, record));
    case Action.outcomeUnknown: {
      const error = new OutcomeUnknownError(taken, unknownReason(c, record));
      emit(c, "outcome_unknown", taken.attempts, error);
      throw error;
    }
    default:
      throw unexpected(action, "a takeover");
  }
}

/**
 * Why nobody knows this record's outcome, in words for the caller (and the model). The table leaves an
 * in-progress record unknown, or takes it over, only once its lease has passed by the store's clock.
 */
function unknownReason<A, R>(c: Call<A, R>, record: IdempotencyRecord): string {
  if (record.status === RecordStatus.inProgress) {
    return (
      `the worker that claimed it stopped renewing its lease at ${iso(record.leaseExpiresAt)} ` +
      "(it may have crashed after the effect)"
    );
  }
  return `the attempt at ${iso(record.updatedAt)} ended without a known outcome${failureNote(c, record)}`;
}

/** The stored failure's message, as a note on an unknown outcome ("" when there is none or it cannot be opened). */
function failureNote<A, R>(c: Call<A, R>, record: IdempotencyRecord): string {
  if (record.error === null) return "";
  try {
    const failure = decodeFailure(RecordStatus.unknown, record.error, c.o.codec, bindingFor(c, record));
    return ` (${failure.message})`;
  } catch {
    // A note only: a record this worker cannot open still fails closed as unknown.
    return "";
  }
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

function ignore(): void {}

/** Spread pollers apart so a crowd of waiters does not hit the store in lockstep. */
function jitter(ms: number): number {
  return Math.round(ms * (0.75 + Math.random() * 0.5));
}

export type { CallOptions, Envelope, IdempotentOptions, RecentSimilarCall, Tool, ToolContext };
