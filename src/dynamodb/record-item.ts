/**
 * A record as DynamoDB keeps it: one item per (scope, key). Every attribute name counts toward the item's
 * size (what each write is billed by) and every request's parsing, so the names are one letter:
 *
 *   pk        S   the partition key: (scope, key) as one string (see `partitionKey`); scope and key are read
 *                 back from it
 *   t         S   the tool's name
 *   f         B   the fingerprint: its 32 bytes when it is SHA-256 hex, as the core's are (else S, as given)
 *   s         S   the status: p in progress, c completed, f failed, u unknown, r released (a tombstone)
 *   o         B   the owner token: its 16 bytes when it is 32 hex digits, as the core's are (else S)
 *   c         N   createdAt, epoch ms
 *   u         N   updatedAt, as ms after createdAt; absent when 0
 *   l         N   leaseExpiresAt, epoch ms, while in progress; a settled record's is its updatedAt
 *   e         N   expiresAt, epoch ms
 *   a         N   attempts; absent when 1
 *   r, x      S   result and error, absent when null (so null stays apart from "")
 *   ttl       N   epoch seconds, for DynamoDB's own TTL deletion (never read back)
 *   rt        SS  the tokens of claims released on this key, which must never land after their release
 *   ru        N   until when (epoch ms) those tokens are kept; both absent when none are
 *   released, releasedUntil   the same under the earlier form's names: only where an earlier build's
 *                 release that read the item in that form wrote them after it was rewritten. Claims are
 *                 refused by either set, and delete and purge keep the item until either time passes
 *                 (`keptUntil`). The two sets have two names so that such a write, which may start its set
 *                 afresh, never drops this version's tokens.
 *
 * A released claim leaves a tombstone instead of nothing: `s` "r", the released token in `o`, `e` and no
 * other record field. It is not a record: get and list skip it, and a claim by any token not released
 * replaces it. A release that finds another caller's item (its record, live or expired, or its
 * tombstone) adds its token to that item's `rt` set instead. Claims keep the set and are refused
 * when their own token is in it; a release after `ru` has passed starts the set afresh.
 * Until then purge and delete turn the item's record into a tombstone instead of deleting the item, and
 * every write keeps `ttl` at least a day ahead (see dynamo-store.ts).
 *
 * Items of earlier builds (long attribute names: `status`, `token`, `expiresAt`, `releasedUntil`, …) are
 * read as they are, and rewritten in this form, as they were, before the store writes a record field of
 * one (see `legacyItem`); a release of another caller's token keeps it on such an item in its form.
 * Their store refuses this form: none of its conditions holds on an item without its names, and it throws
 * on reading one (docs/stores.md, "Upgrading from earlier builds").
 */
import { type IdempotencyRecord, RecordStatus, recordIdText } from "../core/store.js";

/** An attribute value as the DynamoDB API carries it: strings, numbers, bytes and string sets. */
export type AttributeValue =
  | { readonly S: string }
  | { readonly N: string }
  | { readonly B: Uint8Array }
  | { readonly SS: string[] };
/** An item as the API answers it: any attribute type may come back, and is refused unless expected. */
export type Item = Record<string, unknown>;

/** The status of a tombstone: a released claim, not a record. */
export const released = "released";

/** Each status, and a tombstone's, as the item's `s` keeps it. */
const statusCodes = {
  [RecordStatus.inProgress]: "p",
  [RecordStatus.completed]: "c",
  [RecordStatus.failed]: "f",
  [RecordStatus.unknown]: "u",
  [released]: "r",
} as const satisfies Record<RecordStatus | typeof released, string>;
const statusOfCode = new Map<string, RecordStatus | typeof released>(
  Object.entries(statusCodes).map(([status, code]) => [code, status as RecordStatus | typeof released]),
);

/** The `s` of a status, as written and as compared in conditions. */
export function statusCode(status: RecordStatus | typeof released): AttributeValue {
  return { S: statusCodes[status] };
}

/** The partition key of (scope, key); the scope's length keeps ("ab", "c") and ("a", "bc") apart. */
export function partitionKey(scope: string, key: string): { pk: { S: string } } {
  return { pk: { S: recordIdText(scope, key) } };
}

