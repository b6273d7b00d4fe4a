/**
 * One call's state as it goes through the core, what it hands back, the events it emits, and every store
 * write it makes: its claim, and the settle, takeover, renewal and release fenced by the owner token. A
 * write the store does not answer becomes `store_unavailable` (or a `store_error` event where the call goes
 * on); a refusal that may be this owner's own earlier write, resent, is read back first.
 */
import { Buffer } from "node:buffer";
import { monotonicNow, type SleepOptions } from "./clock.js";
import {
  ErrorCode,
  IdempotencyError,
  isIdempotencyError,
  LeaseLostError,
  StoreUnavailableError,
} from "./errors.js";
import type { EventType, IdempotencyEvent } from "./events.js";
import type { Flight } from "./in-flight.js";
import type { ResolvedOptions } from "./options.js";
import type { OperatorResolution } from "./outcomes.js";
import type { RecentSimilarCall } from "./similar.js";
import {
  type ClaimResult,
  type IdempotencyRecord,
  ownerToken,
  readBackOwnSettle,
  type SettleRequest,
} from "./store.js";
import { iso } from "./time.js";

/** What a wrapped call returns, and what the model reads (snake_case, as JSON a model sees). */
export interface Envelope<R> {
  /** The tool's result: this call's, or the original one on a replay. */
  readonly result: R;
  /** True when the tool did not run for this call and the original outcome was handed back. */
  readonly was_replay: boolean;
  /** When the original call claimed the key (ISO-8601). */
  readonly original_called_at: string;
  readonly idempotency_key: string;
  /** Until when a repeat is still absorbed (ISO-8601). */
  readonly expires_at: string;
  /**
   * With the `similar` option: a call of this tool under another key that matched this one's similar
   * fields and completed within the window. This call still ran; the agent may want to ask the user.
   */
  readonly recent_similar_call?: RecentSimilarCall;
  /**
   * On a replay of an outcome an operator recorded by hand (the tool's own run never reported it): who
   * resolved it, when, and on what evidence.
   */
  readonly resolved_by_operator?: OperatorResolution;
}

/** What the wrapped function receives beside its arguments. */
export interface ToolContext {
  readonly key: string;
  readonly scope: string;
  readonly tool: string;
  /** 1 for the first claim; higher after a takeover (pass `key` downstream so the downstream dedupes). */
  readonly attempt: number;
  /**
   * Aborts when the caller aborts or this worker loses its claim (`LeaseLostError`): a renewal was refused, or
   * no renewal reached the store before the lease passed, so another caller may take the key over.
   */
  readonly signal: AbortSignal;
}

export type Tool<A, R> = (args: A, context: ToolContext) => R | Promise<R>;

/** Everything one call carries through its life. */
export interface Call<A, R> {
  readonly fn: Tool<A, R>;
  readonly options: ResolvedOptions<A, Awaited<R>>;
  readonly args: A;
  readonly key: string;
  readonly scope: string;
  readonly fingerprint: string;
  /**
   * The owner token of every claim this call makes: a claim whose reply was lost and that the client resent
   * (or that the call makes again) finds its own record, and a claim given up on can be released.
   */
  readonly token: string;
  /** With the `similar` option: where the near-duplicate marker for these arguments lives. */
  readonly similarKey: string | undefined;
  readonly startedAt: number;
  readonly signal: AbortSignal | undefined;
  /** Made at the call's first event, so a call nobody listens to never makes one. */
  callId: string | undefined;
  /** While the call holds its claim: its flight, which its settle tells the waiters in this process about. */
  flight: Flight | undefined;
  /**
   * When the call's latest claim or takeover was sent, by {@link monotonicNow}: the store
   * began the lease it answers with no earlier, so the call counts its lease from here.
   */
  claimSentAt: number;
}

export function envelope<A, R>(
  call: Call<A, R>,
  result: Awaited<R>,
  wasReplay: boolean,
  calledAt: number,
  expiresAt: number,
): Envelope<Awaited<R>> {
  return {
    result,
    was_replay: wasReplay,
    original_called_at: iso(calledAt),
    idempotency_key: call.key,
    expires_at: iso(expiresAt),
  };
}

export function leaseLost<A, R>(
  call: Call<A, R>,
  record: IdempotencyRecord,
  cause?: unknown,
): LeaseLostError {
  const error = new LeaseLostError(call.key, cause === undefined ? undefined : { cause });
  emit(call, "lease_lost", record.attempts, error);
  return error;
}

