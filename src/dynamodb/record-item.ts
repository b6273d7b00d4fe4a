/**
 * A record as DynamoDB keeps it: one item per (scope, key), every field an attribute of its own.
 *
 *   pk            S  the partition key: (scope, key) as one string (see `partitionKey`)
 *   scope, key    S  the record's id, kept whole for list and the CLI
 *   tool, fingerprint, status, token   S
 *   createdAt, updatedAt, leaseExpiresAt, expiresAt, attempts   N (epoch ms, a count)
 *   result, error S  absent when null, so null stays apart from ""
 *   ttl           N  epoch seconds, for DynamoDB's own TTL deletion (never read back)
 *   released      SS the tokens of claims released on this key, which must never land after their release
 *   releasedUntil N  until when (epoch ms) those tokens are kept; both absent when none are
 *
 * A released claim leaves a tombstone instead of nothing: status "released" and the released token, and
 * no record field. It is not a record: get and list skip it, and a claim by any token not released
 * replaces it. A release that finds another caller's item (its record, live or expired, or its
 * tombstone) adds its token to that item's `released` set instead. Claims keep the set and are refused
 * when their own token is in it; a release after `releasedUntil` has passed starts the set afresh, and
 * purge leaves an item alone until then (see dynamo-store.ts).
 */
import { type IdempotencyRecord, RecordStatus, recordIdText } from "../core/store.js";

/** An attribute value as the DynamoDB API carries it; the store writes strings, numbers and string sets. */
export type AttributeValue = { readonly S: string } | { readonly N: string } | { readonly SS: string[] };
/** An item as the API answers it: any attribute type may come back, and is refused unless S or N. */
export type Item = Record<string, unknown>;

/** The attribute names, each one `#name` in expressions (several are DynamoDB reserved words). */
export const attributes = [
  "pk",
  "scope",
  "key",
  "tool",
  "fingerprint",
  "status",
  "token",
  "createdAt",
  "updatedAt",
  "leaseExpiresAt",
  "expiresAt",
  "attempts",
  "result",
  "error",
  "ttl",
  "released",
  "releasedUntil",
] as const;
export type AttributeName = (typeof attributes)[number];

/** `#name` → name for every attribute, the ExpressionAttributeNames of an expression that uses some. */
export function namesOf(...names: AttributeName[]): Record<string, string> {
  return Object.fromEntries(names.map((name) => [`#${name}`, name]));
}

/** The status of a tombstone: a released claim, not a record. */
export const released = "released";

/** The partition key of (scope, key); the scope's length keeps ("ab", "c") and ("a", "bc") apart. */
export function partitionKey(scope: string, key: string): { pk: { S: string } } {
  return { pk: { S: recordIdText(scope, key) } };
}

export const s = (value: string): AttributeValue => ({ S: value });
export const n = (value: number): AttributeValue => ({ N: String(value) });
export const ss = (...values: string[]): AttributeValue => ({ SS: values });

/** The attributes of a record besides its partition key, as `#name` for an update's SET or REMOVE. */
export const recordAttributes = [
  "scope",
  "key",
  "tool",
  "fingerprint",
  "createdAt",
  "updatedAt",
  "leaseExpiresAt",
  "attempts",
  "result",
  "error",
] as const satisfies readonly AttributeName[];

/** A number attribute of the item, or 0 when it has none. */
export function numberOf(item: Item | undefined, name: AttributeName): number {
  const value = Number((item?.[name] as { N?: unknown } | undefined)?.N);
  return Number.isFinite(value) ? value : 0;
}

/** Until when (epoch ms) the item keeps released tokens; 0 when it keeps none. */
export function releasedUntil(item: Item | undefined): number {
  return numberOf(item, "releasedUntil");
}

/** Whether the item keeps `token` among its released claims' tokens (see `released` above). */
export function releasedOn(item: Item | undefined, token: string): boolean {
  const tokens = (item?.released as { SS?: unknown } | undefined)?.SS;
  return Array.isArray(tokens) && tokens.includes(token);
}

