/**
 * One call's state as it goes through the core, what it hands back, and the events it emits.
 */
import { Buffer } from "node:buffer";
import { LeaseLostError } from "./errors.js";
import type { EventType, IdempotencyEvent } from "./events.js";
import type { Flight } from "./in-flight.js";
import type { ResolvedOptions } from "./options.js";
import { messageOf } from "./outcomes.js";
import type { RecentSimilarCall } from "./similar.js";
import type { IdempotencyRecord } from "./store.js";
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

/** The message of anything thrown (see messageOf). */
export const errorMessage = messageOf;

/**
 * The `default` of a `switch` over an event's actions, which the compiler proves unreachable: each event's
 * actions are a type of their own (see decide.ts), and every switch covers all of them.
 */
export function unreachable(action: never): never {
  throw new Error(`idempotool: no step carries out "${String(action)}"; nothing more runs.`);
}
