import {
  type Call,
  claim,
  type Envelope,
  emit,
  envelope,
  releaseUnrun,
  storeFailure,
  type Tool,
  type ToolContext,
  takeOver,
  unreachable,
} from "./call.js";
import { decide, found } from "./decide.js";
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
import { execute, verifyEarlierAttempt } from "./execute.js";
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
import {
  argumentsKey,
  isKeyedByArguments,
  similarMarkerKey,
  validateCallKey,
  validateScope,
} from "./keys.js";
import {
  type CallOptions,
  type Effect,
  type IdempotentOptions,
  type ResolvedOptions,
  resolveOptions,
} from "./options.js";
import { ReplayedFailureError } from "./outcomes.js";
import {
  bindingFor,
  decodeCompletedNote,
  decodeFailure,
  decodeResult,
  unknownFailureMessage,
} from "./serialize.js";
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
  const wrapped = (args: A, callOptions: CallOptions = {}) =>
    callOnce(fn, resolved, flights, args, callOptions);
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

/** A call's wait for another caller's outcome, across the turns of its claim loop. */
interface Waiting {
  /** When it began waiting (undefined: it has not). */
  since: number | undefined;
  pollMs: number;
  /** The call in this process whose claim this one joined, instead of sending its own (see in-flight.ts). */
  joined: Flight | undefined;
  /** The outcome the holder it waited on settled, handed over on waking (see outcomeFor). */
  handed: ClaimResult | undefined;
}

async function callOnce<A, R>(
  fn: Tool<A, R>,
  options: ResolvedOptions<A, Awaited<R>>,
  flights: Flights,
  args: A,
  callOptions: CallOptions,
): Promise<Envelope<Awaited<R>>> {
  // Bad input is rejected here, before the store or the tool is touched.
  const fingerprintKeys = options.codec?.fingerprintKeys;
  const key = isKeyedByArguments(callOptions)
    ? argumentsKey(options.name, args, options.bigint, fingerprintKeys)
    : validateCallKey(callOptions.key ?? options.key?.(args, callOptions), options.name, callOptions);
  const scope = validateScope(callOptions.scope);
  const significant = options.significant ? options.significant(args) : args;
  const call: Call<A, R> = {
    fn,
    options,
    args,
    key,
    scope,
    fingerprint: fingerprintWith(fingerprintKeys, significant, { bigint: options.bigint }),
    token: ownerToken(),
    similarKey: options.similar
      ? similarMarkerKey(options.name, options.similar.pick(args), options.bigint, fingerprintKeys)
      : undefined,
    startedAt: options.clock.now(),
    signal: callOptions.signal,
    callId: undefined,
    flight: undefined,
    claimSentAt: 0,
  };
  const waiting: Waiting = { since: undefined, pollMs: 10, joined: undefined, handed: undefined };
  for (;;) {
    if (call.signal?.aborted) {
      if (waiting.since !== undefined) emit(call, "in_flight_gave_up", undefined, call.signal.reason);
      call.signal.throwIfAborted();
    }
    let answer = waiting.handed;
    waiting.handed = undefined;
    // Only before its first wait: a crowd of waiters woken together gains nothing by queueing behind one.
    // Looked up before anything is awaited, so that a crowd of repeats started together joins one claim.
    const other =
      answer === undefined && waiting.since === undefined ? claimOnItsWay(flights, scope, key) : undefined;
    if (other !== undefined) {
      const joined = await joinClaim(flights, scope, key, other);
      answer = joined?.claim;
      waiting.joined = joined?.holder;
    }
    if (answer === undefined) {
      // Marked while on its way, so a repeat in this process can join it. Awaited here, not in a helper: the
      // call must resume before the repeats that joined it do, and register its flight (in execute) for them.
      const sent = claim(call);
      let mark: ClaimMark | undefined;
      try {
        mark = markClaim(flights, scope, key, sent);
        answer = await sent;
      } catch (error) {
        if (mark !== undefined) unmarkClaim(flights, key, mark);
        // Released only once the claim is answered (a throw while marking it comes first): a release sent
        // before a claim that may still land frees nothing, and the claim would land with nobody behind it.
        await sent.then(ignore, ignore);
        return await claimFailed(call, error);
      }
      unmarkClaim(flights, key, mark);
      if (answer.claimed) {
        const action = decide({ event: "claimed" });
        switch (action) {
          case "run":
            // execute registers the call's flight before any repeat that joined this claim resumes (they
            // await the same answer, after this call did), and ends it when the call has settled, waking them.
            return await execute(call, answer.record);
          default:
            return unreachable(action);
        }
      }
    }
    const outcome = await afterFound(call, answer, waiting);
    if (outcome !== undefined) return outcome;
  }
}

