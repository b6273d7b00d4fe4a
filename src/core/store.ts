/**
 * The store contract: a few atomic domain operations over idempotency records.
 *
 * The core owns tokens, fingerprints, serialization and policy; a store keeps strings,
 * compares numbers and makes each operation atomic. All times are epoch milliseconds.
 */
import { Buffer } from "node:buffer";
import { ErrorCode, IdempotencyError } from "./errors.js";

/** Where a record is in its life (docs/concepts.md, "The record's life"). */
export const RecordStatus = {
  /** Claimed; the owner is (or was) running the tool. */
  inProgress: "in_progress",
  /** The tool finished; its result is replayed until the record expires. */
  completed: "completed",
  /** The tool failed definitively; the failure is replayed until the record expires. */
  failed: "failed",
  /** Nobody knows whether the effect happened; callers fail closed until it is resolved. */
  unknown: "unknown",
} as const;
export type RecordStatus = (typeof RecordStatus)[keyof typeof RecordStatus];

/** Everything a store keeps for one (scope, key). */
export interface IdempotencyRecord {
  readonly scope: string;
  readonly key: string;
  /** The tool's name, as given to `idempotent({ name })`. */
  readonly tool: string;
  /** SHA-256 (hex) of the canonical JSON of the significant arguments. */
  readonly fingerprint: string;
  readonly status: RecordStatus;
  /** The owner token of the current or last claim. Settle, renew and release must present it. */
  readonly token: string;
  /** When the first attempt claimed the key: the `original_called_at` a replay reports. */
  readonly createdAt: number;
  readonly updatedAt: number;
  /** While in progress: when the owner's lease passes unless renewed. */
  readonly leaseExpiresAt: number;
  /** When the record stops absorbing repeats and may be removed. */
  readonly expiresAt: number;
  /** How many claims (first claim and takeovers) this key has seen. */
  readonly attempts: number;
  /** The serialized result of a completed call, or null. */
  readonly result: string | null;
  /** The serialized failure (failed, unknown) or why the result was not kept (completed), or null. */
  readonly error: string | null;
}

/** A request to claim (scope, key): insert an in-progress record unless a live one exists. */
export interface ClaimRequest {
  readonly scope: string;
  readonly key: string;
  readonly tool: string;
  readonly fingerprint: string;
  /** A fresh owner token, unguessable, made by the core. */
  readonly token: string;
  readonly leaseMs: number;
  readonly ttlMs: number;
  /** The core's clock. Stores with a clock of their own (a database server) use theirs instead. */
  readonly now: number;
  /**
   * Set by a caller that caches the record a claim finds (`tieredStore`): the result's `now` must then be
   * the clock the store judged by, never a stand-in (see `ClaimResult`).
   */
  readonly exactNow?: boolean | undefined;
}

// 128 bits from the CSPRNG, 16 bytes at a time out of a 4 KiB pool. randomUUID() is no slower to call, but on
// Node 20 each string it returns keeps ~500 bytes of heap alive; a store that holds the token (memoryStore,
// the tiered LRU) pays that per record. This one keeps ~85 bytes, and costs less than randomBytes(16) per
// token. The bytes come from Web Crypto, which every runtime has;
// Buffer (Node's, Deno's and Bun's) only spells them in hex, natively.
const tokenPool = Buffer.allocUnsafe(4096);
let tokenOffset = tokenPool.length;

/** A fresh, unguessable owner token (32 hex characters): the core makes one per call, for all its claims. */
export function ownerToken(): string {
  if (tokenOffset + 16 > tokenPool.length) {
    crypto.getRandomValues(tokenPool);
    tokenOffset = 0;
  }
  const token = tokenPool.toString("hex", tokenOffset, tokenOffset + 16);
  tokenOffset += 16;
  return token;
}

/**
 * The record a winning claim writes: in progress, attempt 1, leased for `leaseMs` from `now` (the instant
 * the store judged by), and kept `ttlMs` beyond its lease: an outcome nobody knows stays unknown for a whole
 * window after the lease passed. A store that knows the request and that instant builds it rather than read
 * it back.
 */
