import { StoreFullError } from "./errors.js";
import { sizeOption } from "./option-checks.js";
import {
  type ClaimRequest,
  type ClaimResult,
  claimedRecord,
  type IdempotencyRecord,
  type IdempotencyStore,
  type ListPage,
  type ListQuery,
} from "./store.js";

/** Options of {@link memoryStore}. */
export interface MemoryStoreOptions {
  /**
   * The most records held at once, a whole number ≥ 1 (default 10_000). When full, a claim first removes expired
   * records, and otherwise fails with `store_full`: a live record is never dropped to make room.
   */
  readonly maxRecords?: number | undefined;
}

const DEFAULT_MAX_RECORDS = 10_000;

/**
 * An in-process store: one process, lost on exit. Good for tests, scripts and single-process agents;
 * use a durable store when repeats can come from another process or after a restart.
 *
 * Records are frozen and replaced on every change, so the store hands out its own objects without
 * copying. Expiry times sit in a min-heap, so purge costs in proportion to what expired. `list` shows
 * every record still held, including expired ones that no purge or lookup has removed yet.
 *
 * @example
 * import { idempotent, memoryStore } from "idempotool";
 *
 * const sendEmail = idempotent(async (args: { to: string }) => ({ sentTo: args.to }), {
 *   name: "send_email",
 *   store: memoryStore({ maxRecords: 50_000 }),
 * });
 * await sendEmail({ to: "alice@example.com" }, { key: "turn-7-email-alice" });
 */