// A random part per process, so ids from many processes do not collide in one trace backend, then a
// counter: a call id costs one short string, and only for a call whose events someone listens to.
let callIdPrefix: string | undefined;
let callCount = 0;

function nextCallId(): string {
  callIdPrefix ??= Buffer.from(crypto.getRandomValues(new Uint8Array(6))).toString("hex");
  callCount += 1;
  return `${callIdPrefix}-${callCount.toString(36)}`;
}

/** Tell `onEvent`, if given, what just happened (with no listener this allocates nothing). */
export function emit<A, R>(call: Call<A, R>, type: EventType, attempt?: number, error?: unknown): void {
  const onEvent = call.options.onEvent;
  if (!onEvent) return;
  const at = call.options.clock.now();
  call.callId ??= nextCallId();
  const event: { -readonly [K in keyof IdempotencyEvent]: IdempotencyEvent[K] } = {
    type,
    callId: call.callId,
    tool: call.options.name,
    effect: call.options.effect,
    scope: call.scope,
    key: call.key,
    at,
    durationMs: at - call.startedAt,
  };
  if (attempt !== undefined) event.attempt = attempt;
  if (error !== undefined) event.error = error;
  try {
    onEvent(event);
  } catch {
    // Observability must never change what a call does.
  }
}

/**
 * The `default` of a `switch` over an event's actions, which the compiler proves unreachable: each event's
 * actions are a type of their own (see decide.ts), and every switch covers all of them.
 */
export function unreachable(action: never): never {
  throw new Error(`idempotool: no step carries out "${String(action)}"; nothing more runs.`);
}

export const settleAttempts = 3;

/** Claim the key under the call's token (a store that throws at once gives a rejected claim). */
export function claim<A, R>(call: Call<A, R>): Promise<ClaimResult> {
  const { options } = call;
  call.claimSentAt = monotonicNow(options.clock);
  try {
    return options.store.claim({
      scope: call.scope,
      key: call.key,
      tool: options.name,
      fingerprint: call.fingerprint,
      token: call.token,
      leaseMs: options.leaseMs,
      ttlMs: options.ttlMs,
      now: options.clock.now(),
    });
  } catch (error) {
    return Promise.reject(error);
  }
}

/**
 * Settle under the owner token. Returns the settled record, "lost" when another owner took over,
 * or "store_failed" when the store could not be reached (the record then stays in progress, and its
 * lease decides what a repeat gets).
 */
export async function settleFenced<A, R>(
  call: Call<A, R>,
  record: IdempotencyRecord,
  status: "completed" | "failed" | "unknown",
  result: string | null,
  error: string | null,
): Promise<IdempotencyRecord | "lost" | "store_failed"> {
  const { options, flight } = call;
  // From here on a waiter that begins waiting may miss this settle's instant: it must read the store.
  if (flight) flight.settling = true;
  for (let attempt = 0; attempt < settleAttempts; attempt++) {
    try {
      const request: SettleRequest = {
        scope: call.scope,
        key: call.key,
        token: record.token,
        status,
        result,
        error,
        ttlMs: options.ttlMs,
        now: options.clock.now(),
      };
      // A refusal can be our own earlier settle (an attempt whose reply was lost): read back (as settleOwn).
      const settled =
        (await options.store.settle(request)) || (await readBackOwnSettle(options.store, request));
      if (settled && flight) flight.settled = settled;
      return settled ?? "lost";
    } catch (failure) {
      reportStoreError(call, "settle", failure, "The tool ran; its outcome may not be recorded.");
    }
  }
  return "store_failed";
}

/**
 * Compare-and-swap the record from its stale owner to a fresh token of this call's. Returns the taken
 * record, or null when another caller moved it first. A takeover whose answer was a refusal or was lost
 * may have landed all the same: the record is read back, and carrying the new token, it is this call's.
 */