export function claimedRecord(request: ClaimRequest, now: number): IdempotencyRecord {
  const leaseExpiresAt = now + request.leaseMs;
  return {
    scope: request.scope,
    key: request.key,
    tool: request.tool,
    fingerprint: request.fingerprint,
    status: RecordStatus.inProgress,
    token: request.token,
    createdAt: now,
    updatedAt: now,
    leaseExpiresAt,
    expiresAt: leaseExpiresAt + request.ttlMs,
    attempts: 1,
    result: null,
    error: null,
  };
}

/**
 * Settle, and when the store refuses, read the record back: the refusal can be this owner's own settle,
 * applied once already with its reply lost (or resent by the client on reconnect). Returns the settled
 * record, or null when the token no longer owns it.
 */
export async function settleOwn(
  store: IdempotencyStore,
  request: SettleRequest,
): Promise<IdempotencyRecord | null> {
  return (await store.settle(request)) || readBackOwnSettle(store, request);
}

/**
 * {@link settleOwn} after the store refused `request`: the record, if it is this owner's settle, applied
 * already. The core calls the store's settle itself and this only on a refusal, saving a first call an async
 * step.
 */
export async function readBackOwnSettle(
  store: IdempotencyStore,
  request: SettleRequest,
): Promise<IdempotencyRecord | null> {
  const current = await store.get({ scope: request.scope, key: request.key }, request.now);
  return current?.token === request.token && current.status === request.status ? current : null;
}

/**
 * What a claim found. `now` is the clock the store judged by, so the core can tell a live lease from a
 * stale one. A store that cannot read its clock when it claims, or when it finds a completed or failed
 * record (whose lease nobody judges), may answer another time instead, unless the request asks for
 * `exactNow`: the request's `now` for a claim that landed, and for a settled record any time no earlier
 * than its clock's (at most the record's last live millisecond), so that whoever caches the record
 * judges it expired no later than the store would.
 */
export type ClaimResult =
  | { readonly claimed: true; readonly record: IdempotencyRecord; readonly now: number }
  | { readonly claimed: false; readonly record: IdempotencyRecord; readonly now: number };

/**
 * Take over a record from a previous owner: a compare-and-swap on the token.
 * Succeeds only if the record is live, still carries `fromToken` and is either `unknown`, or
 * `in_progress` with its lease passed by the store's clock. The record then expires no earlier than
 * `ttlMs` after the new lease passes.
 */
export interface TakeoverRequest {
  readonly scope: string;
  readonly key: string;
  readonly fromToken: string;
  readonly token: string;
  readonly leaseMs: number;
  readonly ttlMs: number;
  readonly now: number;
}

/**
 * Record the outcome of a claim. Fenced: applies only while the record carries `token` and is `in_progress`
 * or `unknown` — even when its window has passed, as long as the store still holds it (nobody claimed the key
 * since): the effect happened, and recording it is the safer answer.
 */
export interface SettleRequest {
  readonly scope: string;
  readonly key: string;
  readonly token: string;
  readonly status: "completed" | "failed" | "unknown";
  readonly result: string | null;
  readonly error: string | null;
  /** The record absorbs repeats until `now + ttlMs`. */
  readonly ttlMs: number;
  readonly now: number;
}

/**
 * Extend the owner's lease, and the record's expiry to no earlier than `ttlMs` after the new lease passes.
 * Fenced like settle (also past the window, while the store still holds the record); only `in_progress`
 * records are renewed.
 */
export interface RenewRequest {
  readonly scope: string;
  readonly key: string;
  readonly token: string;
  readonly leaseMs: number;
  readonly ttlMs: number;
  readonly now: number;
}

/** Remove the record: the effect certainly did not happen. Fenced like settle. */
export interface ReleaseRequest {
  readonly scope: string;
  readonly key: string;
  readonly token: string;
}

export interface RecordId {
  readonly scope: string;
  readonly key: string;
}

/** One string per (scope, key), for in-process maps: the scope's length keeps ("ab", "c") and ("a", "bc") apart. */
export function recordIdText(scope: string, key: string): string {
  return `${scope.length}:${scope}${key}`;
}

/**
 * For a store that cannot keep a NUL (U+0000) in a scope, key or tool name: refuses one as
 * `invalid_arguments` before the store sees it, saying why (`why` completes the sentence).
 */
