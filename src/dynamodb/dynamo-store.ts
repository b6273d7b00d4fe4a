import {
  compareIds,
  decodeListCursor,
  encodeListCursor,
  listLimit,
  listMatches,
  purgeLimit,
} from "../core/list-paging.js";
import { invalidOption } from "../core/option-checks.js";
import {
  claimedRecord,
  type IdempotencyRecord,
  type IdempotencyStore,
  type RecordId,
  RecordStatus,
} from "../core/store.js";
import {
  type AttributeValue,
  claimAttributes,
  type Item,
  isLegacy,
  keptUntil,
  legacyItem,
  n,
  numberOf,
  partitionKey,
  readItem,
  recordAttributes,
  released,
  releasedOn,
  releasedUntil,
  s,
  ss,
  statusCode,
  tokenValue,
  ttlSeconds,
} from "./record-item.js";

/**
 * The part of an AWS SDK v3 `DynamoDBClient` the store uses: `send`. Your client stays yours (its region,
 * credentials, retries and timeouts apply to every call) and the store never destroys it.
 */
export interface DynamoDBClientLike {
  send(command: object): Promise<unknown>;
}

/** Options of {@link dynamoStore}. */
export interface DynamoStoreOptions {
  /** Your `DynamoDBClient` from `@aws-sdk/client-dynamodb`. */
  readonly client: DynamoDBClientLike;
  /**
   * The table: a string partition key named `pk` and nothing else; turn DynamoDB's TTL on for the
   * attribute `ttl` (docs/stores.md shows the definition). The store never creates it.
   */
  readonly table: string;
  /**
   * DynamoDB has no clock an operation can read, so leases and expiry are judged by the caller's clock set
   * back by this margin: a worker takes over a lease only once its clock passes the lease's end by more
   * than the margin, so one whose clock runs ahead by up to the margin can never take over a live lease.
   * Set it to the worst skew you expect between your workers' clocks (NTP keeps hosts within
   * milliseconds; the default leaves room for a host that drifted). Whole ms from 0 to 3 600 000;
   * default 2000.
   */
  readonly clockSkewMarginMs?: number | undefined;
}

/** An idempotency store on DynamoDB. */
export interface DynamoStore extends IdempotencyStore {
  readonly client: DynamoDBClientLike;
  readonly table: string;
  /** The clock margin leases are judged with (ms). */
  readonly clockSkewMarginMs: number;
}

const owner = "dynamoStore()";
const defaultSkewMarginMs = 2_000;
const maxSkewMarginMs = 3_600_000;
/**
 * How long a tombstone keeps a released claim from landing late: far beyond any request a client or
 * network may hold back (a claim delayed longer would land as a crashed worker's, judged by its lease).
 */
const tombstoneMs = 86_400_000;
/**
 * How long an owner token may be: the core's are 32 characters. The item keeps every token released on
 * its key within the day, however many (forgetting one to make room could let its late claim land), so
 * the set's only bound is the item's: past 400 KB DynamoDB refuses the release, which fails closed.
 */
const maxTokenLength = 64;
/**
 * Room kept in the item for released tokens beside a result of maxStoredResultBytes: 256 of the core's
 * tokens, 128 of the longest. Past it, a release still lands while the item has room.
 */
const releasedTokensReserveBytes = 8 * 1024;
/**
 * The largest result an item keeps: DynamoDB's 400 KB item limit, less room for the item's other attributes
 * (the longest key and scope twice over, the tool's name, fingerprint, token, times and a failure's text,
 * and the released tokens' reserve).
 */
const maxStoredResultBytes = 400 * 1024 - 24 * 1024 - releasedTokensReserveBytes;
/**
 * How many times a claim tries again when the record it was refused by is gone before it could be read, or
 * was an earlier build's item it rewrote first.
 */
const claimTries = 4;
/** How many times a release looks again when the key's item changed under it (or kept tokens unseen). */
const releaseTries = 5;

type Sdk = typeof import("@aws-sdk/client-dynamodb");
let sdk: Promise<Sdk> | undefined;

/**
 * The command classes, from the `@aws-sdk/client-dynamodb` your client came from: loaded on first use, so
 * importing `idempotool/dynamodb` loads no AWS code of its own.
 */
function commands(): Promise<Sdk> {
  sdk ??= import("@aws-sdk/client-dynamodb").catch((error: unknown) => {
    sdk = undefined;
    throw new Error(
      "dynamoStore needs the @aws-sdk/client-dynamodb package: npm install @aws-sdk/client-dynamodb",
      {
        cause: error,
      },
    );
  });
  return sdk;
}