export async function takeOver<A, R>(
  call: Call<A, R>,
  record: IdempotencyRecord,
): Promise<IdempotencyRecord | null> {
  const { options } = call;
  const id = { scope: call.scope, key: call.key };
  const token = ownerToken();
  let answer: IdempotencyRecord | null;
  call.claimSentAt = monotonicNow(options.clock);
  try {
    answer = await options.store.takeover({
      ...id,
      fromToken: record.token,
      token,
      leaseMs: options.leaseMs,
      ttlMs: options.ttlMs,
      now: options.clock.now(),
    });
  } catch (error) {
    // Its reply lost, a takeover that landed would hold the key, unheard, until its lease passed.
    let current: IdempotencyRecord | undefined;
    try {
      current = await options.store.get(id, options.clock.now());
    } catch {
      // The takeover's own failure is what the caller hears.
    }
    // Only while its lease holds: a takeover answered that late is judged again, as any stale claim.
    if (current?.token === token && current.leaseExpiresAt > options.clock.now()) return current;
    throw storeFailure(call, "takeover", error);
  }
  if (answer) return answer;
  // A client that resends a command whose reply was lost hears "moved on" from our own takeover.
  try {
    const current = await options.store.get(id, options.clock.now());
    return current?.token === token ? current : null;
  } catch (error) {
    throw storeFailure(call, "takeover", error);
  }
}

/**
 * Whether this call still holds the record, by a renewal fenced by its token: a hook may have answered
 * after the lease passed and another caller took the record. A store that does not answer is reported.
 */
export async function stillHeld<A, R>(call: Call<A, R>, record: IdempotencyRecord): Promise<boolean> {
  const { options } = call;
  try {
    return await options.store.renew({
      scope: call.scope,
      key: call.key,
      token: record.token,
      leaseMs: options.leaseMs,
      ttlMs: options.ttlMs,
      now: options.clock.now(),
    });
  } catch (error) {
    throw storeFailure(call, "renew", error);
  }
}

/** Free the key the call holds, fenced by the record's token; a store that does not answer is reported. */
export async function releaseFenced<A, R>(call: Call<A, R>, record: IdempotencyRecord): Promise<void> {
  try {
    await call.options.store.release({ scope: call.scope, key: call.key, token: record.token });
    emit(call, "released", record.attempts);
  } catch (error) {
    // The record stays in progress; once its lease passes a repeat is judged by the effect class.
    reportStoreError(call, "release", error, "The key stays claimed until its lease passes.");
  }
}

/** How long a caller keeps trying to free a claim it may have made, once the store stops answering. */
const releaseRetryBeyondLeaseMs = 60_000;
/** Nobody awaits those retries: they must not keep a finished process alive. */
const background: SleepOptions = { ref: false };

/**
 * The claim request failed, but it may have landed with its reply lost: the tool did not run under it, so
 * release it, fenced by the call's token (a claim that never landed, or a key another caller holds, is left
 * alone). When the store does not answer, keep trying in the background with backoff until it does, for
 * up to a minute past the lease: a repeat that arrives meanwhile waits on the claim as on any other.
 * A release answered before the failed claim lands would free nothing: the store contract forbids that
 * order (see IdempotencyStore), so one answered release is enough.
 */
export async function releaseUnrun<A, R>(call: Call<A, R>): Promise<void> {
  const { options } = call;
  const release = async () => {
    await options.store.release({ scope: call.scope, key: call.key, token: call.token });
  };
  try {
    await release();
    return;
  } catch (error) {
    // A store that refuses the key itself (a character it cannot hold) holds no claim under it either.
    if (isIdempotencyError(error, ErrorCode.invalidArguments)) return;
    reportStoreError(call, "release", error);
  }
  void (async () => {
    let delayMs = 100;
    for (let waitedMs = 0; waitedMs < options.leaseMs + releaseRetryBeyondLeaseMs; waitedMs += delayMs) {
      await options.clock.sleep(delayMs, undefined, background);
      try {
        await release();
        emit(call, "released");
        return;
      } catch (error) {
        reportStoreError(call, "release", error);
      }
      delayMs = Math.min(delayMs * 2, 5_000);
    }
  })();
}

/**
 * A store operation failed where the call goes on without it: a `store_error` event says which operation
 * and, where given, what the call lost by it.
 */
export function reportStoreError<A, R>(
  call: Call<A, R>,
  operation: string,
  error: unknown,
  consequence?: string,
): void {
  emit(call, "store_error", undefined, new StoreUnavailableError(operation, { cause: error, consequence }));
}

/** A store operation failed: the error the caller gets (`store_unavailable` unless the store said more). */
export function storeFailure<A, R>(call: Call<A, R>, operation: string, error: unknown): IdempotencyError {
  const failure =
    error instanceof IdempotencyError ? error : new StoreUnavailableError(operation, { cause: error });
  emit(call, "store_error", undefined, failure);
  return failure;
}
