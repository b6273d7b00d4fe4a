import { type Clock, systemClock } from "./clock.js";
import { type IdempotencyStore, recordIdText } from "./store.js";

/**
 * Calls running in this process, per store: a repeat in the same process learns the outcome the
 * moment it is settled instead of at its next poll. Other processes still poll the store.
 */
const running = new WeakMap<IdempotencyStore, Map<string, Flight>>();

/** One call in flight: repeats in this process wait on `landed`. */
export interface Flight {
  readonly calls: Map<string, Flight>;
  readonly id: string;
  readonly landed: Promise<void>;
  readonly land: () => void;
}

/** Register the call about to run on (scope, key); pair with {@link endFlight} in a `finally`. */
export function beginFlight(store: IdempotencyStore, scope: string, key: string): Flight {
  let calls = running.get(store);
  if (!calls) {
    calls = new Map();
    running.set(store, calls);
  }
  let land!: () => void;
  const landed = new Promise<void>((resolve) => {
    land = resolve;
  });
  const flight: Flight = { calls, id: recordIdText(scope, key), landed, land };
  calls.set(flight.id, flight);
  return flight;
}

/** The call has settled (or given up): wake whoever waits on it. */
export function endFlight(flight: Flight): void {
  if (flight.calls.get(flight.id) === flight) flight.calls.delete(flight.id);
  flight.land();
}

/** How many calls on `store` this process holds in flight; for tests, which check it empties itself. */
export function flightCount(store: IdempotencyStore): number {
  return running.get(store)?.size ?? 0;
}

/** Wait up to `ms` for the in-flight call on (scope, key) to finish, waking early if it runs in this process. */
export async function waitForOutcome(
  store: IdempotencyStore,
  scope: string,
  key: string,
  clock: Clock,
  ms: number,
  signal: AbortSignal | undefined,
): Promise<void> {
  const local = running.get(store)?.get(recordIdText(scope, key))?.landed;
  if (signal === undefined && clock === systemClock) {
    // A bare timer: clock.sleep with an AbortController to stop it makes a contended pair cost 49% more.
    let handle: NodeJS.Timeout | undefined;
    const sleeping = new Promise<void>((resolve) => {
      handle = setTimeout(resolve, ms);
    });
    try {
      await (local ? Promise.race([local, sleeping]) : sleeping);
    } finally {
      clearTimeout(handle);
    }
    return;
  }
  const timer = new AbortController();
  const onAbort = () => timer.abort(signal?.reason);
  // No `once`: the `finally` below removes it, aborted or not.
  signal?.addEventListener("abort", onAbort);
  try {
    const sleeping = clock.sleep(ms, timer.signal).catch(() => undefined);
    await (local ? Promise.race([local, sleeping]) : sleeping);
  } finally {
    timer.abort();
    signal?.removeEventListener("abort", onAbort);
  }
  signal?.throwIfAborted();
}