export function memoryStore(options: MemoryStoreOptions = {}): IdempotencyStore {
  const maxRecords = sizeOption("memoryStore()", "maxRecords", options.maxRecords, DEFAULT_MAX_RECORDS);
  // scope -> key -> slot: no composite key to build on every call, and no separator that could collide.
  const scopes = new Map<string, Map<string, Slot>>();
  let size = 0;
  // When to look at each record again, earliest first. Invariant: every stored record has an entry due no
  // later than its expiresAt, and its slot's dueAt is the time of one of its entries. A change that keeps
  // expiresAt at or after dueAt needs no new entry: a claim files its entry at the earliest time a settle
  // (by a clock that did not go back) can bring its expiry to, so settles, renewals and takeovers push
  // nothing, and a popped entry whose record lives longer is pushed back at the new time. Entries of
  // removed records are skipped when popped, and the heap is rebuilt when they pile up. An entry is only the
  // record's id and time, not the record: a settled record replaces its claim, and the heap must not keep
  // the claim alive.
  let expiries: Due[] = [];

  /** Store `record` as its key's new record; `slot` is the key's, if it has one, and `dueAt` when to look first. */
  const put = (slot: Slot | undefined, record: IdempotencyRecord, dueAt: number) => {
    if (slot === undefined) {
      let keys = scopes.get(record.scope);
      if (keys === undefined) {
        keys = new Map();
        scopes.set(record.scope, keys);
      }
      slot = { record, dueAt };
      keys.set(record.key, slot);
      size++;
    } else {
      slot.record = record;
      if (slot.dueAt <= record.expiresAt) return;
      slot.dueAt = dueAt;
    }
    heapPush(expiries, { scope: record.scope, key: record.key, expiresAt: dueAt });
    if (expiries.length > 2 * size + 1_024) expiries = heapFrom(allSlots(scopes));
  };

  /** The slot of (scope, key), if the store holds a record there. */
  const slotOf = (scope: string, key: string) => scopes.get(scope)?.get(key);
  const find = (scope: string, key: string) => slotOf(scope, key)?.record;

  const remove = (scope: string, key: string): boolean => {
    const keys = scopes.get(scope);
    if (keys === undefined || !keys.delete(key)) return false;
    size--;
    if (keys.size === 0) scopes.delete(scope);
    return true;
  };

  const removeExpired = (now: number, limit: number): number => {
    let deleted = 0;
    while (deleted < limit) {
      const next = expiries[0];
      if (next === undefined || next.expiresAt > now) break;
      heapPop(expiries);
      const slot = slotOf(next.scope, next.key);
      if (slot === undefined) continue;
      if (slot.record.expiresAt <= now) {
        remove(next.scope, next.key);
        deleted++;
      } else if (slot.dueAt <= next.expiresAt) {
        // Its earliest entry: look again when the record would expire. A slot whose dueAt is later has an
        // entry of its own still in the heap (this one is left from a record since removed).
        slot.dueAt = slot.record.expiresAt;
        heapPush(expiries, due(slot.record));
      }
    }
    return deleted;
  };

  return {
    async claim(request: ClaimRequest): Promise<ClaimResult> {
      const slot = slotOf(request.scope, request.key);
      if (slot !== undefined && slot.record.expiresAt > request.now) {
        return { claimed: false, record: slot.record, now: request.now };
      }
      if (slot === undefined && size >= maxRecords) {
        removeExpired(request.now, Number.POSITIVE_INFINITY);
        if (size >= maxRecords) throw new StoreFullError(maxRecords);
      }
      const record = Object.freeze(claimedRecord(request, request.now));
      put(slot, record, Math.min(record.expiresAt, request.now + request.ttlMs));
      return { claimed: true, record, now: request.now };
    },

    async takeover(request) {
      const slot = slotOf(request.scope, request.key);
      const r = slot?.record;
      if (r === undefined || r.expiresAt <= request.now || r.token !== request.fromToken) return null;
      const stale = r.status === "unknown" || (r.status === "in_progress" && r.leaseExpiresAt <= request.now);
      if (!stale) return null;
      const leaseExpiresAt = request.now + request.leaseMs;
      const next = Object.freeze({
        ...r,
        status: "in_progress" as const,
        token: request.token,
        updatedAt: request.now,
        leaseExpiresAt,
        expiresAt: Math.max(r.expiresAt, leaseExpiresAt + request.ttlMs),
        attempts: r.attempts + 1,
        result: null,
      });
      put(slot, next, next.expiresAt);
      return next;
    },

    // Past its window too: the effect happened, and nobody claimed the key since (a claim would have
    // replaced the record and its token).
    async settle(request) {
      const slot = slotOf(request.scope, request.key);
      const r = slot?.record;
      if (r === undefined || r.token !== request.token || !isOpen(r)) return null;
      const next = Object.freeze({
        ...r,
        status: request.status,
        updatedAt: request.now,
        leaseExpiresAt: request.now,
        expiresAt: request.now + request.ttlMs,
        result: request.result,
        error: request.error,
      });
      put(slot, next, next.expiresAt);
      return next;
    },

    async renew(request) {
      const slot = slotOf(request.scope, request.key);
      const r = slot?.record;
      if (r === undefined || r.token !== request.token || r.status !== "in_progress") return false;
      const leaseExpiresAt = request.now + request.leaseMs;
      const next = Object.freeze({
        ...r,
        updatedAt: request.now,
        leaseExpiresAt,
        expiresAt: Math.max(r.expiresAt, leaseExpiresAt + request.ttlMs),
      });
      put(slot, next, next.expiresAt);
      return true;
    },

    async release(request) {
      const r = find(request.scope, request.key);
      if (r === undefined || r.token !== request.token || !isOpen(r)) return false;
      return remove(r.scope, r.key);
    },

    async get(recordId, now) {
      const r = find(recordId.scope, recordId.key);
      if (r === undefined) return undefined;
      if (r.expiresAt <= now) {
        remove(r.scope, r.key);
        return undefined;
      }
      return r;
    },

    async delete(recordId) {
      return remove(recordId.scope, recordId.key);
    },

    // Listing and purging are for operators (the CLI, a reconciler, a scheduled job): the code they share
    // with the other stores loads at the first list or purge, not when idempotool is imported.
    async list(query) {
      const paging = await import("./list-paging.js");
      const slots = query.scope === undefined ? allSlots(scopes) : (scopes.get(query.scope)?.values() ?? []);
      return listPage(paging, recordsOf(slots), query);
    },

    async purge(request) {
      const { purgeLimit } = await import("./list-paging.js");
      return { deleted: removeExpired(request.now, purgeLimit("memoryStore", request.limit)) };
    },
  };
}