/** A conditional write's answer: applied (with what it returned), or refused (with the item, when sent). */
type Conditional =
  | { readonly applied: true; readonly item: Item | undefined }
  | { readonly applied: false; readonly item: Item | undefined };

// The attribute names are those of record-item.ts; only `ttl`, a reserved word, needs a placeholder.
// The conditions a call sends on its way lean on DynamoDB's precedence (AND binds tighter than OR) and `IN`
// rather than parentheses: each group costs a parser dearly (dynalite's: 370 µs for the put claim's with
// them, 98 without; bench/HISTORY.md, 2026-12-07), and the meaning is the same.
// A live record blocks a claim; an expired one, nothing at all, or another claim's tombstone does not.
// A claim whose token was released on this key never lands (an absent item keeps no tokens).
// (`released` is earlier builds' set, see record-item.ts.)
const notReleasedHere = "NOT contains(rt, :tokenText) AND NOT contains(released, :tokenText)";
const claimCondition = `attribute_not_exists(pk) OR s = :released AND o <> :token AND ${notReleasedHere} OR s <> :released AND e <= :now AND ${notReleasedHere}`;
// The same, for a claim that replaces the whole item: only where no released tokens are kept.
const putClaimCondition =
  "attribute_not_exists(pk) OR attribute_not_exists(rt) AND attribute_not_exists(released) AND s <> :released AND e <= :now";
// Only the token's own claim, in progress or unknown; also where nothing is (a claim still on its way).
const releaseCondition = "attribute_not_exists(pk) OR (o = :token AND (s = :inProgress OR s = :unknown))";
// Whether the item's own set, rt, keeps tokens released within the last day (see record-item.ts): a
// release adds to it, or starts it afresh.
const keepingTokens = "ru > :now";
const notKeepingTokens = "(attribute_not_exists(ru) OR ru <= :now)";
// Whether the item keeps any released tokens: in rt, or in the set an earlier build's release wrote under
// its names (on its own item, or on one in this form it read before the rewrite). Both count wherever the
// item is kept or let go (delete, purge): neither set may be dropped while its time runs.
const anyKept = "(ru > :now OR #releasedUntil > :now)";
const noneKept = `${notKeepingTokens} AND (attribute_not_exists(#releasedUntil) OR #releasedUntil <= :now)`;
const keptNames = { "#releasedUntil": "releasedUntil" };
const settleCondition = "s IN (:inProgress, :unknown) AND o = :token";
const renewCondition = "o = :token AND s = :inProgress";
const takeoverCondition = "o = :fromToken AND e > :now AND (s = :unknown OR (s = :inProgress AND l <= :now))";
// An earlier build's record is never rewritten (see legacyItem) while its owner on that build may still
// renew or settle it: those are conditions on the earlier form's names, which the rewrite would refuse, and
// the effect's outcome would be lost. A takeover rewrites it only where the takeover itself lands (the
// earlier build's takeover condition, on its names).
const legacyTakeover =
  "#token = :fromToken AND #expiresAt > :now AND (#status = :legacyUnknown OR (#status = :legacyInProgress AND #leaseExpiresAt <= :now))";
const inProgress = statusCode("in_progress");
const unknown = statusCode("unknown");
const tombstone = statusCode(released);

/**
 * A store on DynamoDB for workers anywhere (Lambda, containers), on a table in one Region. One item
 * per record; every claim, settle, renew and takeover is one conditional write, fenced by the owner
 * token (a release is two when the key keeps released tokens, see docs/stores.md). Leases are judged by the caller's clock with a skew margin (`clockSkewMarginMs`).
 * @example
 * import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
 * import { idempotent } from "idempotool";
 * import { dynamoStore } from "idempotool/dynamodb";
 *
 * const client = new DynamoDBClient({ region: "eu-west-1", maxAttempts: 3 });
 * const refund = idempotent(async (args: { order: string }) => ({ refunded: args.order }), {
 *   name: "refund_order",
 *   store: dynamoStore({ client, table: "idempotool_records" }),
 * });
 * await refund({ order: "o-17" }, { key: "turn-4-refund" });
 */
