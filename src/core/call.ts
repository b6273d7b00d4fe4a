/**
 * One call's state as it goes through the core, and the fenced store operations every path shares:
 * settle, release and takeover under the owner token, store errors turned into `store_unavailable`, events.
 */
import { Buffer } from "node:buffer";
import type { SleepOptions } from "./clock.js";
import { IdempotencyError, LeaseLostError, StoreUnavailableError } from "./errors.js";
import type { EventType, IdempotencyEvent } from "./events.js";
import type { Flight } from "./in-flight.js";
import type { ResolvedOptions } from "./options.js";
import type { RecentSimilarCall } from "./similar.js";
import { type IdempotencyRecord, ownerToken, readBackOwnSettle, type SettleRequest } from "./store.js";
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
}

/** What the wrapped function receives beside its arguments. */
export interface ToolContext {
  readonly key: string;
  readonly scope: string;
  readonly tool: string;
  /** 1 for the first claim; higher after a takeover (pass `key` downstream so the downstream dedupes). */
  readonly attempt: number;
  /** Aborts when the caller aborts or this worker loses its claim. */
  readonly signal: AbortSignal;
}

export type Tool<A, R> = (args: A, context: ToolContext) => R | Promise<R>;

/** Everything one call carries through its life. */
export interface Call<A, R> {
  readonly fn: Tool<A, R>;
  readonly o: ResolvedOptions<A, Awaited<R>>;
  readonly args: A;
  readonly key: string;
  readonly scope: string;
  readonly fingerprint: string;
  /** With the `similar` option: where the near-duplicate marker for these arguments lives. */
  readonly similarKey: string | undefined;
  readonly startedAt: number;
  readonly signal: AbortSignal | undefined;
  /** Made at the call's first event, so a call nobody listens to never makes one. */
  callId: string | undefined;
  /** While the call holds its claim: its flight, which its settle tells the waiters in this process about. */
  flight?: Flight | undefined;
}

export const settleAttempts = 3;

/**
 * Settle under the owner token. Returns the settled record, "lost" when another owner took over,
 * or "store_failed" when the store could not be reached (the record then stays in progress, and its
 * lease decides what a repeat gets).
 */
export async function settleFenced<A, R>(
  c: Call<A, R>,
  record: IdempotencyRecord,
  status: "completed" | "failed" | "unknown",
  result: string | null,
  error: string | null,
): Promise<IdempotencyRecord | "lost" | "store_failed"> {
  // From here on a waiter that begins waiting may miss this settle's instant: it must read the store.
  if (c.flight) c.flight.settling = true;
  for (let attempt = 0; attempt < settleAttempts; attempt++) {
    try {
      const request: SettleRequest = {
        scope: c.scope,
        key: c.key,
        token: record.token,
        status,
        result,
        error,
        ttlMs: c.o.ttlMs,
        now: c.o.clock.now(),
      };
      // A refusal can be our own earlier settle (an attempt whose reply was lost): read back (as settleOwn).
      const settled = (await c.o.store.settle(request)) || (await readBackOwnSettle(c.o.store, request));
      if (settled && c.flight) c.flight.settled = settled;
      return settled ?? "lost";
    } catch (failure) {
      const consequence = "The tool ran; its outcome may not be recorded.";
      emit(c, "store_error", undefined, new StoreUnavailableError("settle", { cause: failure, consequence }));
    }
  }
  return "store_failed";
}

/**
 * Compare-and-swap the record from its stale owner to a fresh token of this call's. Returns the taken
 * record, or null when another caller moved it first.
 */
export async function takeOver<A, R>(
  c: Call<A, R>,
  record: IdempotencyRecord,
): Promise<IdempotencyRecord | null> {
  const token = ownerToken();
  try {
    const taken = await c.o.store.takeover({
      scope: c.scope,
      key: c.key,
      fromToken: record.token,
      token,
      leaseMs: c.o.leaseMs,
      ttlMs: c.o.ttlMs,
      now: c.o.clock.now(),
    });
    if (taken) return taken;
    // A client that resends a command whose reply was lost hears "moved on" from our own takeover: the
    // record carrying our new token says it landed.
    const current = await c.o.store.get({ scope: c.scope, key: c.key }, c.o.clock.now());
    return current?.token === token ? current : null;
  } catch (error) {
    throw storeFailure(c, "takeover", error);
  }
}