/** The claim got no answer, though it may have landed: release it, and throw the failure. */
async function claimFailed<A, R>(call: Call<A, R>, error: unknown): Promise<never> {
  const failure = storeFailure(call, "claim", error);
  const action = decide({ event: "claim_failed" });
  switch (action) {
    case "release_unrun":
      await releaseUnrun(call);
      throw failure;
    default:
      return unreachable(action);
  }
}

/** The claim found a record: answer from it, or return undefined to claim again. */
async function afterFound<A, R>(
  call: Call<A, R>,
  answer: ClaimResult,
  waiting: Waiting,
): Promise<Envelope<Awaited<R>> | undefined> {
  const { options } = call;
  const record = answer.record;
  const now = options.clock.now();
  const waitedMs = waiting.since === undefined ? 0 : now - waiting.since;
  const request = {
    tool: options.name,
    sameFingerprint: (fingerprint: string) => sameFingerprint(call, fingerprint),
    token: call.token,
    effect: options.effect,
    verify: options.verify !== undefined,
  };
  const action = decide(found(record, request, answer.now, waitedMs, options.waitMs));
  switch (action) {
    case "run":
      return await execute(call, record);
    case "conflict": {
      const error = new KeyConflictError(record, call.fingerprint, options.name);
      emit(call, "conflict", undefined, error);
      throw error;
    }
    case "replay":
      return replayCompleted(call, record);
    case "replay_failure":
      emit(call, "replay", record.attempts);
      throw new ReplayedFailureError(
        decodeFailure(RecordStatus.failed, record.error, options.codec, bindingFor(call, record)),
        iso(record.createdAt),
        call.key,
      );
    case "wait":
      await waitForHolder(call, record, answer.now, waiting, now);
      return undefined;
    case "give_up": {
      // A call that may not wait at all (waitMs 0) still reports the wait it gave up on.
      if (waiting.since === undefined) emit(call, "in_flight_wait", record.attempts);
      const error = new KeyInUseError(record, waitedMs, retryAfterMsOf(record, answer.now));
      emit(call, "in_flight_gave_up", record.attempts, error);
      throw error;
    }
    case "take_over":
      return await takeOverThen(call, record, record.token === call.token ? "own" : "other");
    case "outcome_unknown":
      throw unknownOutcome(call, record, record);
    default:
      return unreachable(action);
  }
}

/** Wait for the caller that holds the record, waking early when it runs in this process. */
async function waitForHolder<A, R>(
  call: Call<A, R>,
  record: IdempotencyRecord,
  storeNow: number,
  waiting: Waiting,
  now: number,
): Promise<void> {
  const { options } = call;
  if (waiting.since === undefined) {
    waiting.since = now;
    emit(call, "in_flight_wait", record.attempts);
  }
  const waitedMs = now - waiting.since;
  try {
    const joined = waiting.joined;
    waiting.joined = undefined;
    const local = joined ?? holderOf(options.store, call.scope, call.key);
    // A holder in this process wakes its waiters when it ends, so they need not poll meanwhile; they look
    // again when its lease would pass, in case its renewals stopped reaching the store.
    const ms =
      local !== undefined && !local.ended
        ? Math.max(0, Math.min(options.waitMs - waitedMs, record.leaseExpiresAt - storeNow))
        : Math.min(jitter(waiting.pollMs), options.waitMs - waitedMs);
    // Its outcome is this call's when this call began before the holder settled: always for a repeat that
    // joined the holder's claim on its way (the holder settles only after that claim's answer, and with a
    // quick tool it may have begun to before the repeat resumes), else only if it was not settling.
    const beforeSettle = local !== undefined && (local === joined || !local.settling);
    await waitForOutcome(options.store, call.scope, call.key, options.clock, ms, call.signal, local);
    if (local?.ended === true) waiting.handed = outcomeFor(local, beforeSettle);
  } catch (error) {
    // Only the caller's signal ends a wait early.
    emit(call, "in_flight_gave_up", record.attempts, error);
    throw error;
  }
  waiting.pollMs = Math.min(waiting.pollMs * 2, 250);
}

