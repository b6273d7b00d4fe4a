import type { Effect, EventType } from "./options.js";

export type { EventType };

/**
 * What happened to one call, as the `onEvent` option receives it, for logs, metrics and traces. Its `type`
 * is one of {@link EventType}, which options.ts keeps beside `Effect` (this module is types only).
 */
export interface IdempotencyEvent {
  readonly type: EventType;
  /**
   * The same for every event of one call and different for every other call, in this process and
   * (with overwhelming likelihood) in others: joins a call's events when two calls share a key.
   */
  readonly callId: string;
  readonly tool: string;
  readonly effect: Effect;
  readonly scope: string;
  readonly key: string;
  /** Epoch ms, by the core's clock. */
  readonly at: number;
  /** For `completed`, `failed`, `released`, `replay`, `in_flight_wait`: how long the call took so far (ms). */
  readonly durationMs?: number;
  /** The claim number (1 for the first claim, 2 after one takeover, …). */
  readonly attempt?: number;
  readonly error?: unknown;
}
