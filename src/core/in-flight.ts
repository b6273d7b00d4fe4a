import { type Clock, systemClock } from "./clock.js";
import {
  type ClaimResult,
  type IdempotencyRecord,
  type IdempotencyStore,
  RecordStatus,
  recordIdText,
} from "./store.js";

/**
 * Calls on a key in this process, per store. A call registers a flight before it sends its claim; a repeat
 * in the same process that finds one joins it instead of sending a claim of its own, and, when that claim
 * landed, waits for the call to end and learns its outcome at that moment instead of at its next poll.
 * Other processes still poll the store, and so does a repeat whose flight's claim did not land.
 */
const running = new WeakMap<IdempotencyStore, Map<string, Flight>>();

/** One call in flight: repeats in this process join its claim and wait on `landed`. */
export interface Flight {
  readonly calls: Map<string, Flight>;
  readonly id: string;
  /** The claim this call sent, while it awaits the answer (absent once answered, or for a takeover's flight). */
  claim: Promise<ClaimResult> | undefined;
  /** Made by the first waiter (see landedOf): most calls have none, and pay no promise for it. */
  landed: Promise<void> | undefined;
  land: (() => void) | undefined;
  /** Whether the call holds the claim (it landed, or a takeover did): only such a call wakes waiters with an outcome. */
  holding: boolean;
  /** Set by `endFlight`: a repeat that joins later waits for nothing. */
  ended: boolean;
  /** Set when the call sends its settle. */
  settling: boolean;
  /** The record as the call's settle stored it, if it did. */
  settled: IdempotencyRecord | undefined;
}

/**
 * Register the call about to claim (`holding` false) or run (`holding` true) on (scope, key); pair with
 * {@link endFlight} in a `finally`.
 */
export function beginFlight(
  store: IdempotencyStore,
  scope: string,
  key: string,
  holding: boolean,
  id?: string,
): Flight {
  let calls = running.get(store);
  if (!calls) {
    calls = new Map();
    running.set(store, calls);
  }
  const flight: Flight = {
    calls,
    id: id ?? recordIdText(scope, key),
    claim: undefined,
    landed: undefined,
    land: undefined,
    holding,
    ended: false,
    settling: false,
    settled: undefined,
  };
  // A claim does not displace the call that holds the key: waiters keep waking on that one's end.
  const current = holding ? undefined : calls.get(flight.id);
  if (current === undefined || !current.holding || current.ended) calls.set(flight.id, flight);
  return flight;
}

/** The flight of a call on (scope, key) in this process, if one is under way. */
export function flightOf(store: IdempotencyStore, id: string): Flight | undefined {
  return running.get(store)?.get(id);
}

/**
 * The call in this process that holds the claim on (scope, key) and has not ended, if any: when it ends,
 * the store holds its outcome. (A call still claiming is no such call: waking on it would tell nothing.)
 */
export function holderOf(store: IdempotencyStore, id: string): Flight | undefined {
  const flight = running.get(store)?.get(id);
  return flight?.holding === true && !flight.ended ? flight : undefined;
}

/**
 * What a repeat learns by joining `flight`'s claim, still on its way, instead of sending its own: the record
 * that claim wrote, held by the flight's call, when it landed; undefined when it did not land (or failed),
 * and the repeat claims for itself. The answer is as fresh as the repeat's own claim's would be: it comes
 * after the repeat began, and the claim it reports holds a new lease that cannot pass before its call runs
 * the tool, let alone settles (which it can do only once this same answer reached it).
 */
export async function joinClaim(flight: Flight): Promise<ClaimResult | undefined> {
  const claim = flight.claim;
  if (claim === undefined) return undefined;
  let answer: ClaimResult;
  try {
    answer = await claim;
  } catch {
    return undefined;
  }
  return answer.claimed ? { claimed: false, record: answer.record, now: answer.now } : undefined;
}

/** The call has settled (or given up): wake whoever waits on it. */
export function endFlight(flight: Flight): void {
  if (flight.calls.get(flight.id) === flight) flight.calls.delete(flight.id);
  flight.ended = true;
  flight.land?.();
}

/** A promise that resolves when `flight` ends. */
function landedOf(flight: Flight): Promise<void> {
  if (flight.landed === undefined) {
    flight.landed = flight.ended
      ? Promise.resolve()
      : new Promise<void>((resolve) => {
          flight.land = resolve;
        });
  }
  return flight.landed;
}

/** How many calls on `store` this process holds in flight; for tests, which check it empties itself. */
export function flightCount(store: IdempotencyStore): number {
  return running.get(store)?.size ?? 0;
}

/**
 * Wait up to `ms` for the in-flight call on (scope, key) to finish, waking early if it runs in this process:
 * the flight `holder` when given (the call whose claim a repeat joined), else the holder registered now.
 */
export async function waitForOutcome(
  store: IdempotencyStore,
  scope: string,
  key: string,
  clock: Clock,
  ms: number,
  signal: AbortSignal | undefined,
  holder?: Flight,
): Promise<void> {
  const flight = holder ?? holderOf(store, recordIdText(scope, key));
  // The call it waits on already ended: its outcome is in the store now.
  if (flight?.ended === true) return;
  const local = flight === undefined ? undefined : landedOf(flight);
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

/**
 * What a waiter that began waiting on `holder` before it sent its settle learns when it wakes: the completed
 * or failed record that settle stored, as a claim would have found it at the settle's instant, which fell
 * within the waiter's call. Undefined otherwise (the settle was refused or failed, it stored an unknown
 * outcome, or the waiter began after it was sent), and the waiter reads the store.
 */
export function outcomeFor(holder: Flight, waitedSinceBeforeSettle: boolean): ClaimResult | undefined {
  const record = holder.settled;
  if (!waitedSinceBeforeSettle || record === undefined) return undefined;
  if (record.status !== RecordStatus.completed && record.status !== RecordStatus.failed) return undefined;
  return { claimed: false, record, now: record.updatedAt };
}