export function refuseNul(store: string, why: string, ...values: string[]): void {
  if (values.some((value) => value.includes("\u0000"))) {
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      `${store}: scope, key and tool name cannot contain the NUL character (U+0000) ${why}`,
    );
  }
}

/** Filters and paging for `list`. Every filter is optional; they combine with AND. */
export interface ListQuery {
  readonly scope?: string;
  readonly tool?: string;
  readonly status?: RecordStatus;
  readonly keyPrefix?: string;
  /** Only records created before this time (epoch ms). */
  readonly createdBefore?: number;
  /** Only records created at or after this time (epoch ms). */
  readonly createdAfter?: number;
  /** At most this many records (default 100, at most 1000). */
  readonly limit?: number;
  /** The `nextCursor` of the previous page. */
  readonly cursor?: string;
}

export interface ListPage {
  readonly records: readonly IdempotencyRecord[];
  /** Pass it back as `cursor` for the next page; absent on the last page. */
  readonly nextCursor?: string;
}

export interface PurgeRequest {
  /** Records with `expiresAt <= now` are removed. */
  readonly now: number;
  /** Remove at most this many in one call (default 1000). */
  readonly limit?: number;
}

/**
 * What every store implements. Each method is one atomic operation.
 * Expired records (`expiresAt <= now`) count as absent for claim and get.
 * A store signals "unreachable" by throwing; the core turns it into `store_unavailable` and fails closed.
 *
 * A claim that failed must not land later. When `claim` rejects, its reply may have been lost after it
 * was applied, so the core, which does not run the tool, releases the key with the same token, retrying
 * in the background until the store answers. If the rejected claim can still be applied after that
 * release was answered, it lands with nobody behind it: the key is held until the lease passes, and
 * then judged like a crashed worker's (an `irreversible` tool answers `outcome_unknown` though it never
 * ran). So once `claim` has rejected, the claim must either have landed before, or never land after, any
 * operation issued from then on. A store running in process gets this by finishing each operation
 * before it settles (memory, SQLite); one that sends everything over one connection in order gets it
 * from that order (Redis: ioredis's offline queue keeps it, and it resends unanswered commands first).
 * A store that may send the release another way (another connection of a pool, another request) must
 * undo a late claim itself, as `postgresStore` does when a claim's answer comes after it gave up, and
 * have the server drop what its caller gave up on. See docs/stores.md, "Your own store".
 */
export interface IdempotencyStore {
  /**
   * Insert-if-absent; when a live record exists, return it instead. Two callers can never both claim.
   * Once it has rejected, the claim never takes effect after a later operation (see above).
   */
  claim(request: ClaimRequest): Promise<ClaimResult>;
  /** Compare-and-swap the owner token of a stale or unknown record. Returns the new record, or null if it moved on. */
  takeover(request: TakeoverRequest): Promise<IdempotencyRecord | null>;
  /** Record the outcome; returns the settled record, or null if the token no longer owns it. */
  settle(request: SettleRequest): Promise<IdempotencyRecord | null>;
  /** Extend the lease; returns false if the token no longer owns an in-progress record. */
  renew(request: RenewRequest): Promise<boolean>;
  /** Delete the record if the token still owns it (in progress or unknown); returns whether it did. */
  release(request: ReleaseRequest): Promise<boolean>;
  /** The live record for (scope, key), or undefined. */
  get(id: RecordId, now: number): Promise<IdempotencyRecord | undefined>;
  /** Operator removal, whatever the record's state. Returns whether a record was there. */
  delete(id: RecordId): Promise<boolean>;
  list(query: ListQuery): Promise<ListPage>;
  /** Remove expired records; the cost is proportional to what expired. Returns how many went. */
  purge(request: PurgeRequest): Promise<{ readonly deleted: number }>;
  close?(): Promise<void>;
  /**
   * The largest result this store can keep in a record, in UTF-8 bytes as stored (after sealing, with
   * `encryption`); absent when only `maxResultBytes` bounds it. A larger result is recorded as completed
   * without it (`result_too_large`), as one over `maxResultBytes` is: the effect is never left unrecorded.
   */
  readonly maxStoredResultBytes?: number;
}