export function dynamoStore(options: DynamoStoreOptions): DynamoStore {
  const { client, table, marginMs } = resolveOptions(options);

  /** The instant a request's `now` stands for when judging leases and expiry: its clock, less the margin. */
  /**
   * The `ttl` of an item written now, kept until `expiresAt`: DynamoDB deletes the whole item from then on,
   * with any tokens released on the key, so it is never earlier than a day from the write, which is as long
   * as those tokens are kept (a release writes them at most a day before).
   */
  const keptTtl = (expiresAt: number): number =>
    ttlSeconds(Math.max(expiresAt, Date.now() + tombstoneMs), marginMs);

  /** Whether DynamoDB refused this role a PutItem (see `claimOnce`). */
  let putDenied = false;

  const judged = (now: number): number => {
    if (!Number.isFinite(now)) throw new TypeError(`dynamoStore: now must be epoch ms, got ${String(now)}.`);
    return now - marginMs;
  };

  async function send<T>(make: (sdk: Sdk) => object): Promise<T> {
    return (await client.send(make(await commands()))) as T;
  }

  /** A conditional write: refused is an answer, not an error; any other failure rejects. */
  async function conditional(make: (sdk: Sdk) => object): Promise<Conditional> {
    try {
      const output = await send<{ Attributes?: Item }>(make);
      return { applied: true, item: output.Attributes };
    } catch (error) {
      const refusal = error as { name?: unknown; message?: unknown; Item?: Item } | null;
      if (refusal?.name === "ValidationException" && /maximum allowed size/.test(String(refusal.message)))
        throw itemFull(error);
      if (refusal?.name !== "ConditionalCheckFailedException") throw error;
      return { applied: false, item: refusal.Item };
    }
  }

  /** The item as it is now (a strongly consistent read). */
  async function read(id: RecordId): Promise<Item | undefined> {
    const output = await send<{ Item?: Item }>(
      (sdk) =>
        new sdk.GetItemCommand({
          TableName: table,
          Key: partitionKey(id.scope, id.key),
          ConsistentRead: true,
        }),
    );
    return output.Item;
  }

  /**
   * An update that moves the record's expiry to `expiresAt` unless it already lies later: DynamoDB's update
   * expressions have no max(), so the write says which case it is in its condition and, refused, the other
   * case is tried (a second write only when the expiry would otherwise have moved back).
   */
  async function updateKeepingLaterExpiry(
    id: RecordId,
    condition: string,
    set: string,
    values: Record<string, AttributeValue>,
    expiresAt: number,
    tail = "",
  ): Promise<Item | undefined> {
    const update = (moveExpiry: boolean) =>
      conditional(
        (sdk) =>
          new sdk.UpdateItemCommand({
            TableName: table,
            Key: partitionKey(id.scope, id.key),
            // In parentheses only where it has an OR (see claimCondition).
            ConditionExpression: `${condition.includes(" OR ") ? `(${condition})` : condition} AND e ${moveExpiry ? "<=" : ">"} :expiresAt`,
            UpdateExpression: `SET ${set}${moveExpiry ? ", e = :expiresAt, #ttl = :ttl" : ""}${tail}`,
            ...(moveExpiry ? { ExpressionAttributeNames: { "#ttl": "ttl" } } : {}),
            ExpressionAttributeValues: {
              ...values,
              ":expiresAt": n(expiresAt),
              ...(moveExpiry ? { ":ttl": n(keptTtl(expiresAt)) } : {}),
            },
            ReturnValues: "ALL_NEW",
          }),
      );
    const moved = await update(true);
    if (moved.applied) return moved.item ?? {};
    const kept = await update(false);
    return kept.applied ? (kept.item ?? {}) : undefined;
  }

  /**
   * Rewrite an earlier build's item in this version's form, as it was (see `legacyItem`), before writing to it. Refused
   * when the item changed since it was read: the caller reads it again either way.
   */
  async function upgrade(
    pk: AttributeValue,
    item: Item,
    guard?: { condition: string; values: Record<string, AttributeValue> },
  ): Promise<void> {
    const { condition, update, names, values } = legacyItem(item, guard);
    await conditional(
      (sdk) =>
        new sdk.UpdateItemCommand({
          TableName: table,
          Key: { pk },
          ConditionExpression: condition,
          UpdateExpression: update,
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
        }),
    );
  }

  return {
    client,
    table,
    clockSkewMarginMs: marginMs,
    maxStoredResultBytes,

    async claim(request) {
      checkToken(request.token);
      const now = judged(request.now);
      const record = claimedRecord(request, request.now);
      for (let attempt = 0; attempt < claimTries; attempt++) {
        // The first try is a put, unless the key's item turns out to keep released tokens it must keep.
        const update = await claimOnce(record, now, attempt === 0);
        if (update.applied) return { claimed: true, record, now };
        const item = update.item ?? (await read(request));
        if (releasedOn(item, request.token)) throw releasedBeforeArrival();
        const found = readItem(item);
        if (found.kind === "record" && found.record.expiresAt > now)
          return { claimed: false, record: found.record, now };
        if (found.kind === "tombstone" && found.token === request.token) throw releasedBeforeArrival();
        // An earlier build's item this claim may replace: rewritten in this form first, then claimed as any
        // other. It is expired or a tombstone, so no owner on that build can still settle it.
        if (isLegacy(item)) await upgrade(partitionKey(request.scope, request.key).pk, item as Item);
        // The holder went (released, deleted, expired) between the refusal and the read: claim again.
      }
      throw new Error("dynamoStore: the record kept changing under the claim; nothing was claimed.");
    },

    async takeover(request) {
      const now = judged(request.now);
      const leaseExpiresAt = request.now + request.leaseMs;
      const take = () =>
        updateKeepingLaterExpiry(
          request,
          takeoverCondition,
          "o = :token, s = :inProgress, l = :lease, u = :at - c, a = if_not_exists(a, :one) + :one",
          {
            ":fromToken": tokenValue(request.fromToken),
            ":token": tokenValue(request.token),
            ":now": n(now),
            ":unknown": unknown,
            ":inProgress": inProgress,
            ":lease": n(leaseExpiresAt),
            ":at": n(request.now),
            ":one": n(1),
          },
          leaseExpiresAt + request.ttlMs,
          // The new owner starts without a result; an error (why the record was unknown) stays.
          " REMOVE r",
        );
      let item = await take();
      if (item === undefined) {
        // An earlier build's record (taken from a worker on it): rewritten in this form first, then taken as
        // any other; only where the takeover would land, so that a refused one leaves its owner the record.
        const seen = await read(request);
        if (!isLegacy(seen)) return null;
        await upgrade(partitionKey(request.scope, request.key).pk, seen as Item, {
          condition: legacyTakeover,
          values: {
            ":fromToken": s(request.fromToken),
            ":now": n(now),
            ":legacyUnknown": s(RecordStatus.unknown),
            ":legacyInProgress": s(RecordStatus.inProgress),
          },
        });
        item = await take();
      }
      return item === undefined ? null : recordOf(item);
    },

    async settle(request) {
      const expiresAt = request.now + request.ttlMs;
      const set = ["s = :status", "u = :at - c", "e = :expiresAt", "#ttl = :ttl"];
      // A settled record's lease ends when it settled (record-item.ts): l goes.
      const remove = ["l"];
      const values: Record<string, AttributeValue> = {
        ":token": tokenValue(request.token),
        ":inProgress": inProgress,
        ":unknown": unknown,
        ":status": statusCode(request.status),
        ":at": n(request.now),
        ":expiresAt": n(expiresAt),
        ":ttl": n(keptTtl(expiresAt)),
      };
      for (const [field, name] of [
        ["result", "r"],
        ["error", "x"],
      ] as const) {
        const value = request[field];
        if (value === null) remove.push(name);
        else {
          set.push(`${name} = :${name}`);
          values[`:${name}`] = s(value);
        }
      }
      const update = await conditional(
        (sdk) =>
          new sdk.UpdateItemCommand({
            TableName: table,
            Key: partitionKey(request.scope, request.key),
            ConditionExpression: settleCondition,
            UpdateExpression: `SET ${set.join(", ")} REMOVE ${remove.join(", ")}`,
            ExpressionAttributeNames: { "#ttl": "ttl" },
            ExpressionAttributeValues: values,
            // The record as it was: the outcome is the request's, so a large result is not sent back.
            ReturnValues: "ALL_OLD",
          }),
      );
      if (!update.applied) return null;
      const before = recordOf(update.item ?? {});
      return {
        ...before,
        status: request.status,
        leaseExpiresAt: request.now,
        updatedAt: request.now,
        expiresAt,
        result: request.result,
        error: request.error,
      };
    },

    async renew(request) {
      const leaseExpiresAt = request.now + request.leaseMs;
      const item = await updateKeepingLaterExpiry(
        request,
        renewCondition,
        "l = :lease, u = :at - c",
        {
          ":token": tokenValue(request.token),
          ":inProgress": inProgress,
          ":lease": n(leaseExpiresAt),
          ":at": n(request.now),
        },
        leaseExpiresAt + request.ttlMs,
      );
      return item !== undefined;
    },

    async release(request) {
      checkToken(request.token);
      // A tombstone rather than a delete, and the token kept on any item the key holds: a claim with
      // this token still on its way (sent, its answer lost, given up on) is refused when it arrives,
      // instead of landing with nobody behind it.
      const until = Date.now() + tombstoneMs;
      const ttl = ttlSeconds(until, marginMs);
      const tokens = ss(request.token);
      // What the last refusal showed the key to hold; nothing known before the first write.
      let seen: Item | undefined;
      for (let attempt = 0; attempt < releaseTries; attempt++) {
        const now = judged(Date.now());
        // Tokens released more than a day ago are dropped (the set starts afresh), so that a key released
        // often keeps only the last day's tokens; the write says which case it is in its condition.
        const keeping = releasedUntil(seen) > now;
        const own = await conditional(
          (sdk) =>
            new sdk.UpdateItemCommand({
              TableName: table,
              Key: partitionKey(request.scope, request.key),
              ConditionExpression: `(${releaseCondition}) AND ${keeping ? keepingTokens : notKeepingTokens}`,
              UpdateExpression: `SET s = :released, o = :token, e = :until, #ttl = :ttl, ru = :until${keeping ? " ADD rt :tokens" : ", rt = :tokens"} REMOVE ${recordAttributes.join(", ")}`,
              ExpressionAttributeNames: { "#ttl": "ttl" },
              ExpressionAttributeValues: {
                ":token": tokenValue(request.token),
                ":tokens": tokens,
                ":until": n(until),
                ":ttl": n(ttl),
                ":now": n(now),
                ":released": tombstone,
                ":inProgress": inProgress,
                ":unknown": unknown,
              },
              ReturnValues: "ALL_OLD",
              ReturnValuesOnConditionCheckFailure: "ALL_OLD",
            }),
        );
        if (own.applied) return readItem(own.item).kind === "record";
        // Another caller's item (or this token's settled record): keep the token on it, and keep the item
        // at least as long as the token must be kept. The write is conditional on what the refusal showed.
        const item = own.item ?? (await read(request));
        seen = item;
        const found = readItem(item);
        const legacy = isLegacy(item);
        if (legacy && found.kind === "record" && ownClaim(found.record, request.token)) {
          // This token's own claim in the earlier form: rewritten in this form first, then released as any other.
          await upgrade(partitionKey(request.scope, request.key).pk, item as Item);
          seen = undefined;
          continue;
        }
        // Nothing there, or this token's own claim, keeping tokens or not as the write guessed otherwise.
        if (found.kind === "absent" || (found.kind === "record" && ownClaim(found.record, request.token)))
          continue;
        // Another caller's item. An earlier build's item keeps the token as that build kept it, under its
        // names, and is not rewritten: a worker on that build holding its claim must still be able to renew
        // and settle it.
        const untilName = legacy ? "#releasedUntil" : "ru";
        const setName = legacy ? "released" : "rt";
        const fresh = releasedUntil(item) <= now;
        const bumpTtl = numberOf(item, "ttl") < ttl;
        const kept = await conditional(
          (sdk) =>
            new sdk.UpdateItemCommand({
              TableName: table,
              Key: partitionKey(request.scope, request.key),
              ConditionExpression: [
                // An item in the form it was read in.
                legacy ? "attribute_exists(#status)" : "attribute_exists(s)",
                // Tokens kept past their time are dropped: the set starts afresh.
                fresh
                  ? `(attribute_not_exists(${untilName}) OR ${untilName} <= :now)`
                  : `${untilName} > :now`,
                bumpTtl ? "(attribute_not_exists(#ttl) OR #ttl < :ttl)" : "#ttl >= :ttl",
              ].join(" AND "),
              UpdateExpression: `SET ${untilName} = :until${bumpTtl ? ", #ttl = :ttl" : ""}${fresh ? `, ${setName} = :tokens` : ` ADD ${setName} :tokens`}`,
              ExpressionAttributeNames: {
                "#ttl": "ttl",
                ...(legacy ? { "#status": "status", "#releasedUntil": "releasedUntil" } : {}),
              },
              ExpressionAttributeValues: {
                ":tokens": tokens,
                ":until": n(until),
                ":ttl": n(ttl),
                ":now": n(now),
              },
            }),
        );
        if (kept.applied) return false;
        // The item changed between the two writes: look again.
      }
      throw new Error("dynamoStore: the record kept changing under the release; nothing was released.");
    },

    async get(id, now) {
      const cutoff = judged(now);
      const found = readItem(await read(id));
      return found.kind === "record" && found.record.expiresAt > cutoff ? found.record : undefined;
    },

    async delete(id) {
      // An item keeping tokens released within the day stays, as a tombstone: a claim of one of them
      // still on its way must not land because the record went.
      const { pk } = partitionKey(id.scope, id.key);
      for (let attempt = 0; attempt < releaseTries; attempt++) {
        const now = n(judged(Date.now()));
        const gone = await conditional(
          (sdk) =>
            new sdk.DeleteItemCommand({
              TableName: table,
              Key: { pk },
              ConditionExpression: noneKept,
              ExpressionAttributeNames: keptNames,
              ExpressionAttributeValues: { ":now": now },
              ReturnValues: "ALL_OLD",
            }),
        );
        if (gone.applied) return readItem(gone.item).kind === "record";
        const retired = await retire(pk, anyKept, now);
        if (retired !== undefined) return retired;
        // A tombstone already, an earlier build's item (rewritten first), or the item changed between the two writes:
        // look again.
        const item = await read(id);
        if (isLegacy(item)) await upgrade(pk, item as Item);
        else if (readItem(item).kind !== "record") return false;
      }
      throw new Error("dynamoStore: the record kept changing under the delete; nothing was deleted.");
    },

    async list(query) {
      const limit = listLimit("dynamoStore", query.limit);
      const after = query.cursor === undefined ? undefined : decodeListCursor("dynamoStore", query.cursor);
      // A scan finds items in DynamoDB's order, not (scope, key)'s: the whole table is read, filtered and
      // sorted here (scope and key live in pk). list is for operators and the CLI, not a request's path.
      // With a scope, DynamoDB filters by pk: it begins with the scope (its length pins it) and the prefix.
      const filter: ScanFilter =
        query.scope === undefined
          ? {}
          : {
              expression: "begins_with(pk, :id)",
              values: { ":id": partitionKey(query.scope, query.keyPrefix ?? "").pk },
            };
      const records: IdempotencyRecord[] = [];
      for await (const items of scan(filter)) {
        for (const item of items) {
          const found = readItem(item);
          if (found.kind !== "record") continue;
          const record = found.record;
          if (after && compareIds(record, after) <= 0) continue;
          if (query.scope !== undefined && record.scope !== query.scope) continue;
          if (query.keyPrefix !== undefined && !record.key.startsWith(query.keyPrefix)) continue;
          if (listMatches(record, query)) records.push(record);
        }
      }
      records.sort(compareIds);
      if (records.length <= limit) return { records };
      records.length = limit;
      return { records, nextCursor: encodeListCursor(records[limit - 1]!) };
    },

    async purge({ now, limit }) {
      const max = purgeLimit("dynamoStore", limit);
      const judgedNow = judged(now);
      const cutoff = n(judgedNow);
      let deleted = 0;
      // Expired in this form, or in the earlier one.
      const expired = "(e <= :now OR #expiresAt <= :now)";
      const filter = {
        expression: expired,
        names: { "#expiresAt": "expiresAt", "#status": "status", "#releasedUntil": "releasedUntil" },
        values: { ":now": cutoff },
        projection: "pk, s, ru, #status, #releasedUntil",
      };
      const purgeOne = async (found: Item): Promise<boolean> => {
        const pk = found.pk as AttributeValue;
        let item: Item | undefined = found;
        if (isLegacy(item)) {
          // An earlier build's item: rewritten in this form first (it is read whole for that), then purged
          // as any other. Only while it is still expired: a claim made since the scan stays its owner's.
          const whole = await readPk(pk);
          if (isLegacy(whole))
            await upgrade(pk, whole as Item, { condition: "#expiresAt <= :now", values: { ":now": cutoff } });
          item = await readPk(pk);
          if (item === undefined || isLegacy(item)) return false;
        }
        // An item that keeps released tokens stays until they pass (see record-item.ts); its record
        // goes, and the item stays as a tombstone.
        if (keptUntil(item) > judgedNow) {
          if ((item.s as { S?: unknown } | undefined)?.S === (tombstone as { S: string }).S) return false;
          return (await retire(pk, `e <= :now AND ${anyKept}`, cutoff)) === true;
        }
        const gone = await conditional(
          (sdk) =>
            new sdk.DeleteItemCommand({
              TableName: table,
              Key: { pk },
              // Claimed again, or given a released token, since the scan: it stays.
              ConditionExpression: `${expired} AND ${noneKept}`,
              ExpressionAttributeNames: { "#expiresAt": "expiresAt", "#releasedUntil": "releasedUntil" },
              ExpressionAttributeValues: { ":now": cutoff },
              ReturnValues: "ALL_OLD",
            }),
        );
        // Tombstones go too, uncounted: they are not records.
        return gone.applied && readItem(gone.item).kind === "record";
      };
      for await (const items of scan(filter)) {
        // In batches no larger than what is left to delete, so the limit is never overshot.
        for (let next = 0; next < items.length && deleted < max; ) {
          const batch = items.slice(next, next + Math.min(max - deleted, 25));
          next += batch.length;
          const answers = await Promise.all(batch.map(purgeOne));
          deleted += answers.filter(Boolean).length;
        }
        if (deleted >= max) break;
      }
      return { deleted };
    },
  } satisfies DynamoStore;

  /** Every item the filter lets through, a page of the table at a time. */
  async function* scan(filter: ScanFilter): AsyncGenerator<Item[]> {
    let start: Item | undefined;
    do {
      const exclusiveStart = start;
      const page = await send<{ Items?: Item[]; LastEvaluatedKey?: Item }>(
        (sdk) =>
          new sdk.ScanCommand({
            TableName: table,
            ConsistentRead: true,
            ...(filter.expression
              ? {
                  FilterExpression: filter.expression,
                  ExpressionAttributeNames: filter.names,
                  ExpressionAttributeValues: filter.values,
                }
              : {}),
            ...(filter.projection ? { ProjectionExpression: filter.projection } : {}),
            ...(exclusiveStart
              ? { ExclusiveStartKey: exclusiveStart as Record<string, AttributeValue> }
              : {}),
          }),
      );
      yield page.Items ?? [];
      start = page.LastEvaluatedKey;
    } while (start !== undefined);
  }

  /** The item at `pk` as it is now (a strongly consistent read). */
  async function readPk(pk: AttributeValue): Promise<Item | undefined> {
    const output = await send<{ Item?: Item }>(
      (sdk) => new sdk.GetItemCommand({ TableName: table, Key: { pk }, ConsistentRead: true }),
    );
    return output.Item;
  }

  /**
   * Make the record at `pk` a tombstone that keeps the key's released tokens (its own token stays its
   * token), on `condition` (which uses `:now` and `#releasedUntil`). Returns true when a record was made a tombstone,
   * undefined when the condition or the item refused (an earlier build's item always does: the caller rewrites it).
   */
  async function retire(
    pk: AttributeValue,
    condition: string,
    now: AttributeValue,
  ): Promise<true | undefined> {
    const retired = await conditional(
      (sdk) =>
        new sdk.UpdateItemCommand({
          TableName: table,
          Key: { pk },
          ConditionExpression: `${condition} AND attribute_exists(s) AND s <> :released`,
          UpdateExpression: `SET s = :released REMOVE ${recordAttributes.join(", ")}`,
          ExpressionAttributeNames: keptNames,
          ExpressionAttributeValues: { ":now": now, ":released": tombstone },
          ReturnValues: "ALL_OLD",
        }),
    );
    return retired.applied && readItem(retired.item).kind === "record" ? true : undefined;
  }

  /**
   * One claim write: a put when `put` and the role may put (earlier builds' documented grants lacked PutItem: a
   * refused put wrote nothing, and every claim is an update from then on), else the update.
   */
  async function claimOnce(record: IdempotencyRecord, now: number, put: boolean): Promise<Conditional> {
    if (put && !putDenied) {
      try {
        return await conditional((sdk) => putClaimCommand(sdk, record, now));
      } catch (error) {
        if ((error as { name?: unknown } | null)?.name !== "AccessDeniedException") throw error;
        putDenied = true;
      }
    }
    return conditional((sdk) => claimCommand(sdk, record, now));
  }

  /**
   * A claim as a put: the record written over nothing, or over an expired record that keeps no released
   * tokens (a tombstone always keeps its own). Cheaper for DynamoDB (and dynalite) to parse than the
   * update below, which a claim sends when the put was refused by an item it may still replace.
   */
  function putClaimCommand(sdk: Sdk, record: IdempotencyRecord, now: number) {
    return new sdk.PutItemCommand({
      TableName: table,
      Item: {
        ...partitionKey(record.scope, record.key),
        ttl: n(keptTtl(record.expiresAt)),
        ...claimAttributes(record),
      },
      ConditionExpression: putClaimCondition,
      ExpressionAttributeValues: { ":released": tombstone, ":now": n(now) },
      ReturnValuesOnConditionCheckFailure: "ALL_OLD",
    });
  }

  /**
   * A claim: the record written over nothing, an expired record or a tombstone, unless its token was
   * released on this key. An update rather than a put, so that the item keeps its released tokens.
   */
  function claimCommand(sdk: Sdk, record: IdempotencyRecord, now: number) {
    const attributes = claimAttributes(record);
    const values: Record<string, AttributeValue> = {
      ":released": tombstone,
      ":token": tokenValue(record.token),
      ":tokenText": s(record.token),
      ":now": n(now),
      ":ttl": n(keptTtl(record.expiresAt)),
    };
    const set = ["#ttl = :ttl"];
    for (const [name, value] of Object.entries(attributes)) {
      set.push(`${name} = :${name}`);
      values[`:${name}`] = value;
    }
    // What an expired record before it may have kept (the claim keeps the key's released tokens).
    const remove = ["u", "a", "r", "x"].filter((name) => !(name in attributes));
    return new sdk.UpdateItemCommand({
      TableName: table,
      Key: partitionKey(record.scope, record.key),
      ConditionExpression: claimCondition,
      UpdateExpression: `SET ${set.join(", ")}${remove.length > 0 ? ` REMOVE ${remove.join(", ")}` : ""}`,
      ExpressionAttributeNames: { "#ttl": "ttl" },
      ExpressionAttributeValues: values,
      // DynamoDB sends the holder with the refusal; a server that does not costs one read more.
      ReturnValuesOnConditionCheckFailure: "ALL_OLD",
    });
  }

  function recordOf(item: Item): IdempotencyRecord {
    const found = readItem(item);
    if (found.kind !== "record") throw new Error(`dynamoStore: ${table} answered a write with no record.`);
    return found.record;
  }
}

