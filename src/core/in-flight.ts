import { type Clock, systemClock } from "./clock.js";
import { type ClaimResult, type IdempotencyRecord, type IdempotencyStore, RecordStatus } from "./store.js";

/**
 * Calls on a key in this process, per store. A claim on its way is marked; a repeat in the same process that
 * finds the mark joins that claim instead of sending its own, and, when the claim landed, waits for the call
 * that sent it (its flight) to end and learns its outcome at that moment instead of at its next poll. Other
 * processes still poll the store, and so does a repeat whose joined claim did not land.
 *
 */
export interface Flights {
  /** The claims on their way. */
  readonly claims: Table<ClaimMark>;
  /** The calls that hold the claim on a key, until they end. */
  readonly calls: Table<Flight>;
}

/** An entry filed by its scope and key. */
interface Filed {
  readonly scope: string;
}

/** Entries by scope, then by key. */
type Table<T extends Filed> = Map<string, Map<string, T>>;

const running = new WeakMap<IdempotencyStore, Flights>();

/** The calls in flight on `store` in this process (a wrapped tool looks its store's up once). */
export function flightsOf(store: IdempotencyStore): Flights {
  let flights = running.get(store);
  if (flights === undefined) {
    flights = { claims: new Map(), calls: new Map() };
    running.set(store, flights);
  }
  return flights;
}

/** File `entry` under `key` in its scope, displacing the entry there, if any. */
function file<T extends Filed>(table: Table<T>, key: string, entry: T): void {
  let keys = table.get(entry.scope);
  if (keys === undefined) {
    keys = new Map();
    table.set(entry.scope, keys);
  }
  keys.set(key, entry);
}

/** Take `entry` out of the table, if it is still there (a later one may have displaced it). */
function unfile<T extends Filed>(table: Table<T>, key: string, entry: T): void {
  const keys = table.get(entry.scope);
  if (keys?.get(key) !== entry) return;
  keys.delete(key);
  if (keys.size === 0) table.delete(entry.scope);
}

/** The entry of (scope, key), if any. */
function find<T extends Filed>(table: Table<T>, scope: string, key: string): T | undefined {
  return table.get(scope)?.get(key);
}

/** How many entries the table holds. */
function countFiled<T extends Filed>(table: Table<T>): number {
  let count = 0;
  for (const keys of table.values()) count += keys.size;
  return count;
}

/** A claim on its way from this process, which a repeat on its (scope, key) may join. */
export interface ClaimMark extends Filed {
  readonly claim: Promise<ClaimResult>;
}

/**
 * Mark `claim` as on its way, for repeats in this process to join (see joinClaim); pair with
 * {@link unmarkClaim} once it is answered or failed. It displaces an earlier claim on (scope, key) still on
 * its way: a repeat joins the newest.
 */
export function markClaim(
  flights: Flights,
  scope: string,
  key: string,
  claim: Promise<ClaimResult>,
): ClaimMark {
  const mark: ClaimMark = { scope, claim };
  file(flights.claims, key, mark);
  return mark;
}

/**
 * The claim is answered (or failed): no repeat joins it from now on. Only a claim still on its way is
 * joined, since only its answer is as fresh as one a repeat would get from a claim of its own.
 */
export function unmarkClaim(flights: Flights, key: string, mark: ClaimMark): void {
  unfile(flights.claims, key, mark);
}

/** The claim on (scope, key) on its way from this process, if any. */
export function claimOnItsWay(
  flights: Flights,
  scope: string,
  key: string,
): Promise<ClaimResult> | undefined {
  return find(flights.claims, scope, key)?.claim;
}

/** One call that holds the claim on a key: repeats in this process wait on `landed`. */
export interface Flight extends Filed {
  readonly calls: Table<Flight>;
  readonly key: string;
  /** The owner token of the claim the call holds: a repeat that joined that claim finds the call by it. */
  readonly token: string;
  /** Made by the first waiter (see landedOf): most calls have none, and pay no promise for it. */
  landed: Promise<void> | undefined;
  land: (() => void) | undefined;
  /** Set by `endFlight`: a repeat that joins later waits for nothing. */
  ended: boolean;
  /** Set when the call sends its settle. */
  settling: boolean;
  /** The record as the call's settle stored it, if it did. */
  settled: IdempotencyRecord | undefined;
}

/**
 * Register the call that now holds the claim on (scope, key) under `token` (its claim landed, or it took
 * the key over); pair with {@link endFlight} in a `finally`. It displaces an earlier holder: the key is this
 * call's now, and waiters must wake on its end.
 */
export function beginFlight(store: IdempotencyStore, scope: string, key: string, token: string): Flight {
  const calls = flightsOf(store).calls;
  const flight: Flight = {
    scope,
    calls,
    key,
    token,
    landed: undefined,
    land: undefined,
    ended: false,
    settling: false,
    settled: undefined,
  };
  file(calls, key, flight);
  return flight;
}

/** The call in this process that holds the claim on (scope, key) and has not ended, if any. */
export function holderOf(store: IdempotencyStore, scope: string, key: string): Flight | undefined {
  const flight = find(flightsOf(store).calls, scope, key);
  return flight?.ended === false ? flight : undefined;
}

/** What a repeat that joined a claim that landed learns: the record it found, and the call that holds it. */
export interface Joined {
  readonly claim: ClaimResult;
  /** The call whose claim it joined, which wakes it when it ends (undefined only if it could not be found). */
  readonly holder: Flight | undefined;
}

/**
 * What a repeat learns by joining `claim`, another call's claim on (scope, key) still on its way (see
 * {@link claimOnItsWay}), instead of sending its own: the record that claim wrote, held by the call that sent it, when it landed; undefined
 * when it did not land (or failed), and the repeat claims for itself. The answer is as fresh as the
 * repeat's own claim's would be: it comes after the repeat began, and the claim it reports holds a new lease
 * that cannot pass before its call runs the tool, let alone settles (which it can do only once this same
 * answer reached it).
 */
export async function joinClaim(
  flights: Flights,
  scope: string,
  key: string,
  claim: Promise<ClaimResult>,
): Promise<Joined | undefined> {
  let answer: ClaimResult;
  try {
    answer = await claim;
  } catch {
    return undefined;
  }
  if (!answer.claimed) return undefined;
  // The call that sent the claim awaited its answer before this repeat did, so it resumed first, and
  // registered its flight before its first await: found here by the claim's owner token.
  const flight = find(flights.calls, scope, key);
  return {
    claim: { claimed: false, record: answer.record, now: answer.now },
    holder: flight?.token === answer.record.token ? flight : undefined,
  };
}

/** The call has settled (or given up): wake whoever waits on it. */
export function endFlight(flight: Flight): void {
  unfile(flight.calls, flight.key, flight);
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

/**
 * How many calls on `store` this process holds in flight, claims on their way included; for tests, which
 * check it empties itself.
 */
export function flightCount(store: IdempotencyStore): number {
  const flights = running.get(store);
  return flights === undefined ? 0 : countFiled(flights.claims) + countFiled(flights.calls);
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
  const flight = holder ?? holderOf(store, scope, key);
  // The call it waits on already ended: its outcome is in the store now.
  if (flight?.ended === true) return;
  const local = flight === undefined ? undefined : landedOf(flight);
  if (signal === undefined && clock === systemClock) {
    // A plain timer where nothing can abort the wait (the clock's sleep would add an AbortController).
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
