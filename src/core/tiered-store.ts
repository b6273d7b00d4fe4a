import { durationOption, invalidOption, sizeOption } from "./option-checks.js";
import { type IdempotencyRecord, type IdempotencyStore, RecordStatus, recordIdText } from "./store.js";

export interface TieredStoreOptions {
  /** The durable store that holds every record. */
  readonly store: IdempotencyStore;
  /** The most settled records kept in process, a whole number ≥ 1. Default 10 000. */
  readonly maxEntries?: number | undefined;
  /**
   * How long (ms, by the caller's clock) a cached record is served before it is checked against the
   * durable store again: the longest a delete, purge or reconciliation made elsewhere can go unseen here.
   * Default 1 000; 0 serves nothing from the cache.
   */
  readonly maxStalenessMs?: number | undefined;
}

/** A cached record, and the clocks it was seen by. */
interface Entry {
  readonly record: IdempotencyRecord;
  /** The caller's clock when the durable store returned the record. */
  readonly cachedAt: number;
  /** The durable store's clock minus the caller's, as seen then: never less than the true offset. */
  readonly offsetMs: number;
  /** LRU position: higher is more recent. */
  readonly stamp: number;
}

/**
 * A bounded in-process LRU of settled records in front of a durable store: a replay is answered
 * without a round trip. Completed and failed records never change until they expire, so the cache
 * may evict anything at any time: the durable store still holds the record.
 * In-progress and unknown records are never cached: another worker may settle them at any moment.
 *
 * What the cache serves, the durable store would serve too, within a bounded staleness:
 * - A cached record is never served past its `expiresAt` as judged by the durable store's clock: the
 *   cache remembers how far that clock was ahead of the caller's when it saw the record (stores with a
 *   server clock, such as PostgreSQL and Redis, may judge by a clock far from the caller's).
 * - A cached record is served for at most `maxStalenessMs` (default 1 000) of the caller's clock; then
 *   the next call asks the durable store again. So a record deleted, purged or reconciled by another
 *   process, or by the command line, stops being replayed here within `maxStalenessMs`. If the
 *   caller's clock steps back, cached records are asked about again at once.
 * - A delete or purge made through this store drops the cached entries it may change at once.
 * See docs/stores.md for more.
 *
 * @example
 * import { idempotent, tieredStore } from "idempotool";
 * import { sqliteStore } from "idempotool/sqlite";
 *
 * const store = tieredStore({ store: sqliteStore({ path: "idempotool.db" }), maxEntries: 50_000 });
 * const sendEmail = idempotent(async (args: { to: string }) => ({ sent: args.to }), { name: "send_email", store });
 */
export function tieredStore(options: TieredStoreOptions): IdempotencyStore {
  const durable = options.store;
  if (typeof durable !== "object" || durable === null || typeof durable.claim !== "function") {
    invalidOption("tieredStore()", "store", "must be an idempotency store");
  }
  const maxEntries = sizeOption("tieredStore()", "maxEntries", options.maxEntries, 10_000);
  const maxStalenessMs = durationOption("tieredStore()", "maxStalenessMs", options.maxStalenessMs, 1_000, {
    min: 0,
  });
  // A Map iterates in insertion order, oldest first. A hit moves its entry to the back only once it has
  // drifted into the older half: in V8, deleting and re-inserting one key costs O(size) when it is done over
  // and over (28 µs a hit at 10 000 entries on Node 20), and an entry in the newer half is not next to go.
  const cache = new Map<string, Entry>();
  let stamp = 0;

  /**
   * Cache a settled record the durable store returned at `storeNow` by its clock, for a request made at
   * `localNow` by the caller's. The request's time was read before the store judged, so the offset seen
   * is never less than the true one: the cache errs towards expiring a record early.
   */
  const remember = (record: IdempotencyRecord | null | undefined, localNow: number, storeNow: number) => {
    if (!record || (record.status !== RecordStatus.completed && record.status !== RecordStatus.failed))
      return;
    const id = recordIdText(record.scope, record.key);
    cache.delete(id);
    cache.set(id, { record, cachedAt: localNow, offsetMs: storeNow - localNow, stamp: ++stamp });
    if (cache.size > maxEntries) cache.delete(cache.keys().next().value as string);
  };
  const cached = (scope: string, key: string, now: number): Entry | undefined => {
    const id = recordIdText(scope, key);
    const entry = cache.get(id);
    if (!entry) return undefined;
    const age = now - entry.cachedAt;
    // A clock that stepped back cannot tell how old the entry is, nor what time the store has reached.
    if (age < 0 || age >= maxStalenessMs || entry.record.expiresAt <= now + entry.offsetMs) {
      cache.delete(id);
      return undefined;
    }
    if (entry.stamp < stamp - maxEntries / 2) {
      cache.delete(id);
      cache.set(id, { ...entry, stamp: ++stamp });
    }
    return entry;
  };
  const forget = (scope: string, key: string) => cache.delete(recordIdText(scope, key));

  return {
    ...(durable.maxStoredResultBytes === undefined
      ? {}
      : { maxStoredResultBytes: durable.maxStoredResultBytes }),
    async claim(request) {
      const hit = cached(request.scope, request.key, request.now);
      if (hit) return { claimed: false, record: hit.record, now: request.now + hit.offsetMs };
      // The record it finds is cached by the store's clock, so that clock it must be.
      const result = await durable.claim({ ...request, exactNow: true });
      if (!result.claimed) remember(result.record, request.now, result.now);
      return result;
    },
    async settle(request) {
      const settled = await durable.settle(request);
      // A settled record carries the store's time of settling as `updatedAt`.
      if (settled) remember(settled, request.now, settled.updatedAt);
      return settled;
    },
    takeover: (request) => durable.takeover(request),
    renew: (request) => durable.renew(request),
    release: (request) => durable.release(request),
    // Get does not fill the cache: it does not say what time the store judged by.
    async get(id, now) {
      return cached(id.scope, id.key, now)?.record ?? durable.get(id, now);
    },
    // Forgotten before and after: a claim answered just before the delete landed may have cached it again.
    async delete(id) {
      forget(id.scope, id.key);
      const deleted = await durable.delete(id);
      forget(id.scope, id.key);
      return deleted;
    },
    list: (query) => durable.list(query),
    async purge(request) {
      // Which records went is not reported, so the next calls ask the durable store again.
      cache.clear();
      const purged = await durable.purge(request);
      cache.clear();
      return purged;
    },
    async close() {
      cache.clear();
      await durable.close?.();
    },
  };
}
