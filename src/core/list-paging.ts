/**
 * What every store's `list` and `purge` share: the limits, the keyset cursor over (scope, key), and the
 * upper bound that turns a literal key prefix into an index-friendly range.
 */
import { Buffer } from "node:buffer";
import type { IdempotencyRecord, ListQuery, RecordId } from "./store.js";

const defaultListLimit = 100;
const maxListLimit = 1_000;
const defaultPurgeLimit = 1_000;

/** `list`'s page size: default 100, an integer from 1 to 1000. */
export function listLimit(store: string, limit: number | undefined): number {
  return boundedInteger(store, "list limit", limit ?? defaultListLimit, maxListLimit);
}

/** How many expired records one `purge` call removes at most: default 1000. */
export function purgeLimit(store: string, limit: number | undefined): number {
  return boundedInteger(store, "purge limit", limit ?? defaultPurgeLimit, Number.MAX_SAFE_INTEGER);
}

function boundedInteger(store: string, name: string, value: number, max: number): number {
  if (!Number.isInteger(value) || value < 1 || value > max) {
    throw new RangeError(`${store}: ${name} must be an integer from 1 to ${max}, got ${String(value)}.`);
  }
  return value;
}

/** Pages are ordered by (scope, key), so a cursor is the last pair returned, valid while records come and go. */
export function encodeListCursor(last: RecordId): string {
  return Buffer.from(JSON.stringify([last.scope, last.key])).toString("base64url");
}

export function decodeListCursor(store: string, cursor: string): RecordId {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, "base64url").toString());
    if (Array.isArray(value) && value.length === 2 && value.every((part) => typeof part === "string")) {
      return { scope: value[0] as string, key: value[1] as string };
    }
  } catch {
    // Reported below, with the cursor.
  }
  throw new TypeError(
    `${store}: list cursor ${JSON.stringify(cursor)} is not a nextCursor this store returned.`,
  );
}

/**
 * The least string above every string that starts with `prefix`, in code point order (SQLite's BINARY
 * and PostgreSQL's "C" collation): the prefix with its last code point raised by one. Undefined when no
 * such string exists (a prefix of U+10FFFF only).
 */
export function keyPrefixUpperBound(prefix: string): string | undefined {
  const codePoints = Array.from(prefix, (char) => char.codePointAt(0)!);
  while (codePoints.length > 0) {
    const last = codePoints.pop()!;
    if (last < 0x10ffff) {
      // Surrogates are not characters; the next one after U+D7FF is U+E000.
      return String.fromCodePoint(...codePoints, last === 0xd7ff ? 0xe000 : last + 1);
    }
  }
  return undefined;
}

/** Whether a record passes `list`'s filters other than scope and key prefix (which a store narrows by itself). */
export function listMatches(record: IdempotencyRecord, query: ListQuery): boolean {
  return (
    (query.tool === undefined || record.tool === query.tool) &&
    (query.status === undefined || record.status === query.status) &&
    (query.createdBefore === undefined || record.createdAt < query.createdBefore) &&
    (query.createdAfter === undefined || record.createdAt >= query.createdAfter)
  );
}

/** (scope, key) in UTF-16 code unit order: the order of pages, and what a cursor compares against. */
export function compareIds(a: RecordId, b: RecordId): number {
  if (a.scope !== b.scope) return a.scope < b.scope ? -1 : 1;
  if (a.key !== b.key) return a.key < b.key ? -1 : 1;
  return 0;
}
