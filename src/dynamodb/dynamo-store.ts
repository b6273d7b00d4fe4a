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
  type ListQuery,
  type RecordId,
} from "../core/store.js";
import {
  type AttributeName,
  type AttributeValue,
  attributes,
  type Item,
  n,
  namesOf,
  numberOf,
  partitionKey,
  readItem,
  recordAttributes,
  recordItem,
  released,
  releasedOn,
  releasedUntil,
  s,
  ss,
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
/** How many times a claim tries again when the record it was refused by is gone before it could be read. */
const claimTries = 3;
/** How many times a release looks again when the key's item changed under it (or kept tokens unseen). */
const releaseTries = 4;

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

// A live record blocks a claim; an expired one, nothing at all, or another claim's tombstone does not.
// A claim whose token was released on this key never lands.
const claimCondition =
  "(attribute_not_exists(#pk) OR (#status = :released AND #token <> :token) OR (#status <> :released AND #expiresAt <= :now)) AND NOT contains(#released, :token)";
// Only the token's own claim, in progress or unknown; also where nothing is (a claim still on its way).
const releaseCondition =
  "attribute_not_exists(#pk) OR (#token = :token AND (#status = :inProgress OR #status = :unknown))";
// Whether the item keeps tokens released within the last day (see record-item.ts).
const keepingTokens = "#releasedUntil > :now";
const notKeepingTokens = "(attribute_not_exists(#releasedUntil) OR #releasedUntil <= :now)";
const settleCondition = "#token = :token AND (#status = :inProgress OR #status = :unknown)";
const renewCondition = "#token = :token AND #status = :inProgress";
const takeoverCondition =
  "#token = :fromToken AND #expiresAt > :now AND (#status = :unknown OR (#status = :inProgress AND #leaseExpiresAt <= :now))";

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
    names: AttributeName[],
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
            ConditionExpression: `(${condition}) AND #expiresAt ${moveExpiry ? "<=" : ">"} :expiresAt`,
            UpdateExpression: `SET ${set}${moveExpiry ? ", #expiresAt = :expiresAt, #ttl = :ttl" : ""}${tail}`,
            ExpressionAttributeNames: namesOf(
              ...names,
              "expiresAt",
              ...(moveExpiry ? (["ttl"] as const) : []),
            ),
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
        const update = await conditional((sdk) => claimCommand(sdk, record, now));
        if (update.applied) return { claimed: true, record, now };
        const item = update.item ?? (await read(request));
        if (releasedOn(item, request.token)) throw releasedBeforeArrival();
        const found = readItem(item);
        if (found.kind === "record" && found.record.expiresAt > now)
          return { claimed: false, record: found.record, now };
        if (found.kind === "tombstone" && found.token === request.token) throw releasedBeforeArrival();
        // The holder went (released, deleted, expired) between the refusal and the read: claim again.
      }
      throw new Error("dynamoStore: the record kept changing under the claim; nothing was claimed.");
    },

    async takeover(request) {
      const now = judged(request.now);
      const leaseExpiresAt = request.now + request.leaseMs;
      const item = await updateKeepingLaterExpiry(
        request,
        takeoverCondition,
        "#token = :token, #status = :inProgress, #leaseExpiresAt = :lease, #updatedAt = :at, #attempts = #attempts + :one",
        ["token", "status", "leaseExpiresAt", "updatedAt", "attempts", "result"],
        {
          ":fromToken": s(request.fromToken),
          ":token": s(request.token),
          ":now": n(now),
          ":unknown": s("unknown"),
          ":inProgress": s("in_progress"),
          ":lease": n(leaseExpiresAt),
          ":at": n(request.now),
          ":one": n(1),
        },
        leaseExpiresAt + request.ttlMs,
        // The new owner starts without a result; an error (why the record was unknown) stays.
        " REMOVE #result",
      );
      return item === undefined ? null : recordOf(item);
    },

    async settle(request) {
      const expiresAt = request.now + request.ttlMs;
      const set = [
        "#status = :status",
        "#leaseExpiresAt = :at",
        "#updatedAt = :at",
        "#expiresAt = :expiresAt",
        "#ttl = :ttl",
      ];
      const remove: string[] = [];
      const values: Record<string, AttributeValue> = {
        ":token": s(request.token),
        ":inProgress": s("in_progress"),
        ":unknown": s("unknown"),
        ":status": s(request.status),
        ":at": n(request.now),
        ":expiresAt": n(expiresAt),
        ":ttl": n(keptTtl(expiresAt)),
      };
      for (const field of ["result", "error"] as const) {
        const value = request[field];
        if (value === null) remove.push(`#${field}`);
        else {
          set.push(`#${field} = :${field}`);
          values[`:${field}`] = s(value);
        }
      }
      const update = await conditional(
        (sdk) =>
          new sdk.UpdateItemCommand({
            TableName: table,
            Key: partitionKey(request.scope, request.key),
            ConditionExpression: settleCondition,
            UpdateExpression: `SET ${set.join(", ")}${remove.length > 0 ? ` REMOVE ${remove.join(", ")}` : ""}`,
            ExpressionAttributeNames: namesOf(
              "token",
              "status",
              "leaseExpiresAt",
              "updatedAt",
              "expiresAt",
              "ttl",
              "result",
              "error",
            ),
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
        "#leaseExpiresAt = :lease, #updatedAt = :at",
        ["token", "status", "leaseExpiresAt", "updatedAt"],
        {
          ":token": s(request.token),
          ":inProgress": s("in_progress"),
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
              UpdateExpression: `SET #status = :released, #token = :token, #expiresAt = :until, #ttl = :ttl, #releasedUntil = :until${keeping ? " ADD #released :tokens" : ", #released = :tokens"} REMOVE ${recordAttributes.map((a) => `#${a}`).join(", ")}`,
              ExpressionAttributeNames: namesOf(
                "pk",
                "status",
                "token",
                "expiresAt",
                "ttl",
                "released",
                "releasedUntil",
                ...recordAttributes,
              ),
              ExpressionAttributeValues: {
                ":token": s(request.token),
                ":tokens": tokens,
                ":until": n(until),
                ":ttl": n(ttl),
                ":now": n(now),
                ":released": s(released),
                ":inProgress": s("in_progress"),
                ":unknown": s("unknown"),
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
        // Nothing there, or this token's own claim, keeping tokens or not as the write guessed otherwise.
        const found = readItem(item);
        if (found.kind === "absent" || (found.kind === "record" && ownClaim(found.record, request.token)))
          continue;
        const fresh = releasedUntil(item) <= now;
        const bumpTtl = numberOf(item, "ttl") < ttl;
        const kept = await conditional(
          (sdk) =>
            new sdk.UpdateItemCommand({
              TableName: table,
              Key: partitionKey(request.scope, request.key),
              ConditionExpression: [
                "attribute_exists(#pk)",
                // Tokens kept past releasedUntil are dropped: the set starts afresh.
                fresh ? notKeepingTokens : keepingTokens,
                bumpTtl ? "(attribute_not_exists(#ttl) OR #ttl < :ttl)" : "#ttl >= :ttl",
              ].join(" AND "),
              UpdateExpression: `SET #releasedUntil = :until${bumpTtl ? ", #ttl = :ttl" : ""}${fresh ? ", #released = :tokens" : " ADD #released :tokens"}`,
              ExpressionAttributeNames: namesOf("pk", "released", "releasedUntil", "ttl"),
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
      for (let attempt = 0; attempt < releaseTries; attempt++) {
        const now = n(judged(Date.now()));
        const gone = await conditional(
          (sdk) =>
            new sdk.DeleteItemCommand({
              TableName: table,
              Key: partitionKey(id.scope, id.key),
              ConditionExpression: notKeepingTokens,
              ExpressionAttributeNames: namesOf("releasedUntil"),
              ExpressionAttributeValues: { ":now": now },
              ReturnValues: "ALL_OLD",
            }),
        );
        if (gone.applied) return readItem(gone.item).kind === "record";
        const retired = await retire(partitionKey(id.scope, id.key).pk, keepingTokens, {}, now);
        if (retired !== undefined) return retired;
        // A tombstone already, or the item changed between the two writes: look again.
        if (readItem(await read(id)).kind !== "record") return false;
      }
      throw new Error("dynamoStore: the record kept changing under the delete; nothing was deleted.");
    },

    async list(query) {
      const limit = listLimit("dynamoStore", query.limit);
      const after = query.cursor === undefined ? undefined : decodeListCursor("dynamoStore", query.cursor);
      const filter = listFilter(query);
      // A scan finds items in DynamoDB's order, not (scope, key)'s: the whole table is read, filtered on
      // the server, and sorted here. list is for operators and the CLI, not for a request's path.
      const records: IdempotencyRecord[] = [];
      for await (const items of scan(filter)) {
        for (const item of items) {
          const found = readItem(item);
          if (found.kind !== "record") continue;
          if (after && compareIds(found.record, after) <= 0) continue;
          if (listMatches(found.record, query)) records.push(found.record);
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
      const expired = "#expiresAt <= :now";
      const filter = {
        expression: expired,
        names: namesOf("expiresAt", "status", "releasedUntil"),
        values: { ":now": cutoff },
      };
      for await (const items of scan({ ...filter, projection: "pk, #status, #releasedUntil" })) {
        // In batches no larger than what is left to delete, so the limit is never overshot.
        for (let next = 0; next < items.length && deleted < max; ) {
          const batch = items.slice(next, next + Math.min(max - deleted, 25));
          next += batch.length;
          const answers = await Promise.all(
            batch.map(async (item) => {
              const pk = item.pk as AttributeValue;
              // An item that keeps released tokens stays until they pass (see record-item.ts); its
              // record goes, and the item stays as a tombstone.
              if (releasedUntil(item) > judgedNow) {
                const status = (item.status as { S?: unknown } | undefined)?.S;
                if (status === released) return false;
                return (
                  (await retire(pk, `${expired} AND ${keepingTokens}`, { ":now": cutoff }, cutoff)) === true
                );
              }
              const gone = await conditional(
                (sdk) =>
                  new sdk.DeleteItemCommand({
                    TableName: table,
                    Key: { pk },
                    // Claimed again, or given a released token, since the scan: it stays.
                    ConditionExpression: `${expired} AND ${notKeepingTokens}`,
                    ExpressionAttributeNames: namesOf("expiresAt", "releasedUntil"),
                    ExpressionAttributeValues: { ":now": cutoff },
                    ReturnValues: "ALL_OLD",
                  }),
              );
              // Tombstones go too, uncounted: they are not records.
              return gone.applied && readItem(gone.item).kind === "record";
            }),
          );
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
            FilterExpression: filter.expression,
            ExpressionAttributeNames: filter.names,
            ExpressionAttributeValues: filter.values,
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

  /**
   * Make the record at `pk` a tombstone that keeps the key's released tokens (its own token stays its
   * token), on `condition` (which uses `:now` and may use `#expiresAt`). Returns true when a record was
   * made a tombstone, undefined when the condition or the item refused.
   */
  async function retire(
    pk: AttributeValue,
    condition: string,
    values: Record<string, AttributeValue>,
    now: AttributeValue,
  ): Promise<true | undefined> {
    const retired = await conditional(
      (sdk) =>
        new sdk.UpdateItemCommand({
          TableName: table,
          Key: { pk },
          ConditionExpression: `${condition} AND #status <> :released`,
          UpdateExpression: `SET #status = :released REMOVE ${recordAttributes.map((a) => `#${a}`).join(", ")}`,
          ExpressionAttributeNames: namesOf(
            ...(condition.includes("#expiresAt") ? (["expiresAt"] as const) : []),
            "status",
            "releasedUntil",
            ...recordAttributes,
          ),
          ExpressionAttributeValues: { ...values, ":now": now, ":released": s(released) },
          ReturnValues: "ALL_OLD",
        }),
    );
    return retired.applied && readItem(retired.item).kind === "record" ? true : undefined;
  }

  /**
   * A claim: the record written over nothing, an expired record or a tombstone, unless its token was
   * released on this key. An update rather than a put, so that the item keeps its released tokens.
   */
  function claimCommand(sdk: Sdk, record: IdempotencyRecord, now: number) {
    const item: Record<string, AttributeValue> = {
      ...recordItem(record, marginMs),
      ttl: n(keptTtl(record.expiresAt)),
    };
    const set: string[] = [];
    const values: Record<string, AttributeValue> = {
      ":released": s(released),
      ":token": s(record.token),
      ":now": n(now),
    };
    for (const [name, value] of Object.entries(item)) {
      if (name === "pk") continue;
      set.push(`#${name} = :${name}`);
      values[`:${name}`] = value;
    }
    const remove = (["result", "error"] as const).filter((name) => item[name] === undefined);
    return new sdk.UpdateItemCommand({
      TableName: table,
      Key: partitionKey(record.scope, record.key),
      ConditionExpression: claimCondition,
      UpdateExpression: `SET ${set.join(", ")}${remove.length > 0 ? ` REMOVE ${remove.map((name) => `#${name}`).join(", ")}` : ""}`,
      ExpressionAttributeNames: namesOf(...attributes.filter((name) => name !== "releasedUntil")),
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
  readonly expression: string;
  readonly names: Record<string, string>;
  readonly values: Record<string, AttributeValue>;
  readonly projection?: string;
}

/** list's filters, applied by DynamoDB to what it reads so that only matches travel back. */
function listFilter(query: ListQuery): ScanFilter {
  const terms = ["#status <> :released"];
  const names: AttributeName[] = ["status"];
  const values: Record<string, AttributeValue> = { ":released": s(released) };
  const add = (term: string, name: AttributeName, value: string, attribute: AttributeValue) => {
    terms.push(term);
    names.push(name);
    values[value] = attribute;
  };
  if (query.scope !== undefined) add("#scope = :scope", "scope", ":scope", s(query.scope));
  if (query.tool !== undefined) add("#tool = :tool", "tool", ":tool", s(query.tool));
  if (query.status !== undefined) add("#status = :status", "status", ":status", s(query.status));
  // begins_with of "" is refused by DynamoDB; every key starts with it anyway.
  if (query.keyPrefix) add("begins_with(#key, :keyPrefix)", "key", ":keyPrefix", s(query.keyPrefix));
  if (query.createdBefore !== undefined)
    add("#createdAt < :before", "createdAt", ":before", n(query.createdBefore));
  if (query.createdAfter !== undefined)
    add("#createdAt >= :after", "createdAt", ":after", n(query.createdAfter));
  return { expression: terms.join(" AND "), names: namesOf(...new Set(names)), values };
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