/** A key's record, and when an entry of its own in the expiry heap is due (never after the record expires). */
interface Slot {
  record: IdempotencyRecord;
  dueAt: number;
}

function* allSlots(scopes: Map<string, Map<string, Slot>>): Generator<Slot> {
  for (const keys of scopes.values()) yield* keys.values();
}

function* recordsOf(slots: Iterable<Slot>): Generator<IdempotencyRecord> {
  for (const slot of slots) yield slot.record;
}

/** Whether the owner may still settle or release it. */
function isOpen(record: IdempotencyRecord): boolean {
  return record.status === "in_progress" || record.status === "unknown";
}

/** A page of `inScope` (the records of the query's scope, or of all), filtered by the rest of the query. */
function listPage(
  { listLimit, decodeListCursor, encodeListCursor }: typeof import("./list-paging.js"),
  inScope: Iterable<IdempotencyRecord>,
  query: ListQuery,
): ListPage {
  const limit = listLimit("memoryStore", query.limit);
  const after = query.cursor === undefined ? undefined : decodeListCursor("memoryStore", query.cursor);
  const matches: IdempotencyRecord[] = [];
  for (const r of inScope) {
    if (query.tool !== undefined && r.tool !== query.tool) continue;
    if (query.status !== undefined && r.status !== query.status) continue;
    if (query.keyPrefix !== undefined && !r.key.startsWith(query.keyPrefix)) continue;
    if (query.createdBefore !== undefined && !(r.createdAt < query.createdBefore)) continue;
    if (query.createdAfter !== undefined && !(r.createdAt >= query.createdAfter)) continue;
    if (after !== undefined && compareIds(r.scope, r.key, after.scope, after.key) <= 0) continue;
    matches.push(r);
  }
  matches.sort((a, b) => compareIds(a.scope, a.key, b.scope, b.key));
  if (matches.length <= limit) return { records: matches };
  const records = matches.slice(0, limit);
  const last = records[limit - 1]!;
  return { records, nextCursor: encodeListCursor(last) };
}

// Pages are ordered by (scope, key), so a cursor is the last pair returned and stays valid while records
// come and go between pages.
function compareIds(scopeA: string, keyA: string, scopeB: string, keyB: string): number {
  if (scopeA !== scopeB) return scopeA < scopeB ? -1 : 1;
  if (keyA !== keyB) return keyA < keyB ? -1 : 1;
  return 0;
}

// A binary min-heap on expiresAt, kept in a plain array.

/** When to look at a record again. */
interface Due {
  readonly scope: string;
  readonly key: string;
  readonly expiresAt: number;
}

function due(record: IdempotencyRecord): Due {
  return { scope: record.scope, key: record.key, expiresAt: record.expiresAt };
}

function heapPush(heap: Due[], record: Due): void {
  let index = heap.length;
  heap.push(record);
  while (index > 0) {
    const parentIndex = (index - 1) >> 1;
    const parent = heap[parentIndex]!;
    if (parent.expiresAt <= record.expiresAt) break;
    heap[index] = parent;
    index = parentIndex;
  }
  heap[index] = record;
}

function heapPop(heap: Due[]): void {
  const last = heap.pop();
  // Empty now, or it was: nothing to sift.
  if (heap.length === 0) return;
  siftDown(heap, 0, last!);
}

function siftDown(heap: Due[], start: number, record: Due): void {
  const size = heap.length;
  let index = start;
  for (;;) {
    let child = 2 * index + 1;
    if (child >= size) break;
    const right = child + 1;
    if (right < size && heap[right]!.expiresAt < heap[child]!.expiresAt) child = right;
    const smaller = heap[child]!;
    if (smaller.expiresAt >= record.expiresAt) break;
    heap[index] = smaller;
    index = child;
  }
  heap[index] = record;
}

/** A heap of one entry per slot, due when its record expires. */
function heapFrom(slots: Iterable<Slot>): Due[] {
  const heap: Due[] = [];
  for (const slot of slots) {
    slot.dueAt = slot.record.expiresAt;
    heap.push(due(slot.record));
  }
  for (let index = (heap.length >> 1) - 1; index >= 0; index--) siftDown(heap, index, heap[index]!);
  return heap;
}