/**
 * DynamoDB's TTL attribute for a record kept until `expiresAt` by a caller's clock: whole seconds, rounded
 * up, and `marginMs` later, so DynamoDB (by its own clock) never deletes a record that a worker whose clock
 * runs behind by up to the margin still counts live. Nothing reads it: every operation judges `expiresAt`.
 */
export function ttlSeconds(expiresAt: number, marginMs: number): number {
  return Math.ceil((expiresAt + marginMs) / 1000);
}

/** The whole item of a record. */
export function recordItem(record: IdempotencyRecord, marginMs: number): Record<string, AttributeValue> {
  const item: Record<string, AttributeValue> = {
    ...partitionKey(record.scope, record.key),
    scope: s(record.scope),
    key: s(record.key),
    tool: s(record.tool),
    fingerprint: s(record.fingerprint),
    status: s(record.status),
    token: s(record.token),
    createdAt: n(record.createdAt),
    updatedAt: n(record.updatedAt),
    leaseExpiresAt: n(record.leaseExpiresAt),
    expiresAt: n(record.expiresAt),
    attempts: n(record.attempts),
    ttl: n(ttlSeconds(record.expiresAt, marginMs)),
  };
  if (record.result !== null) item.result = s(record.result);
  if (record.error !== null) item.error = s(record.error);
  return item;
}

const statuses: ReadonlySet<string> = new Set(Object.values(RecordStatus));

/** What an item is: a record, a tombstone (with the released token), or absent. Anything else throws. */
export type ItemKind =
  | { readonly kind: "absent" }
  | { readonly kind: "tombstone"; readonly token: string }
  | { readonly kind: "record"; readonly record: IdempotencyRecord };

/**
 * Read an item the store wrote. An item that is neither a record nor a tombstone (another program's, or
 * edited by hand) fails the operation: guessing would risk a second run or a wrong replay.
 */
export function readItem(item: Item | undefined): ItemKind {
  if (item === undefined || Object.keys(item).length === 0) return { kind: "absent" };
  const text = (name: AttributeName): string | undefined => {
    const value = item[name] as { S?: unknown } | undefined;
    return typeof value?.S === "string" ? value.S : undefined;
  };
  const number = (name: AttributeName): number | undefined => {
    const value = item[name] as { N?: unknown } | undefined;
    const parsed = typeof value?.N === "string" ? Number(value.N) : Number.NaN;
    return Number.isSafeInteger(parsed) ? parsed : undefined;
  };
  const status = text("status");
  const token = text("token");
  if (status === released && token !== undefined) return { kind: "tombstone", token };
  const scope = text("scope");
  const key = text("key");
  const tool = text("tool");
  const fingerprint = text("fingerprint");
  const createdAt = number("createdAt");
  const updatedAt = number("updatedAt");
  const leaseExpiresAt = number("leaseExpiresAt");
  const expiresAt = number("expiresAt");
  const attempts = number("attempts");
  const optional = (name: "result" | "error"): string | null | false =>
    item[name] === undefined ? null : (text(name) ?? false);
  const result = optional("result");
  const error = optional("error");
  if (
    status === undefined ||
    !statuses.has(status) ||
    token === undefined ||
    scope === undefined ||
    key === undefined ||
    text("pk") !== recordIdText(scope, key) ||
    tool === undefined ||
    fingerprint === undefined ||
    createdAt === undefined ||
    updatedAt === undefined ||
    leaseExpiresAt === undefined ||
    expiresAt === undefined ||
    attempts === undefined ||
    result === false ||
    error === false
  ) {
    throw notARecord(text("pk"));
  }
  return {
    kind: "record",
    record: {
      scope,
      key,
      tool,
      fingerprint,
      status: status as RecordStatus,
      token,
      createdAt,
      updatedAt,
      leaseExpiresAt,
      expiresAt,
      attempts,
      result,
      error,
    },
  };
}

function notARecord(pk: string | undefined): Error {
  return new Error(
    `dynamoStore: the item ${pk === undefined ? "without a string pk" : JSON.stringify(pk)} is not an idempotool record; refusing to guess what it holds.`,
  );
}
