/**
 * Which call an event belongs to. The core's events carry the tool, scope and key but no call id, so
 * two calls on one key at once (a duplicate emission) are told apart by where each is in its life:
 * `in_flight_wait` always opens a call, `verify` follows a `takeover`, `completed` follows a `run`, and
 * so on. The core emits nothing when a waiter gives up (`idempotency_key_in_use`) or when a release
 * fails, so calls left open are closed as abandoned after a while.
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

const terminalAfterRun = new Set<EventType>(["completed", "failed", "released", "lease_lost"]);

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
  const byIdentity = new Map<string, OpenCall<T>[]>();
  let size = 0;

  const find = (identity: string, stages: readonly Stage[]): OpenCall<T> | undefined => {
    const calls = byIdentity.get(identity) ?? [];
    for (const stage of stages) {
      const call = calls.find((c) => c.stage === stage);
      if (call) return call;
    }
    return undefined;
  };

  const all = (): OpenCall<T>[] => [...byIdentity.values()].flat().sort((a, b) => a.lastAt - b.lastAt);

  const open = (identity: string, data: T, at: number): OpenCall<T> => {
    const call: OpenCall<T> = { identity, data, stage: undefined, lastAt: at };
    const calls = byIdentity.get(identity);
    if (calls) calls.push(call);
    else byIdentity.set(identity, [call]);
    size += 1;
    return call;
  };

  return {
    route(event, create) {
      const identity = `${event.tool}\u0000${event.scope}\u0000${event.key}`;
      const { type } = event;
      // Which open call, by stage, this event can continue, in order of preference; and where it leaves it.
      let candidates: readonly Stage[];
      let next: Stage | undefined;
      let ends: boolean;
      if (type === "in_flight_wait") [candidates, next, ends] = [[], "waiting", false];
      else if (type === "takeover") [candidates, next, ends] = [["waiting"], "took_over", false];
      else if (type === "verify") [candidates, next, ends] = [["took_over"], "verifying", false];
      else if (type === "run")
        [candidates, next, ends] = [["took_over", "verifying", "waiting"], "running", false];
      else if (terminalAfterRun.has(type)) [candidates, next, ends] = [["running"], undefined, true];
      else if (type === "replay") [candidates, next, ends] = [["verifying", "waiting"], undefined, true];
      else if (type === "outcome_unknown") {
        [candidates, next, ends] = [["verifying", "running", "waiting", "took_over"], undefined, true];
      } else if (type === "store_error") {
        // While the tool runs, a store error (renew, settle retry) is one more step; otherwise it ended the call.
        const running = find(identity, ["running", "verifying"]);
        if (running) {
          running.lastAt = event.at;
          return { kind: "continued", call: running, ends: false };
        }
        [candidates, next, ends] = [["took_over", "waiting"], undefined, true];
      } else [candidates, next, ends] = [[], undefined, true]; // conflict: the claim answered at once.

      const existing = find(identity, candidates);
      const call = existing ?? open(identity, create(), event.at);
      call.stage = next;
      call.lastAt = event.at;
      return { kind: existing ? "continued" : "opened", call, ends };
    },
    close(call) {
      const calls = byIdentity.get(call.identity);
      if (!calls) return;
      const at = calls.indexOf(call);
      if (at === -1) return;
      calls.splice(at, 1);
      size -= 1;
      if (calls.length === 0) byIdentity.delete(call.identity);
    },
    stale(before) {
      return all().filter((call) => call.lastAt < before);
    },
    all,
    get size() {
      return size;
    },
  };
}