/** (scope, key) back from a partition key, or undefined when it is not one `partitionKey` makes. */
function idOf(pk: string): { scope: string; key: string } | undefined {
  const colon = pk.indexOf(":");
  const length = Number(pk.slice(0, colon));
  if (colon < 1 || !/^\d+$/.test(pk.slice(0, colon)) || colon + 1 + length > pk.length) return undefined;
  return { scope: pk.slice(colon + 1, colon + 1 + length), key: pk.slice(colon + 1 + length) };
}

export const s = (value: string): AttributeValue => ({ S: value });
export const n = (value: number): AttributeValue => ({ N: String(value) });
export const ss = (...values: string[]): AttributeValue => ({ SS: values });

/** Hex digits as bytes when they are lowercase hex of `length` characters; as the string otherwise. */
function hexOrString(value: string, length: number): AttributeValue {
  return value.length === length && /^[0-9a-f]+$/.test(value) ? { B: Buffer.from(value, "hex") } : s(value);
}

/** A token as `o` keeps it, and as conditions compare it. */
export const tokenValue = (token: string): AttributeValue => hexOrString(token, 32);
/** A fingerprint as `f` keeps it. */
export const fingerprintValue = (fingerprint: string): AttributeValue => hexOrString(fingerprint, 64);

/** A string or bytes attribute as text: bytes as lowercase hex (what `hexOrString` took in). */
function textOrHex(value: unknown): string | undefined {
  const v = value as { S?: unknown; B?: unknown } | undefined;
  if (typeof v?.S === "string") return v.S;
  if (v?.B instanceof Uint8Array)
    return Buffer.from(v.B.buffer, v.B.byteOffset, v.B.byteLength).toString("hex");
  return undefined;
}

/** A number attribute of the item, or 0 when it has none. */
export function numberOf(item: Item | undefined, name: string): number {
  const value = Number((item?.[name] as { N?: unknown } | undefined)?.N);
  return Number.isFinite(value) ? value : 0;
}

/** A string attribute of the item, or undefined when it has none (or one of another type). */
function textOf(item: Item, name: string): string | undefined {
  const value = item[name] as { S?: unknown } | undefined;
  return typeof value?.S === "string" ? value.S : undefined;
}

/** A number attribute of the item as a safe integer, or undefined when it has no such number. */
function integerOf(item: Item, name: string): number | undefined {
  const value = item[name] as { N?: unknown } | undefined;
  const parsed = typeof value?.N === "string" ? Number(value.N) : Number.NaN;
  return Number.isSafeInteger(parsed) ? parsed : undefined;
}

/**
 * An optional string attribute (a result, an error): null when absent, false when it is there but not a
 * string.
 */
function optionalTextOf(item: Item, name: string): string | null | false {
  return item[name] === undefined ? null : (textOf(item, name) ?? false);
}

/** A record's fields as read from an item: undefined where one was missing, false where one was malformed. */
type ReadFields = { [F in keyof IdempotencyRecord]: IdempotencyRecord[F] | undefined | false };

/**
 * The record of the fields read from the item at `pk`, or the error that says the item is none: any field
 * missing or malformed fails the operation rather than be guessed.
 */
function recordOrThrow(pk: string | undefined, fields: ReadFields): ItemKind {
  for (const value of Object.values(fields)) if (value === undefined || value === false) throw notARecord(pk);
  return { kind: "record", record: fields as IdempotencyRecord };
}

/**
 * Until when (epoch ms) the item's own set keeps released tokens (`ru` for `rt`, or an earlier build's
 * `releasedUntil` on its item); 0 when it keeps none. What a release judges the set it adds to by.
 */
export function releasedUntil(item: Item | undefined): number {
  return isLegacy(item) ? numberOf(item, "releasedUntil") : numberOf(item, "ru");
}

/**
 * Until when (epoch ms) the item keeps any released tokens, in either set (an item in this form may carry
 * an earlier build's too, see the header); 0 when it keeps none. What purge and delete judge by.
 */
export function keptUntil(item: Item | undefined): number {
  return Math.max(numberOf(item, "ru"), numberOf(item, "releasedUntil"));
}