/** Whether a release by `token` is of this record's own claim, in progress or unknown (`releaseCondition`). */
function ownClaim(record: IdempotencyRecord, token: string): boolean {
  return record.token === token && (record.status === "in_progress" || record.status === "unknown");
}

/** A token the item's released set can keep (see maxTokenLength); the core's always are. */
function checkToken(token: string): void {
  if (typeof token !== "string" || token.length === 0 || token.length > maxTokenLength) {
    throw new TypeError(
      `dynamoStore: an owner token must be a string of 1 to ${maxTokenLength} characters, got ${typeof token === "string" ? `${token.length} characters` : typeof token}.`,
    );
  }
}

/**
 * DynamoDB refused a write that would take the item past 400 KB: its result, and the tokens released on
 * its key, which are all kept for their day (see docs/stores.md). Nothing was written.
 */
function itemFull(cause: unknown): Error {
  return new Error(
    "dynamoStore: the write would take the key's item past DynamoDB's 400 KB limit (its result and the tokens of the claims released on the key, each kept for a day); nothing was written. A refused release is tried again by the core, and its claim, if it landed, is judged like a crashed worker's once its lease passes.",
    { cause },
  );
}

function releasedBeforeArrival(): Error {
  return new Error(
    "dynamoStore: this claim was released before it arrived, and will not be applied; call again with a new token.",
  );
}

