/**
 * Which call an event belongs to: the one with its `callId`, which the core puts on every event of one
 * call. A call ends at its last event: a store error while the tool runs (a renewal) or while a verify
 * hook is asked is one more step, elsewhere it ends the call. A call can still stop with no event of
 * its own (a release the store refused), so calls left open are closed as abandoned after a while.
 */
import type { EventType, IdempotencyEvent } from "../core/events.js";

/** Where an open call is in its life. */
type Stage = "waiting" | "took_over" | "verifying" | "running";

/** A call being followed, with whatever the caller attached (a span). */
export interface OpenCall<T> {
  readonly identity: string;
  readonly data: T;
  stage: Stage | undefined;
  /** Epoch ms of its last event. */
  lastAt: number;
}

/** What routing an event did. */
export type Routed<T> =
  | { readonly kind: "opened"; readonly call: OpenCall<T>; readonly ends: boolean }
  | { readonly kind: "continued"; readonly call: OpenCall<T>; readonly ends: boolean };

const stageAfter: Partial<Record<EventType, Stage>> = {
  in_flight_wait: "waiting",
  takeover: "took_over",
  verify: "verifying",
  run: "running",
};

export interface OpenCalls<T> {
  /** Find (or open, with `create`) the call this event belongs to; `ends` says whether it is its last. */
  route(event: IdempotencyEvent, create: () => T): Routed<T>;
  /** Forget a call that ended. */
  close(call: OpenCall<T>): void;
  /** Calls whose last event is older than `before` (epoch ms), oldest first. */
  stale(before: number): OpenCall<T>[];
  /** Every open call, oldest first. */
  all(): OpenCall<T>[];
  readonly size: number;
}

export function openCalls<T>(): OpenCalls<T> {
  const byIdentity = new Map<string, OpenCall<T>>();
  const all = (): OpenCall<T>[] => [...byIdentity.values()].sort((a, b) => a.lastAt - b.lastAt);

  return {
    route(event, create) {
      // An event made by hand without a call id is joined to the open call on its key, if any.
      const identity =
        typeof event.callId === "string"
          ? event.callId
          : `${event.tool}\u0000${event.scope}\u0000${event.key}`;
      const existing = byIdentity.get(identity);
      const call = existing ?? { identity, data: create(), stage: undefined, lastAt: event.at };
      if (!existing) byIdentity.set(identity, call);
      const next = stageAfter[event.type];
      const ends =
        next === undefined &&
        !(event.type === "store_error" && (call.stage === "running" || call.stage === "verifying"));
      if (next !== undefined) call.stage = next;
      call.lastAt = event.at;
      return { kind: existing ? "continued" : "opened", call, ends };
    },
    close(call) {
      if (byIdentity.get(call.identity) === call) byIdentity.delete(call.identity);
    },
    stale(before) {
      return all().filter((call) => call.lastAt < before);
    },
    all,
    get size() {
      return byIdentity.size;
    },
  };
}