/** Whether the item keeps `token` among its released claims' tokens, in this form's set or the earlier form's. */
export function releasedOn(item: Item | undefined, token: string): boolean {
  return [item?.rt, item?.released].some((set) => {
    const tokens = (set as { SS?: unknown } | undefined)?.SS;
    return Array.isArray(tokens) && tokens.includes(token);
  });
}

/**
 * DynamoDB's TTL attribute for a record kept until `expiresAt` by a caller's clock: whole seconds, rounded
 * up, and `marginMs` later, so DynamoDB (by its own clock) never deletes a record that a worker whose clock
 * runs behind by up to the margin still counts live. Nothing reads it: every operation judges `e`.
 */
export function ttlSeconds(expiresAt: number, marginMs: number): number {
  return Math.ceil((expiresAt + marginMs) / 1000);
}

/**
 * A claim's attributes besides `pk` and `ttl`: the record in progress. A claim is the first write of a
 * record, so `u` is 0 and `a` is 1 (both absent).
 */
export function claimAttributes(record: IdempotencyRecord): Record<string, AttributeValue> {
  return {
    t: s(record.tool),
    f: fingerprintValue(record.fingerprint),
    s: statusCode(record.status),
    o: tokenValue(record.token),
    c: n(record.createdAt),
    ...(record.updatedAt === record.createdAt ? {} : { u: n(record.updatedAt - record.createdAt) }),
    l: n(record.leaseExpiresAt),
    e: n(record.expiresAt),
    ...(record.attempts === 1 ? {} : { a: n(record.attempts) }),
    ...(record.result === null ? {} : { r: s(record.result) }),
    ...(record.error === null ? {} : { x: s(record.error) }),
  };
}

/** The attributes of a record, every one a tombstone lacks (what retiring a record removes). */
export const recordAttributes = ["t", "f", "c", "u", "l", "a", "r", "x"] as const;

const statuses: ReadonlySet<string> = new Set(Object.values(RecordStatus));

/** What an item is: a record, a tombstone (with the released token), or absent. Anything else throws. */
export type ItemKind =
  | { readonly kind: "absent" }
  | { readonly kind: "tombstone"; readonly token: string; readonly expiresAt: number }
  | { readonly kind: "record"; readonly record: IdempotencyRecord };

/** Whether the item is in the earlier builds' form (long attribute names), see `legacyItem`. */
export function isLegacy(item: Item | undefined): boolean {
  return item !== undefined && item.s === undefined && item.status !== undefined;
}

/**
 * Read an item the store wrote, in this form or the earlier one. An item that is neither a record nor a tombstone
 * (another program's, or edited by hand) fails the operation: guessing would risk a second run or a wrong
 * replay.
 */
export function readItem(item: Item | undefined): ItemKind {
  if (item === undefined || Object.keys(item).length === 0) return { kind: "absent" };
  if (isLegacy(item)) return readLegacyItem(item);
  const pk = textOf(item, "pk");
  const status = statusOfCode.get(textOf(item, "s") ?? "");
  const token = textOrHex(item.o);
  const expiresAt = integerOf(item, "e");
  if (status === released && token !== undefined && expiresAt !== undefined)
    return { kind: "tombstone", token, expiresAt };
  const id = pk === undefined ? undefined : idOf(pk);
  const createdAt = integerOf(item, "c");
  const sinceCreated = item.u === undefined ? 0 : integerOf(item, "u");
  const updatedAt =
    createdAt === undefined || sinceCreated === undefined ? undefined : createdAt + sinceCreated;
  return recordOrThrow(pk, {
    scope: id?.scope,
    key: id?.key,
    tool: textOf(item, "t"),
    fingerprint: textOrHex(item.f),
    status: status === released ? undefined : status,
    token,
    createdAt,
    updatedAt,
    leaseExpiresAt: status === RecordStatus.inProgress ? integerOf(item, "l") : updatedAt,
    expiresAt,
    attempts: item.a === undefined ? 1 : integerOf(item, "a"),
    result: optionalTextOf(item, "r"),
    error: optionalTextOf(item, "x"),
  });
}

/** The earlier form's attribute names, each of which this form drops or renames. */
export const legacyAttributes = [
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
  "releasedUntil",
] as const;

