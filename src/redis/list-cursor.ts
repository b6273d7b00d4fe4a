/** Paging and filtering for `list`: records in (scope, key) order, a keyset cursor over that order. */
import type { IdempotencyRecord, ListQuery, RecordId } from "../core/store.js";

export function matches(record: IdempotencyRecord, query: ListQuery): boolean {
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