export async function releaseFenced<A, R>(c: Call<A, R>, record: IdempotencyRecord): Promise<void> {
  try {
    await c.o.store.release({ scope: c.scope, key: c.key, token: record.token });
    emit(c, "released", record.attempts);
  } catch (error) {
    // The record stays in progress; once its lease passes a repeat is judged by the effect class.
    const consequence = "The key stays claimed until its lease passes.";
    emit(c, "store_error", undefined, new StoreUnavailableError("release", { cause: error, consequence }));
  }
}

/** How long a caller keeps trying to free a claim it may have made, once the store stops answering. */
const releaseRetryBeyondLeaseMs = 60_000;
/** Nobody awaits those retries: they must not keep a finished process alive. */
const background: SleepOptions = { ref: false };

/**
 * The claim request failed, but it may have landed with its reply lost: the tool did not run under it, so
 * release it, fenced by the token (a claim that never landed, or a key another caller holds, is left
 * alone). When the store does not answer, keep trying in the background with backoff until it does, for
 * up to a minute past the lease: a repeat that arrives meanwhile waits on the claim as on any other.
 * A release answered before the failed claim lands would free nothing: the store contract forbids that
 * order (see IdempotencyStore), so one answered release is enough.
 */
export async function releaseUnrun<A, R>(c: Call<A, R>, token: string): Promise<void> {
  const release = async () => {
    await c.o.store.release({ scope: c.scope, key: c.key, token });
  };
  try {
    await release();
    return;
  } catch (error) {
    emit(c, "store_error", undefined, new StoreUnavailableError("release", { cause: error }));
  }
  void (async () => {
    let delayMs = 100;
    for (let waitedMs = 0; waitedMs < c.o.leaseMs + releaseRetryBeyondLeaseMs; waitedMs += delayMs) {
      await c.o.clock.sleep(delayMs, undefined, background);
      try {
        await release();
        emit(c, "released");
        return;
      } catch (error) {
        emit(c, "store_error", undefined, new StoreUnavailableError("release", { cause: error }));
      }
      delayMs = Math.min(delayMs * 2, 5_000);
    }
  })();
}

/** A store operation failed: the error the caller gets (`store_unavailable` unless the store said more). */
export function storeFailure<A, R>(c: Call<A, R>, operation: string, error: unknown): IdempotencyError {
  const failure =
    error instanceof IdempotencyError ? error : new StoreUnavailableError(operation, { cause: error });
  emit(c, "store_error", undefined, failure);
  return failure;
}

export function leaseLost<A, R>(c: Call<A, R>, record: IdempotencyRecord, cause?: unknown): LeaseLostError {
  const error = new LeaseLostError(c.key, cause === undefined ? undefined : { cause });
  emit(c, "lease_lost", record.attempts, error);
  return error;
}

export function envelope<A, R>(
  c: Call<A, R>,
  result: Awaited<R>,
  wasReplay: boolean,
  calledAt: number,
  expiresAt: number,
): Envelope<Awaited<R>> {
  return {
    result,
    was_replay: wasReplay,
    original_called_at: iso(calledAt),
    idempotency_key: c.key,
    expires_at: iso(expiresAt),
  };
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
export function emit<A, R>(c: Call<A, R>, type: EventType, attempt?: number, error?: unknown): void {
  const onEvent = c.o.onEvent;
  if (!onEvent) return;
  const at = c.o.clock.now();
  c.callId ??= nextCallId();
  const event: { -readonly [K in keyof IdempotencyEvent]: IdempotencyEvent[K] } = {
    type,
    callId: c.callId,
    tool: c.o.name,
    effect: c.o.effect,
    scope: c.scope,
    key: c.key,
    at,
    durationMs: at - c.startedAt,
  };
  if (attempt !== undefined) event.attempt = attempt;
  if (error !== undefined) event.error = error;
  try {
    onEvent(event);
  } catch {
    // Observability must never change what a call does.
  }
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
