import { type Clock, systemClock } from "./clock.js";
import type { IdempotencyStore } from "./store.js";

/**
 * Calls running in this process, per store: a repeat in the same process learns the outcome the
 * moment it is settled instead of at its next poll. Other processes still poll the store.
 */
const running = new WeakMap<IdempotencyStore, Map<string, Promise<void>>>();

function idOf(scope: string, key: string): string {
  return `${scope.length}:${scope}${key}`;
}

/** Run `work` registered as the in-flight call for (scope, key). */
export async function withInFlight<T>(
  store: IdempotencyStore,
  scope: string,
  key: string,
  work: () => Promise<T>,
): Promise<T> {
  let calls = running.get(store);
  if (!calls) {
    calls = new Map();
    running.set(store, calls);
  }
  const id = idOf(scope, key);
  let done!: () => void;
  const finished = new Promise<void>((resolve) => {
    done = resolve;
  });
  calls.set(id, finished);
  try {
    return await work();
  } finally {
    if (calls.get(id) === finished) calls.delete(id);
    done();
  }
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
  const local = running.get(store)?.get(idOf(scope, key));
  if (signal === undefined && clock === systemClock) {
    // The common case needs no AbortController (~7 µs each on Node 20, and every waiter makes one).
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
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    const sleeping = clock.sleep(ms, timer.signal).catch(() => undefined);
    await (local ? Promise.race([local, sleeping]) : sleeping);
  } finally {
    timer.abort();
    signal?.removeEventListener("abort", onAbort);
  }
  signal?.throwIfAborted();
}