/** An item of an earlier build: every field an attribute of its own, under its long name. */
function readLegacyItem(item: Item): ItemKind {
  const status = textOf(item, "status");
  const token = textOf(item, "token");
  if (status === released && token !== undefined)
    return { kind: "tombstone", token, expiresAt: integerOf(item, "expiresAt") ?? 0 };
  const pk = textOf(item, "pk");
  const scope = textOf(item, "scope");
  const key = textOf(item, "key");
  // Scope and key are kept beside pk there: an item whose pk is not theirs is not a record.
  if (scope !== undefined && key !== undefined && pk !== recordIdText(scope, key)) throw notARecord(pk);
  return recordOrThrow(pk, {
    scope,
    key,
    tool: textOf(item, "tool"),
    fingerprint: textOf(item, "fingerprint"),
    status: status !== undefined && statuses.has(status) ? (status as RecordStatus) : undefined,
    token,
    createdAt: integerOf(item, "createdAt"),
    updatedAt: integerOf(item, "updatedAt"),
    leaseExpiresAt: integerOf(item, "leaseExpiresAt"),
    expiresAt: integerOf(item, "expiresAt"),
    attempts: integerOf(item, "attempts"),
    result: optionalTextOf(item, "result"),
    error: optionalTextOf(item, "error"),
  });
}

/**
 * The update that rewrites an earlier build's item in this form, exactly as it was, on condition that it
 * still is and that `guard` (a condition on the earlier names, `#status` for `status` and so on) holds: a
 * store writes a record field of such an item only after this, so that every such write of its own sees one
 * form. The condition pins what the rewrite copies (the token, status, times and `releasedUntil`; any write
 * of that build changes `updatedAt` or the token with a record's result or error), so its write in between
 * refuses it.
 */
export function legacyItem(
  item: Item,
  guard?: { readonly condition: string; readonly values: Record<string, AttributeValue> },
): {
  readonly condition: string;
  readonly update: string;
  readonly names: Record<string, string>;
  readonly values: Record<string, AttributeValue>;
} {
  const found = readLegacyItem(item);
  if (found.kind === "absent") throw notARecord(undefined);
  const values: Record<string, AttributeValue> = { ...guard?.values };
  const conditions = ["attribute_exists(#status)", ...(guard ? [guard.condition] : [])];
  const pin = (name: string, value: AttributeValue) => {
    conditions.push(`#${name} = :was_${name}`);
    values[`:was_${name}`] = value;
  };
  const until = numberOf(item, "releasedUntil");
  if (item.releasedUntil === undefined) conditions.push("attribute_not_exists(#releasedUntil)");
  else pin("releasedUntil", n(until));
  let set: Record<string, AttributeValue>;
  if (found.kind === "tombstone") {
    pin("status", s(released));
    pin("token", s(found.token));
    set = { s: statusCode(released), o: tokenValue(found.token), e: n(found.expiresAt) };
  } else {
    const record = found.record;
    pin("status", s(record.status));
    pin("token", s(record.token));
    pin("updatedAt", n(record.updatedAt));
    pin("leaseExpiresAt", n(record.leaseExpiresAt));
    pin("expiresAt", n(record.expiresAt));
    set = claimAttributes(record);
    if (record.status !== RecordStatus.inProgress) delete set.l;
  }
  if (item.releasedUntil !== undefined) set.ru = n(until);
  const tokens = (item.released as { SS?: unknown } | undefined)?.SS;
  if (Array.isArray(tokens) && tokens.length > 0) set.rt = ss(...(tokens as string[]));
  for (const [name, value] of Object.entries(set)) values[`:${name}`] = value;
  return {
    condition: conditions.join(" AND "),
    update: `SET ${Object.keys(set)
      .map((name) => `${name} = :${name}`)
      .join(", ")} REMOVE ${legacyAttributes.map((name) => `#${name}`).join(", ")}, released`,
    names: Object.fromEntries(legacyAttributes.map((name) => [`#${name}`, name])),
    values,
  };
}

function notARecord(pk: string | undefined): Error {
  return new Error(
    `dynamoStore: the item ${pk === undefined ? "without a string pk" : JSON.stringify(pk)} is not an idempotool record; refusing to guess what it holds.`,
  );
}
