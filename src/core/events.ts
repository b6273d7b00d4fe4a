import type { Effect } from "./options.js";

/** What happened to one call; fed to the `onEvent` option for logs, metrics and traces. */
export const EventType = {
  /** This call claimed the key and runs the tool. */
  run: "run",
  /** The tool finished and its result was recorded. */
  completed: "completed",
  /** The tool failed definitively and the failure was recorded. */
  failed: "failed",
  /** The key was released: the effect did not happen and a retry may run. */
  released: "released",
  /** A repeat got the recorded outcome instead of running the tool. */
  replay: "replay",
  /** Same key, different arguments: rejected. */
  conflict: "conflict",
  /** Another call holds the key; this one waits for its outcome. */
  inFlightWait: "in_flight_wait",
  /**
   * This call stopped waiting for the call holding the key: `waitMs` passed (`error` is the
   * `idempotency_key_in_use` error it throws) or its signal aborted (`error` is the abort reason).
   */
  inFlightGaveUp: "in_flight_gave_up",
  /** A stale claim was taken over from a previous owner. */
  takeover: "takeover",
  /** The verify hook was asked about an unknown outcome. */
  verify: "verify",
  /** Nobody knows whether the effect happened; the call failed closed. */
  outcomeUnknown: "outcome_unknown",
  /** This worker lost its claim while running. */
  leaseLost: "lease_lost",
  /** The store failed or could not be reached. */
  storeError: "store_error",
} as const;
export type EventType = (typeof EventType)[keyof typeof EventType];

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