interface ScanFilter {
  readonly expression?: string;
  readonly names?: Record<string, string>;
  readonly values?: Record<string, AttributeValue>;
  readonly projection?: string;
}

function resolveOptions(options: DynamoStoreOptions) {
  if (typeof options !== "object" || options === null) invalidOption(owner, "options", "must be an object");
  const client = options.client;
  if (typeof client?.send !== "function") {
    invalidOption(
      owner,
      "client",
      "must be a DynamoDBClient from @aws-sdk/client-dynamodb (no send() method)",
    );
  }
  const table = options.table;
  // DynamoDB's rule for table names.
  if (typeof table !== "string" || !/^[A-Za-z0-9_.-]{3,255}$/.test(table)) {
    invalidOption(
      owner,
      "table",
      `must be a DynamoDB table name (3 to 255 letters, digits, "_", "-" or "."), got ${JSON.stringify(table)}`,
    );
  }
  const marginMs = options.clockSkewMarginMs ?? defaultSkewMarginMs;
  if (!Number.isSafeInteger(marginMs) || marginMs < 0 || marginMs > maxSkewMarginMs) {
    invalidOption(
      owner,
      "clockSkewMarginMs",
      `must be whole milliseconds from 0 to ${maxSkewMarginMs}, got ${String(marginMs)}`,
    );
  }
  return { client, table, marginMs };
}