/**
 * Take the record over from its previous owner, then run, verify or fail closed as the table says.
 * Returns undefined when another caller moved the record first (look again).
 */
async function takeOverThen<A, R>(
  call: Call<A, R>,
  record: IdempotencyRecord,
  whose: "own" | "other",
): Promise<Envelope<Awaited<R>> | undefined> {
  const taken = await takeOver(call, record);
  const action = decide({
    event: "takeover",
    taken: taken ? "yes" : "no",
    token: whose,
    effect: call.options.effect,
    verify: call.options.verify ? "given" : "none",
  });
  if (action === "look_again") return undefined;
  // The table goes on from a takeover only when it landed (its `needs`, in decide.test.ts).
  const held = taken!;
  // Taking back this call's own claim is no takeover of anyone else's attempt.
  if (whose === "other") emit(call, "takeover", held.attempts);
  switch (action) {
    case "run":
      return execute(call, held);
    case "verify":
      return verifyEarlierAttempt(call, held, unknownReason(call, record));
    case "outcome_unknown":
      throw unknownOutcome(call, held, record);
    default:
      return unreachable(action);
  }
}

/** Fail closed: nobody knows whether the effect of `earlier` happened (`outcome_unknown`). */
function unknownOutcome<A, R>(
  call: Call<A, R>,
  record: IdempotencyRecord,
  earlier: IdempotencyRecord,
): OutcomeUnknownError {
  const error = new OutcomeUnknownError(record, unknownReason(call, earlier));
  emit(call, "outcome_unknown", record.attempts, error);
  return error;
}

/**
 * Why nobody knows this record's outcome, in words for the caller (and the model). The table leaves an
 * in-progress record unknown, or takes it over, only once its lease has passed by the store's clock.
 */
function unknownReason<A, R>(call: Call<A, R>, record: IdempotencyRecord): string {
  if (record.status === RecordStatus.inProgress) {
    return (
      `the worker that claimed it stopped renewing its lease at ${iso(record.leaseExpiresAt)} ` +
      "(it may have crashed after the effect)"
    );
  }
  return `the attempt at ${iso(record.updatedAt)} ended without a known outcome${failureNote(call, record)}`;
}

/** The stored failure's message, as a note on an unknown outcome ("" when there is none or it cannot be opened). */
function failureNote<A, R>(call: Call<A, R>, record: IdempotencyRecord): string {
  try {
    const message = unknownFailureMessage(record.error, call.options.codec, bindingFor(call, record));
    return message === undefined ? "" : ` (${message})`;
  } catch {
    // A note only: a record this worker cannot open still fails closed as unknown.
    return "";
  }
}

function replayCompleted<A, R>(call: Call<A, R>, record: IdempotencyRecord): Envelope<Awaited<R>> {
  emit(call, "replay", record.attempts);
  const binding = bindingFor(call, record);
  const { problem, resolution } = decodeCompletedNote(record.error, call.options.codec, binding);
  if (record.result === null) {
    if (problem?.code === ErrorCode.resultTooLarge) {
      throw new ResultTooLargeError(problem.sizeBytes, problem.maxBytes, record);
    }
    if (problem?.code === ErrorCode.resultUnserializable) {
      throw new ResultUnserializableError(record, problem.reason);
    }
  }
  const replayed = envelope(
    call,
    decodeResult(record.result, call.options.codec, binding) as Awaited<R>,
    true,
    record.createdAt,
    record.expiresAt,
  );
  return resolution === undefined ? replayed : { ...replayed, resolved_by_operator: resolution };
}

function ignore(): void {}

/** Spread pollers apart so a crowd of waiters does not hit the store in lockstep. */
function jitter(ms: number): number {
  return Math.round(ms * (0.75 + Math.random() * 0.5));
}

export type { CallOptions, Envelope, IdempotentOptions, RecentSimilarCall, Tool, ToolContext };
