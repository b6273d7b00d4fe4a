/**
 * The store conformance suite: the executable form of the store contract in `core/store.ts`.
 *
 * Every store — memory, SQLite, PostgreSQL, Redis, or one of your own — must pass every case.
 * The suite is runner-agnostic: each case is a name and an async function that throws (via
 * `node:assert/strict`) when the store breaks the contract, so vitest, jest and `node:test` all run it.
 *
 * What the cases pin down (all times epoch ms; a record is *expired* when `expiresAt <= now`):
 * - **claim** is an atomic insert-if-absent. An expired record counts as absent and is replaced. A new
 *   record is `in_progress` with the request's token, `createdAt = updatedAt = now`,
 *   `leaseExpiresAt = now + leaseMs`, `expiresAt = leaseExpiresAt + ttlMs`, `attempts = 1`,
 *   `result = error = null`. When a live record exists the claim returns it unchanged with `claimed: false`,
 *   whatever its state: claim never takes over a stale lease (that is takeover's job). `now` in the result
 *   is the clock the store judged by.
 * - **takeover** is a compare-and-swap: it succeeds only on a live record that still carries `fromToken` and
 *   is `unknown`, or `in_progress` with `leaseExpiresAt <= now`. The record gets the new token, status
 *   `in_progress`, `leaseExpiresAt = now + leaseMs`, `expiresAt = max(expiresAt, leaseExpiresAt + ttlMs)`,
 *   `attempts + 1`, `updatedAt = now` and `result = null`; `createdAt`, `tool`, `fingerprint` and `error`
 *   (why the previous attempt ended) are kept. Completed and failed records are never taken over.
 * - **settle** applies only while the record carries the token and is `in_progress` or `unknown` — even
 *   after the lease passed, as long as nobody took over, and even after the window passed, as long as the
 *   store still holds the record (nobody claimed the key since, no purge ran): a call paused through its
 *   whole window records its outcome, and a repeat replays it. It sets status, result and error,
 *   `updatedAt = now`, `leaseExpiresAt = now`, `expiresAt = now + ttlMs`. Completed and failed are final.
 *   A record past its window still counts as absent: a claim replaces it and fences the late settle out.
 * - **renew** applies only to an `in_progress` record carrying the token (past the window too, like settle):
 *   `leaseExpiresAt = now + leaseMs`, `expiresAt = max(expiresAt, leaseExpiresAt + ttlMs)`, `updatedAt = now`.
 *   So a record never expires earlier than `ttlMs` after its last sign of life, and an outcome nobody knows
 *   (a lease that passed without a settle) stays unknown for a whole window.
 * - A claim resent with the same token (a reply lost, the command sent again) finds its own record and
 *   returns it as the holder; it never makes a second record or attempt.
 * - **release** deletes the record only while it carries the token and is `in_progress` or `unknown`.
 * - A result as large as the store declares it keeps (`maxStoredResultBytes`; without one, a result at the
 *   default `maxResultBytes` of 1 MiB, sealed) is kept byte-exact, beside the longest scope, key and tool;
 *   so is a failed record's error text of that size.
 * - With `claimsMayArriveLate`, a claim whose token was released on the key never lands afterwards,
 *   whatever the key held when the release came, nor after the record was purged or deleted; other tokens
 *   still claim the key, and releases by many tokens at once each get their answer.
 * - **get** returns the live record or undefined; **delete** removes a record in any state.
 * - **list** combines its filters with AND (`createdAfter` inclusive, `createdBefore` exclusive, `keyPrefix`
 *   literal and case-sensitive), returns at most `limit` records (default 100; a limit that is not an
 *   integer from 1 to 1000 is rejected), and its cursor pages cover every matching record exactly once.
 *   Whether list shows expired records not yet purged is up to the store: the suite does not pin it.
 * - **purge** removes expired records only, at most `limit` per call, and reports how many.
 * - Scopes are isolated, and (scope, key) pairs never run together: ("ab", "c") and ("a", "bc") differ.
 *   Scopes and keys are kept as sent and compared unit for unit: case, NFC against NFD, and the last of 255
 *   three-byte characters each make a different record. A NUL inside one does too, or the store refuses
 *   the call as `invalid_arguments` (PostgreSQL text cannot hold it); it never stands for another key.
 * - Returned records are copies (or frozen): mutating one never changes what the store holds.
 *
 * Each case creates a fresh harness, so the store must start empty, and always calls `cleanup`. Time moves
 * only through the harness's fake clock; a store with a clock of its own (a database server) must be built
 * so that its clock follows the fake one. No case sleeps.
 *
 * @example
 * // vitest or jest
 * import { describe, it } from "vitest";
 * import { fakeClock, storeConformanceCases } from "idempotool/testing";
 *
 * describe("my store", () => {
 *   for (const c of storeConformanceCases({ name: "my store", create: () => ({ store: myStore(), clock: fakeClock() }) })) {
 *     it(c.name, c.run);
 *   }
 * });
 *
 * @example
 * // node:test
 * import { test } from "node:test";
 * import { fakeClock, storeConformanceCases } from "idempotool/testing";
 *
 * for (const c of storeConformanceCases({ name: "my store", create: () => ({ store: myStore(), clock: fakeClock() }) })) {
 *   test(c.name, c.run);
 * }
 *
 * @module
 */
import assert from "node:assert/strict";
import { isIdempotencyError } from "../core/errors.js";
import { decodeCompletedNote } from "../core/serialize.js";
import type {
  ClaimRequest,
  IdempotencyRecord,
  IdempotencyStore,
  ListQuery,
  RecordId,
  RenewRequest,
  SettleRequest,
  TakeoverRequest,
} from "../core/store.js";
import { reviewCounts } from "../review/counts.js";
import { reviewQueue } from "../review/queue.js";
import { type ResolveOptions, resolveRecord } from "../review/resolve.js";
import { readTrail } from "../review/trail.js";
import type { FakeClock } from "./fake-clock.js";

/** A fresh, empty store for one case, and the clock that moves it. */
export interface ConformanceHarness {
  store: IdempotencyStore;
  /** The only source of time: requests carry `clock.now()`, and a store with its own clock must follow it. */
  clock: FakeClock;
  /** Runs after every case, passed or failed: close the store, drop its tables. */
  cleanup?: () => Promise<void>;
}

export interface ConformanceOptions {
  /** The store's name; failure messages start with it. */
  name: string;
  /** Called once per case; every call must return an empty store. */
  create: () => Promise<ConformanceHarness> | ConformanceHarness;
  /** How many callers race in the concurrency cases (default 50, at least 2). */
  concurrency?: number | undefined;
  /**
   * Set for a store whose requests may reach its server out of order: an HTTP API whose client resends
   * on a timeout (DynamoDB), calls to a remote object (a Durable Object), a pool of connections. A claim
   * the caller gave up on may then arrive after the release the caller sent next, and the suite checks
   * that such a claim never lands, whatever the key held when the release came.
   */
  claimsMayArriveLate?: boolean | undefined;
}

/** One spec sentence and the check behind it. `run` rejects when the store breaks the contract. */
export interface ConformanceCase {
  name: string;
  run: () => Promise<void>;
}

/**
 * The conformance cases for a store, ready to hand to any test runner.
 * @example
 * import { it } from "vitest";
 * import { memoryStore } from "idempotool";
 * import { fakeClock, storeConformanceCases } from "idempotool/testing";
 *
 * for (const c of storeConformanceCases({ name: "memory", create: () => ({ store: memoryStore(), clock: fakeClock() }) })) {
 *   it(c.name, c.run);
 * }
 */
export function storeConformanceCases(options: ConformanceOptions): ConformanceCase[] {
  const concurrency = options.concurrency ?? 50;
  if (!Number.isInteger(concurrency) || concurrency < 2) {
    throw new TypeError(`concurrency must be an integer of at least 2, got ${String(options.concurrency)}`);
  }
  const cases = [
    ...specs,
    ...resolutionSpecs,
    ...(options.claimsMayArriveLate === true ? lateClaimSpecs : []),
  ];
  return cases.map(([name, body]) => ({
    name,
    run: async () => {
      const harness = await options.create();
      try {
        await body({ store: harness.store, clock: harness.clock, concurrency });
      } catch (error) {
        if (error instanceof Error) error.message = `[${options.name}] ${error.message}`;
        throw error;
      } finally {
        await harness.cleanup?.();
      }
    },
  }));
}

interface Tools {
  readonly store: IdempotencyStore;
  readonly clock: FakeClock;
  readonly concurrency: number;
}

type Spec = readonly [name: string, body: (t: Tools) => Promise<void>];

const LEASE_MS = 60_000;
const TTL_MS = 86_400_000;
const SCOPE = "tenant-a";
const OTHER_SCOPE = "tenant-b";
const KEY = "order-1";
const TOOL = "send_email";
const FINGERPRINT = "a".repeat(64);
const OTHER_FINGERPRINT = "b".repeat(64);

function claimRequest(t: Tools, overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return {
    scope: SCOPE,
    key: KEY,
    tool: TOOL,
    fingerprint: FINGERPRINT,
    token: "token-a",
    leaseMs: LEASE_MS,
    ttlMs: TTL_MS,
    now: t.clock.now(),
    ...overrides,
  };
}

function settleRequest(t: Tools, token: string, overrides: Partial<SettleRequest> = {}): SettleRequest {
  return {
    scope: SCOPE,
    key: KEY,
    token,
    status: "completed",
    result: '{"sent":true}',
    error: null,
    ttlMs: TTL_MS,
    now: t.clock.now(),
    ...overrides,
  };
}

function takeoverRequest(
  t: Tools,
  fromToken: string,
  token: string,
  overrides: Partial<TakeoverRequest> = {},
): TakeoverRequest {
  return {
    scope: SCOPE,
    key: KEY,
    fromToken,
    token,
    leaseMs: LEASE_MS,
    ttlMs: TTL_MS,
    now: t.clock.now(),
    ...overrides,
  };
}

function renewRequest(t: Tools, token: string, overrides: Partial<RenewRequest> = {}): RenewRequest {
  return {
    scope: SCOPE,
    key: KEY,
    token,
    leaseMs: LEASE_MS,
    ttlMs: TTL_MS,
    now: t.clock.now(),
    ...overrides,
  };
}

async function claimFree(t: Tools, overrides: Partial<ClaimRequest> = {}): Promise<IdempotencyRecord> {
  const request = claimRequest(t, overrides);
  const outcome = await t.store.claim(request);
  assert.equal(
    outcome.claimed,
    true,
    `claim of the free key (${request.scope}, ${request.key}) must succeed`,
  );
  return outcome.record;
}

/** Each id still holds the record its own token claimed, under the scope and key it was sent with. */
async function assertKeptApart(t: Tools, claimed: readonly (RecordId & { token: string })[]): Promise<void> {
  for (const { scope, key, token } of claimed) {
    const record = await current(t, scope, key);
    const shown = JSON.stringify([scope.slice(0, 12), key.slice(0, 12)]);
    assert.equal(record?.token, token, `${shown} was mixed up with another key`);
    assert.equal(record?.scope, scope, `${shown}: get returns the scope as it was sent`);
    assert.equal(record?.key, key, `${shown}: get returns the key as it was sent`);
  }
}

async function settled(t: Tools, token: string, overrides: Partial<SettleRequest> = {}) {
  const record = await t.store.settle(settleRequest(t, token, overrides));
  assert.ok(record, `settle by the owner token ${token} must apply`);
  return record;
}

function current(t: Tools, scope = SCOPE, key = KEY): Promise<IdempotencyRecord | undefined> {
  return t.store.get({ scope, key }, t.clock.now());
}

type RecordFields = { -readonly [K in keyof IdempotencyRecord]: IdempotencyRecord[K] };

/** The contract's fields as a plain object, so deep equality ignores extra properties and prototypes. */
function fields(record: IdempotencyRecord | null | undefined): RecordFields {
  assert.ok(record, "expected a record");
  const { scope, key, tool, fingerprint, status, token, createdAt, updatedAt } = record;
  const { leaseExpiresAt, expiresAt, attempts, result, error } = record;
  return {
    scope,
    key,
    tool,
    fingerprint,
    status,
    token,
    createdAt,
    updatedAt,
    leaseExpiresAt,
    expiresAt,
    attempts,
    result,
    error,
  };
}

function newRecord(request: ClaimRequest): RecordFields {
  const leaseExpiresAt = request.now + request.leaseMs;
  return {
    scope: request.scope,
    key: request.key,
    tool: request.tool,
    fingerprint: request.fingerprint,
    status: "in_progress",
    token: request.token,
    createdAt: request.now,
    updatedAt: request.now,
    leaseExpiresAt,
    expiresAt: leaseExpiresAt + request.ttlMs,
    attempts: 1,
    result: null,
    error: null,
  };
}

/** Compares strings without printing 100 KB on failure. */
function assertSameString(actual: string | null, expected: string | null, what: string): void {
  if (actual === expected) return;
  if (actual === null || expected === null) assert.fail(`${what}: expected ${expected}, got ${actual}`);
  let index = 0;
  while (index < actual.length && actual[index] === expected[index]) index++;
  assert.fail(
    `${what} changed in the store: lengths ${actual.length} vs ${expected.length}, first difference at ` +
      `index ${index}: ${JSON.stringify(actual.slice(index, index + 20))} vs ${JSON.stringify(expected.slice(index, index + 20))}`,
  );
}

/** Tries to change a returned record; a frozen record refuses silently (Reflect.set does not throw). */
function scribble(record: IdempotencyRecord | null | undefined): void {
  if (!record) return;
  const changes: readonly [string, unknown][] = [
    ["status", "completed"],
    ["token", "stolen"],
    ["result", "scribbled"],
    ["error", "scribbled"],
    ["expiresAt", 0],
    ["leaseExpiresAt", 0],
    ["attempts", 99],
  ];
  for (const [field, value] of changes) Reflect.set(record, field, value);
}

const idOf = (record: RecordId) => `${record.scope}/${record.key}`;

/** Every page of a query, checking page sizes and that no record is returned twice. */
async function listAll(t: Tools, query: ListQuery): Promise<IdempotencyRecord[]> {
  const records: IdempotencyRecord[] = [];
  const seen = new Set<string>();
  let cursor: string | undefined;
  for (let page = 0; ; page++) {
    assert.ok(page <= 2_000, "list kept returning a nextCursor");
    const result = await t.store.list(cursor === undefined ? query : { ...query, cursor });
    if (query.limit !== undefined) {
      assert.ok(result.records.length <= query.limit, `a page held ${result.records.length} > limit records`);
    }
    for (const record of result.records) {
      assert.ok(!seen.has(idOf(record)), `list returned ${idOf(record)} twice`);
      seen.add(idOf(record));
      records.push(record);
    }
    if (result.nextCursor === undefined) return records;
    cursor = result.nextCursor;
  }
}

async function listIds(t: Tools, query: ListQuery): Promise<string[]> {
  return (await listAll(t, query)).map(idOf).sort();
}

/**
 * The largest result a store that declares no `maxStoredResultBytes` must keep: one at the default
 * `maxResultBytes` (1 MiB) as `encryption` seals it (base64, a third larger, behind a short header).
 */
const undeclaredStoredResultBytes = Math.ceil((1024 * 1024) / 3) * 4 + 1024;

/**
 * A JSON text of exactly `bytes` UTF-8 bytes. Mostly one-byte characters: a store (or a stand-in for its
 * server) that counts characters rather than bytes must find it as large as one that counts bytes.
 */
function jsonOfBytes(bytes: number): string {
  const head = '{"body":"ü€😀'; // 9 + 2 + 3 + 4 bytes
  const tail = '"}';
  return `${head}${"x".repeat(bytes - 18 - tail.length)}${tail}`;
}

function sampleLargeString(): string {
  const parts: string[] = [];
  for (let i = 0; parts.length < 10_000; i++) parts.push(`${i}:ü€😀\u2028;`);
  return JSON.stringify({ body: parts.join("") });
}

/**
 * A settled record keeps a text as large as the store declares (a result when completed, a failure's text
 * when failed), beside the longest names: the core keeps both within `maxStoredResultBytes`.
 */
async function keepsAsLargeAsDeclared(t: Tools, status: "completed" | "failed"): Promise<void> {
  const declared = t.store.maxStoredResultBytes;
  if (declared !== undefined) {
    assert.ok(
      Number.isSafeInteger(declared) && declared > 0,
      `maxStoredResultBytes must be a whole number of bytes, got ${String(declared)}`,
    );
  }
  const bytes = declared ?? undeclaredStoredResultBytes;
  const large = jsonOfBytes(bytes);
  assert.equal(new TextEncoder().encode(large).length, bytes);
  // The longest scope and key a call accepts (255 characters) and tool name (200), in three-byte characters.
  const id = { scope: "€".repeat(255), key: "€".repeat(255) };
  const tool = "€".repeat(200);
  // The longest fingerprint the core writes: keyed, under a 64-character key id, with its key check value.
  const fingerprint = `hmac-sha256:${"k".repeat(64)}:0123456789abcdef:${"f".repeat(64)}`;
  // A tool that did not run released the key once before: a store may keep something of that.
  await claimFree(t, { ...id, tool, fingerprint, token: "token-released" });
  assert.equal(await t.store.release({ ...id, token: "token-released" }), true);
  await claimFree(t, { ...id, tool, fingerprint });
  const text = status === "completed" ? { result: large } : { result: null, error: large };
  const record = await settled(t, "token-a", { ...id, status, ...text });
  const replay = await t.store.claim(claimRequest(t, { ...id, tool, token: "token-b" }));
  assert.equal(replay.claimed, false);
  for (const [what, got] of [
    ["settle", record],
    ["get", await current(t, id.scope, id.key)],
    ["a claim's holder", replay.record],
  ] as const) {
    assert.equal(got?.status, status, `status from ${what}`);
    assert.equal(got?.tool, tool, `tool from ${what}`);
    assert.equal(got?.fingerprint, fingerprint, `fingerprint from ${what}`);
    const kept = status === "completed" ? got?.result : got?.error;
    assertSameString(kept ?? null, large, `${status} text of ${bytes} bytes from ${what}`);
  }
}

const specs: readonly Spec[] = [
  [
    "claim inserts an in_progress record carrying the request, its lease and its expiry",
    async (t) => {
      const request = claimRequest(t);
      const outcome = await t.store.claim(request);
      assert.equal(outcome.claimed, true);
      assert.equal(outcome.now, request.now, "claim reports the clock it judged by");
      assert.deepEqual(fields(outcome.record), newRecord(request));
      assert.deepEqual(fields(await current(t)), newRecord(request));
    },
  ],
  [
    "an unsettled claim lives ttlMs beyond its lease: an outcome nobody knows stays for a whole window",
    async (t) => {
      const t0 = t.clock.now();
      const record = await claimFree(t, { ttlMs: 1_000, leaseMs: 5_000 });
      assert.equal(record.leaseExpiresAt, t0 + 5_000);
      assert.equal(record.expiresAt, t0 + 6_000);
      await t.clock.advance(5_999);
      const stale = await current(t);
      assert.ok(stale, "the record is live until ttlMs after its lease passed");
      assert.ok(stale.leaseExpiresAt <= t.clock.now(), "its lease has passed: a repeat must judge it stale");
      await t.clock.advance(1);
      assert.equal(await current(t), undefined, "a record with expiresAt <= now is absent");
    },
  ],
  [
    "every renewal keeps the record ttlMs beyond the renewed lease, however long the call runs",
    async (t) => {
      await claimFree(t, { ttlMs: 2_000, leaseMs: 1_000 });
      for (let i = 0; i < 10; i++) {
        await t.clock.advance(900);
        assert.equal(await t.store.renew(renewRequest(t, "token-a", { leaseMs: 1_000, ttlMs: 2_000 })), true);
      }
      const lastRenewal = t.clock.now();
      const renewed = await current(t);
      assert.equal(renewed?.leaseExpiresAt, lastRenewal + 1_000);
      assert.equal(renewed?.expiresAt, lastRenewal + 3_000);
      await t.clock.advance(2_999);
      assert.ok(await current(t), "a call that outlived its window by renewing still has its record");
      await t.clock.advance(1);
      assert.equal(await current(t), undefined);
    },
  ],
  [
    "a claim resent with the same token returns the record it made, unchanged, as the holder",
    async (t) => {
      const request = claimRequest(t);
      const first = await t.store.claim(request);
      assert.equal(first.claimed, true);
      await t.clock.advance(10);
      const resent = await t.store.claim({ ...request, now: t.clock.now() });
      assert.equal(resent.claimed, false, "a resent claim must not claim a second time");
      assert.deepEqual(fields(resent.record), newRecord(request));
      assert.deepEqual(fields(await current(t)), newRecord(request));
    },
  ],
  [
    "a second claim of a held key returns the holder unchanged and claims nothing",
    async (t) => {
      const holder = await claimFree(t);
      await t.clock.advance(1_000);
      const request = claimRequest(t, {
        token: "token-b",
        tool: "other_tool",
        fingerprint: OTHER_FINGERPRINT,
        leaseMs: 1,
        ttlMs: 1,
      });
      const second = await t.store.claim(request);
      assert.equal(second.claimed, false);
      assert.equal(second.now, request.now);
      assert.deepEqual(fields(second.record), fields(holder));
      assert.deepEqual(fields(await current(t)), fields(holder));
    },
  ],
  [
    "claim returns completed, failed and unknown holders without claiming",
    async (t) => {
      for (const status of ["completed", "failed", "unknown"] as const) {
        const key = `settled-${status}`;
        await claimFree(t, { key });
        const record = await settled(t, "token-a", {
          key,
          status,
          error: status === "completed" ? null : "boom",
        });
        const again = await t.store.claim(claimRequest(t, { key, token: "token-b" }));
        assert.equal(again.claimed, false, `a ${status} record must not be claimed again`);
        assert.deepEqual(fields(again.record), fields(record));
      }
    },
  ],
  [
    "claim never takes over a stale lease: it returns the stale holder for the caller to decide",
    async (t) => {
      const holder = await claimFree(t);
      await t.clock.advance(LEASE_MS * 2);
      const again = await t.store.claim(claimRequest(t, { token: "token-b" }));
      assert.equal(again.claimed, false, "a passed lease is takeover's business, not claim's");
      assert.deepEqual(fields(again.record), fields(holder));
      assert.deepEqual(fields(await current(t)), fields(holder));
    },
  ],
  [
    "concurrent claims of one key: exactly one wins and every other caller sees the winner's token",
    async (t) => {
      const outcomes = await Promise.all(
        Array.from({ length: t.concurrency }, (_, i) =>
          t.store.claim(claimRequest(t, { token: `token-${i}` })),
        ),
      );
      const winners = outcomes.filter((outcome) => outcome.claimed);
      assert.equal(
        winners.length,
        1,
        `${winners.length} of ${t.concurrency} concurrent claims won; exactly one may`,
      );
      const token = winners[0]!.record.token;
      for (const outcome of outcomes) assert.equal(outcome.record.token, token, "a loser saw another token");
      const stored = await current(t);
      assert.equal(stored?.token, token);
      assert.equal(stored?.attempts, 1);
    },
  ],
  [
    "concurrent claims of different keys all succeed",
    async (t) => {
      const keys = Array.from({ length: t.concurrency }, (_, i) => `key-${i}`);
      const outcomes = await Promise.all(
        keys.map((key, i) => t.store.claim(claimRequest(t, { key, token: `token-${i}` }))),
      );
      for (const [i, outcome] of outcomes.entries()) {
        assert.equal(outcome.claimed, true, `claim of key-${i} failed`);
        assert.equal((await current(t, SCOPE, `key-${i}`))?.token, `token-${i}`);
      }
    },
  ],
  [
    "scopes are isolated: the same key in two scopes is two records",
    async (t) => {
      await claimFree(t, { scope: SCOPE, token: "token-a" });
      const other = await claimFree(t, {
        scope: OTHER_SCOPE,
        token: "token-b",
        fingerprint: OTHER_FINGERPRINT,
      });
      assert.equal(await t.store.settle(settleRequest(t, "token-a", { scope: OTHER_SCOPE })), null);
      assert.equal(await t.store.release({ scope: OTHER_SCOPE, key: KEY, token: "token-a" }), false);
      const done = await settled(t, "token-a", { result: '"from a"' });
      assert.equal(done.scope, SCOPE);
      assert.deepEqual(fields(await current(t, OTHER_SCOPE)), fields(other));
      assert.equal(await t.store.delete({ scope: SCOPE, key: KEY }), true);
      assert.equal(await current(t, SCOPE), undefined);
      assert.deepEqual(fields(await current(t, OTHER_SCOPE)), fields(other));
    },
  ],
  [
    'scope and key never run together: ("ab", "c") and ("a", "bc") are different records',
    async (t) => {
      const pairs = [
        ["ab", "c"],
        ["a", "bc"],
        ["a:b", "c"],
        ["a", "b:c"],
        ["a|b", "c"],
        ["a", "b|c"],
        ["a\u001fb", "c"],
        ["a", "\u001fbc"],
        ['["a"', '"bc"]'],
        ["1:a", "bc"],
      ] as const;
      for (const [i, [scope, key]] of pairs.entries())
        await claimFree(t, { scope, key, token: `token-${i}` });
      for (const [i, [scope, key]] of pairs.entries()) {
        const record = await current(t, scope, key);
        assert.equal(
          record?.token,
          `token-${i}`,
          `(${JSON.stringify(scope)}, ${JSON.stringify(key)}) was mixed up`,
        );
        assert.equal(record?.scope, scope);
        assert.equal(record?.key, key);
      }
    },
  ],
  [
    "keys that differ by case, by Unicode normalisation or in the last of 255 characters are different records",
    async (t) => {
      // The longest scope and key a call accepts, in three-byte characters.
      const long = "€".repeat(255);
      const ids = [
        { scope: SCOPE, key: "Order-1" },
        { scope: SCOPE, key: "order-1" },
        { scope: SCOPE, key: "caf\u00e9" },
        { scope: SCOPE, key: "cafe\u0301" },
        { scope: "Tenant-A", key: KEY },
        { scope: "caf\u00e9", key: KEY },
        { scope: "cafe\u0301", key: KEY },
        { scope: long, key: long },
        { scope: long, key: `${long.slice(1)}x` },
      ];
      const claimed = ids.map((id, i) => ({ ...id, token: `token-${i}` }));
      for (const id of claimed) {
        const record = await claimFree(t, id);
        assert.equal(record.scope, id.scope, "claim returns the scope as it was sent");
        assert.equal(record.key, id.key, "claim returns the key as it was sent");
      }
      await assertKeptApart(t, claimed);
    },
  ],
  [
    "a NUL inside a scope or key makes a different record, or the store refuses it as invalid_arguments",
    async (t) => {
      // Claimed first: a store that cut a key at its NUL would hand these out again.
      const claimed = [
        { scope: SCOPE, key: "k", token: "token-0" },
        { scope: "t", key: "k", token: "token-1" },
      ];
      for (const id of claimed) await claimFree(t, id);
      const withNul = [
        { scope: SCOPE, key: "k\u0000one" },
        { scope: SCOPE, key: "k\u0000two" },
        { scope: "t\u0000x", key: "k" },
        { scope: "t\u0000y", key: "k" },
      ];
      for (const [i, id] of withNul.entries()) {
        const request = claimRequest(t, { ...id, token: `token-nul-${i}` });
        const shown = JSON.stringify([id.scope, id.key]);
        const outcome = await t.store.claim(request).catch((error: unknown) => {
          assert.ok(
            isIdempotencyError(error, "invalid_arguments"),
            `${shown} is kept or refused as invalid_arguments, not: ${String(error)}`,
          );
          return undefined;
        });
        if (outcome === undefined) continue;
        assert.equal(outcome.claimed, true, `${shown} was taken for another key`);
        assert.equal(outcome.record.scope, id.scope, "claim returns the scope as it was sent");
        assert.equal(outcome.record.key, id.key, "claim returns the key as it was sent");
        claimed.push({ ...id, token: request.token });
      }
      await assertKeptApart(t, claimed);
    },
  ],
  [
    "an expired record counts as absent: get returns undefined and a claim replaces it",
    async (t) => {
      await claimFree(t);
      await settled(t, "token-a", { ttlMs: 10_000 });
      await t.clock.advance(9_999);
      assert.ok(await current(t), "the record is live until expiresAt");
      await t.clock.advance(1);
      assert.equal(await current(t), undefined, "a record with expiresAt <= now is absent");
      const request = claimRequest(t, {
        token: "token-b",
        fingerprint: OTHER_FINGERPRINT,
        tool: "other_tool",
      });
      const again = await t.store.claim(request);
      assert.equal(again.claimed, true, "an expired record must not block a claim");
      assert.deepEqual(fields(again.record), newRecord(request));
      assert.deepEqual(fields(await current(t)), newRecord(request));
    },
  ],
  [
    "settle with the owner token completes the record and keeps result and error strings byte-exact, in a get and in a lost claim's holder",
    async (t) => {
      const samples: readonly { result: string | null; error: string | null }[] = [
        {
          result: JSON.stringify({ text: 'héllo wörld — ☃ 中文 𝄞 👩‍👩‍👧 \u2028\u2029 \\ "quoted" \t' }),
          error: null,
        },
        { result: sampleLargeString(), error: null },
        { result: "", error: "" },
        {
          result: null,
          error: JSON.stringify({ name: "TypeError", message: "Converting circular structure — ‘é’" }),
        },
        { result: "  leading and trailing whitespace \n\t ", error: "  \n" },
        // Line breaks and brackets where a store's own encoding of a record could take them for its parts.
        { result: "\n[false,1]\n\n", error: "]\n[" },
        { result: "\n", error: null },
      ];
      const t0 = t.clock.now();
      for (let i = 0; i < samples.length; i++) await claimFree(t, { key: `sample-${i}` });
      await t.clock.advance(1_000);
      const t1 = t.clock.now();
      for (const [i, sample] of samples.entries()) {
        const key = `sample-${i}`;
        const record = await settled(t, "token-a", { key, ...sample });
        const stored = await current(t, SCOPE, key);
        const lost = await t.store.claim(claimRequest(t, { key, token: "token-b" }));
        assert.equal(lost.claimed, false, `a claim of settled sample ${i} must lose`);
        for (const got of [record, stored, lost.record]) {
          assertSameString(got?.result ?? null, sample.result, `result of sample ${i}`);
          assertSameString(got?.error ?? null, sample.error, `error of sample ${i}`);
          assert.deepEqual(fields(got), {
            ...newRecord(claimRequest(t, { key, now: t0 })),
            status: "completed",
            updatedAt: t1,
            leaseExpiresAt: t1,
            expiresAt: t1 + TTL_MS,
            ...sample,
          });
        }
      }
    },
  ],
  [
    "keeps a result as large as it declares (maxStoredResultBytes, else 1 MiB sealed) byte-exact, beside the longest names",
    (t) => keepsAsLargeAsDeclared(t, "completed"),
  ],
  [
    "keeps a failure as large as it declares (maxStoredResultBytes, else 1 MiB sealed) byte-exact, beside the longest names",
    (t) => keepsAsLargeAsDeclared(t, "failed"),
  ],
  [
    "a settled record absorbs repeats until ttlMs after it was settled",
    async (t) => {
      const t0 = t.clock.now();
      await claimFree(t);
      await t.clock.advance(5_000);
      const record = await settled(t, "token-a", { ttlMs: 10_000 });
      assert.equal(record.expiresAt, t0 + 15_000);
      await t.clock.advance(9_999);
      assert.equal((await current(t))?.status, "completed");
      await t.clock.advance(1);
      assert.equal(await current(t), undefined);
    },
  ],
  [
    "settle with a wrong token returns null and leaves the record unchanged",
    async (t) => {
      const holder = await claimFree(t);
      assert.equal(await t.store.settle(settleRequest(t, "token-b")), null);
      assert.equal(await t.store.settle(settleRequest(t, "token-b", { status: "failed", error: "x" })), null);
      assert.deepEqual(fields(await current(t)), fields(holder));
    },
  ],
  [
    "after a takeover the old token can no longer settle, renew or release (fencing)",
    async (t) => {
      await claimFree(t);
      await t.clock.advance(LEASE_MS + 1);
      const taken = await t.store.takeover(takeoverRequest(t, "token-a", "token-b"));
      assert.ok(taken, "takeover after the lease passed must succeed");
      assert.equal(
        await t.store.settle(settleRequest(t, "token-a")),
        null,
        "the late owner's settle must be rejected",
      );
      assert.equal(await t.store.renew(renewRequest(t, "token-a")), false);
      assert.equal(await t.store.release({ scope: SCOPE, key: KEY, token: "token-a" }), false);
      assert.deepEqual(fields(await current(t)), fields(taken));
      assert.equal((await settled(t, "token-b")).token, "token-b");
    },
  ],
  [
    "settle and renew by the owner succeed after the lease passed, as long as nobody took over",
    async (t) => {
      await claimFree(t);
      await t.clock.advance(LEASE_MS * 2);
      assert.equal(await t.store.renew(renewRequest(t, "token-a")), true);
      await t.clock.advance(LEASE_MS * 2);
      const record = await settled(t, "token-a");
      assert.equal(record.status, "completed");
      assert.equal(record.expiresAt, t.clock.now() + TTL_MS);
    },
  ],
  [
    "settle and renew by the owner succeed after the window passed, while the store still holds the record",
    async (t) => {
      // Windows of a minute: a store that also expires keys by real time (Redis) still holds them here.
      const window = { leaseMs: 60_000, ttlMs: 60_000 };
      await claimFree(t, window);
      await claimFree(t, { ...window, key: "renewed" });
      await t.clock.advance(120_001);
      assert.equal(await t.store.renew(renewRequest(t, "token-a", { ...window, key: "renewed" })), true);
      const record = await t.store.settle(settleRequest(t, "token-a"));
      assert.ok(record, "the effect happened and nobody claimed the key since: the settle must apply");
      assert.equal(record.status, "completed");
      assert.equal(record.expiresAt, t.clock.now() + TTL_MS);
      assert.equal((await current(t))?.status, "completed");
      assert.equal((await current(t, SCOPE, "renewed"))?.leaseExpiresAt, t.clock.now() + 60_000);
    },
  ],
  [
    "after the window, a claim by another caller fences the old owner out: its settle and renew are refused",
    async (t) => {
      await claimFree(t, { leaseMs: 1_000, ttlMs: 1_000 });
      await t.clock.advance(2_000);
      const fresh = await claimFree(t, { token: "token-b" });
      assert.equal(await t.store.settle(settleRequest(t, "token-a")), null);
      assert.equal(await t.store.renew(renewRequest(t, "token-a")), false);
      assert.deepEqual(fields(await current(t)), fields(fresh));
    },
  ],
  [
    "a call frozen past its window without renewing still records its outcome, and a repeat then replays it",
    async (t) => {
      // A worker paused (a long GC, SIGSTOP) through its lease and its whole window: no renewal, no settle,
      // nobody claiming the key meanwhile. A store that purges keeps the record until a purge runs.
      const window = { leaseMs: 1_000, ttlMs: 1_000 };
      await claimFree(t, window);
      await claimFree(t, { ...window, key: "unknown" });
      await settled(t, "token-a", {
        ...window,
        key: "unknown",
        status: "unknown",
        result: null,
        error: "timeout",
      });
      await t.clock.advance(3_600_000);
      const late = await t.store.settle(settleRequest(t, "token-a"));
      assert.ok(late, "the effect happened and nobody claimed the key since: the late settle must land");
      assert.equal(late.status, "completed");
      assert.equal(late.expiresAt, t.clock.now() + TTL_MS);
      const repeat = await t.store.claim(claimRequest(t, { token: "token-b" }));
      assert.equal(
        repeat.claimed,
        false,
        "a repeat after the late settle replays it: the tool must not run again",
      );
      assert.deepEqual(fields(repeat.record), fields(late));
      const resolved = await t.store.settle(settleRequest(t, "token-a", { key: "unknown" }));
      assert.equal(
        resolved?.status,
        "completed",
        "an unknown outcome past its window is still its owner's to settle",
      );
    },
  ],
  [
    "a record in progress or unknown past its window never blocks a claim, which fences its owner's late settle out",
    async (t) => {
      const window = { leaseMs: 1_000, ttlMs: 1_000 };
      const keys = ["in-progress", "unknown", "in-progress-read", "unknown-read"];
      for (const key of keys) {
        await claimFree(t, { ...window, key });
        if (key.startsWith("unknown")) {
          await settled(t, "token-a", { ...window, key, status: "unknown", result: null, error: "timeout" });
        }
      }
      await t.clock.advance(3_600_000);
      for (const key of ["in-progress-read", "unknown-read"]) {
        assert.equal(await current(t, SCOPE, key), undefined, `${key}: a record past its window is absent`);
      }
      for (const key of ["in-progress", "unknown"]) {
        const fresh = await claimFree(t, { key, token: "token-b" });
        assert.equal(await t.store.settle(settleRequest(t, "token-a", { key })), null, `${key}: fenced out`);
        assert.equal(await t.store.renew(renewRequest(t, "token-a", { key })), false, `${key}: fenced out`);
        assert.equal(
          await t.store.release({ scope: SCOPE, key, token: "token-a" }),
          false,
          `${key}: fenced out`,
        );
        assert.deepEqual(
          fields(await current(t, SCOPE, key)),
          fields(fresh),
          `${key}: the new claim's record`,
        );
      }
    },
  ],
  [
    "settle records failed and unknown outcomes; completed and failed are final, unknown can be settled again",
    async (t) => {
      await claimFree(t, { key: "failed" });
      const failed = await settled(t, "token-a", {
        key: "failed",
        status: "failed",
        result: null,
        error: "declined",
      });
      assert.equal(failed.status, "failed");
      assert.equal(failed.error, "declined");
      assert.equal(await t.store.settle(settleRequest(t, "token-a", { key: "failed" })), null);
      assert.deepEqual(fields(await current(t, SCOPE, "failed")), fields(failed));

      await claimFree(t, { key: "unknown" });
      const unknown = await settled(t, "token-a", {
        key: "unknown",
        status: "unknown",
        result: null,
        error: "timeout",
      });
      assert.equal(unknown.status, "unknown");
      await t.clock.advance(1_000);
      const resolved = await settled(t, "token-a", { key: "unknown", result: '"verified"', error: null });
      assert.equal(resolved.status, "completed");
      assert.equal(resolved.result, '"verified"');
      assert.equal(resolved.updatedAt, t.clock.now());

      assert.equal(
        await t.store.settle(settleRequest(t, "token-a", { key: "unknown", status: "failed" })),
        null,
      );
      assert.deepEqual(fields(await current(t, SCOPE, "unknown")), fields(resolved));
    },
  ],
  [
    "renew extends the owner's lease and keeps the record alive at least as long",
    async (t) => {
      const t0 = t.clock.now();
      const holder = await claimFree(t, { ttlMs: 10_000, leaseMs: 5_000 });
      await t.clock.advance(4_000);
      assert.equal(await t.store.renew(renewRequest(t, "token-a", { leaseMs: 20_000, ttlMs: 10_000 })), true);
      const renewed = await current(t);
      assert.deepEqual(fields(renewed), {
        ...fields(holder),
        updatedAt: t0 + 4_000,
        leaseExpiresAt: t0 + 24_000,
        expiresAt: t0 + 34_000,
      });
      await t.clock.advance(19_999);
      assert.equal(
        await t.store.takeover(takeoverRequest(t, "token-a", "token-b")),
        null,
        "the renewed lease holds",
      );
      assert.deepEqual(fields(await current(t)), fields(renewed));
    },
  ],
  [
    "renew with a wrong token returns false and leaves the record unchanged",
    async (t) => {
      const holder = await claimFree(t);
      await t.clock.advance(1_000);
      assert.equal(await t.store.renew(renewRequest(t, "token-b")), false);
      assert.deepEqual(fields(await current(t)), fields(holder));
    },
  ],
  [
    "renew of a completed, failed or unknown record returns false",
    async (t) => {
      for (const status of ["completed", "failed", "unknown"] as const) {
        const key = `renew-${status}`;
        await claimFree(t, { key });
        const record = await settled(t, "token-a", { key, status });
        assert.equal(
          await t.store.renew(renewRequest(t, "token-a", { key })),
          false,
          `renewed a ${status} record`,
        );
        assert.deepEqual(fields(await current(t, SCOPE, key)), fields(record));
      }
    },
  ],
  [
    "release deletes the record only for the owner token, and the key can be claimed again",
    async (t) => {
      const holder = await claimFree(t);
      assert.equal(await t.store.release({ scope: SCOPE, key: KEY, token: "token-b" }), false);
      assert.deepEqual(fields(await current(t)), fields(holder));
      assert.equal(await t.store.release({ scope: SCOPE, key: KEY, token: "token-a" }), true);
      assert.equal(await current(t), undefined);
      // A new token: a store may refuse a claim by a token released on the key (see claimsMayArriveLate).
      await claimFree(t, { token: "token-c" });

      await claimFree(t, { key: "unknown" });
      await settled(t, "token-a", { key: "unknown", status: "unknown", error: "timeout" });
      assert.equal(await t.store.release({ scope: SCOPE, key: "unknown", token: "token-a" }), true);
      assert.equal(await current(t, SCOPE, "unknown"), undefined);
    },
  ],
  [
    "release of a completed or failed record returns false and keeps it",
    async (t) => {
      for (const status of ["completed", "failed"] as const) {
        const key = `release-${status}`;
        await claimFree(t, { key });
        const record = await settled(t, "token-a", { key, status });
        assert.equal(await t.store.release({ scope: SCOPE, key, token: "token-a" }), false);
        assert.deepEqual(fields(await current(t, SCOPE, key)), fields(record));
      }
    },
  ],
  [
    "takeover of a live lease returns null and leaves the record unchanged",
    async (t) => {
      const holder = await claimFree(t);
      await t.clock.advance(LEASE_MS - 1);
      assert.equal(await t.store.takeover(takeoverRequest(t, "token-a", "token-b")), null);
      assert.deepEqual(fields(await current(t)), fields(holder));
    },
  ],
  [
    "takeover after the lease passed gives a new token and lease, counts the attempt and keeps createdAt",
    async (t) => {
      const t0 = t.clock.now();
      const holder = await claimFree(t);
      await t.clock.advance(LEASE_MS);
      assert.equal(
        await t.store.takeover(takeoverRequest(t, "token-x", "token-b")),
        null,
        "fromToken must match",
      );
      const taken = await t.store.takeover(takeoverRequest(t, "token-a", "token-b", { leaseMs: 30_000 }));
      const expected = {
        ...fields(holder),
        token: "token-b",
        updatedAt: t0 + LEASE_MS,
        leaseExpiresAt: t0 + LEASE_MS + 30_000,
        expiresAt: t0 + LEASE_MS + 30_000 + TTL_MS,
        attempts: 2,
      };
      assert.deepEqual(fields(taken), expected);
      assert.deepEqual(fields(await current(t)), expected);

      await claimFree(t, { key: "short", ttlMs: 2_000, leaseMs: 1_000 });
      await t.clock.advance(1_000);
      const short = await t.store.takeover(
        takeoverRequest(t, "token-a", "token-b", { key: "short", leaseMs: 5_000, ttlMs: 2_000 }),
      );
      assert.equal(short?.expiresAt, t.clock.now() + 7_000, "the record lives ttlMs beyond the new lease");
    },
  ],
  [
    "concurrent takeovers from the same token: exactly one wins and the record carries its token",
    async (t) => {
      await claimFree(t);
      await t.clock.advance(LEASE_MS + 1);
      const results = await Promise.all(
        Array.from({ length: t.concurrency }, (_, i) =>
          t.store.takeover(takeoverRequest(t, "token-a", `token-${i}`)),
        ),
      );
      const winners = results.filter((record) => record !== null);
      assert.equal(winners.length, 1, `${winners.length} of ${t.concurrency} concurrent takeovers won`);
      const stored = await current(t);
      assert.equal(stored?.token, winners[0]!.token);
      assert.equal(stored?.attempts, 2);
    },
  ],
  [
    "takeover of an unknown record succeeds at once, clears its result and keeps its error",
    async (t) => {
      const holder = await claimFree(t);
      await t.clock.advance(1_000);
      const t1 = t.clock.now();
      await settled(t, "token-a", { status: "unknown", result: '"partial"', error: "timeout" });
      const taken = await t.store.takeover(takeoverRequest(t, "token-a", "token-b"));
      assert.deepEqual(fields(taken), {
        ...fields(holder),
        token: "token-b",
        status: "in_progress",
        updatedAt: t1,
        leaseExpiresAt: t1 + LEASE_MS,
        expiresAt: t1 + LEASE_MS + TTL_MS,
        attempts: 2,
        result: null,
        error: "timeout",
      });
    },
  ],
  [
    "takeover of a completed or failed record returns null: a settled outcome is never run again",
    async (t) => {
      for (const status of ["completed", "failed"] as const) {
        const key = `takeover-${status}`;
        await claimFree(t, { key });
        const record = await settled(t, "token-a", { key, status });
        await t.clock.advance(LEASE_MS + 1);
        assert.equal(await t.store.takeover(takeoverRequest(t, "token-a", "token-b", { key })), null);
        assert.deepEqual(fields(await current(t, SCOPE, key)), fields(record));
      }
    },
  ],
  [
    "takeover of an expired record returns null",
    async (t) => {
      await claimFree(t, { ttlMs: 1_000, leaseMs: 1_000 });
      await t.clock.advance(2_000);
      assert.equal(await t.store.takeover(takeoverRequest(t, "token-a", "token-b")), null);
      assert.equal(await current(t), undefined);
    },
  ],
  [
    "records are copies: mutating a returned record does not change the store",
    async (t) => {
      const claimed = await t.store.claim(claimRequest(t));
      const original = fields(claimed.record);
      scribble(claimed.record);
      scribble(await current(t));
      scribble((await t.store.claim(claimRequest(t, { token: "token-b" }))).record);
      for (const record of (await t.store.list({})).records) scribble(record);
      assert.deepEqual(fields(await current(t)), original);

      await t.clock.advance(LEASE_MS);
      const taken = await t.store.takeover(takeoverRequest(t, "token-a", "token-c"));
      const afterTakeover = fields(taken);
      scribble(taken);
      assert.deepEqual(fields(await current(t)), afterTakeover);

      const done = await settled(t, "token-c");
      const afterSettle = fields(done);
      scribble(done);
      assert.deepEqual(fields(await current(t)), afterSettle);
    },
  ],
  [
    "delete removes a record in any state and reports whether one was there",
    async (t) => {
      await claimFree(t);
      assert.equal(await t.store.delete({ scope: SCOPE, key: KEY }), true);
      assert.equal(await current(t), undefined);
      assert.equal(await t.store.delete({ scope: SCOPE, key: KEY }), false);
      await claimFree(t, { token: "token-b" });
      await settled(t, "token-b");
      assert.equal(await t.store.delete({ scope: SCOPE, key: KEY }), true);
      assert.equal(await current(t), undefined);
      assert.equal(await t.store.delete({ scope: OTHER_SCOPE, key: "never-claimed" }), false);
    },
  ],
  [
    "list filters by scope, tool, status and literal, case-sensitive key prefix, combined with AND",
    async (t) => {
      const seeds = [
        [SCOPE, "order-1", "send_email", "in_progress"],
        [SCOPE, "order-2", "send_email", "completed"],
        [SCOPE, "order-3", "charge_card", "failed"],
        [SCOPE, "refund-1", "charge_card", "unknown"],
        [OTHER_SCOPE, "order-1", "send_email", "completed"],
        [OTHER_SCOPE, "a_b", "charge_card", "in_progress"],
        [OTHER_SCOPE, "axb", "charge_card", "in_progress"],
        [OTHER_SCOPE, "a%c", "send_email", "in_progress"],
        [OTHER_SCOPE, "a\\d", "send_email", "in_progress"],
      ] as const;
      for (const [scope, key, tool, status] of seeds) {
        await claimFree(t, { scope, key, tool });
        if (status !== "in_progress") await settled(t, "token-a", { scope, key, status });
      }
      const a = (key: string) => `${SCOPE}/${key}`;
      const b = (key: string) => `${OTHER_SCOPE}/${key}`;
      const cases: readonly [ListQuery, string[]][] = [
        [{}, seeds.map(([scope, key]) => `${scope}/${key}`)],
        [{ scope: SCOPE }, [a("order-1"), a("order-2"), a("order-3"), a("refund-1")]],
        [{ tool: "charge_card" }, [a("order-3"), a("refund-1"), b("a_b"), b("axb")]],
        [{ status: "completed" }, [a("order-2"), b("order-1")]],
        [{ status: "unknown" }, [a("refund-1")]],
        [{ keyPrefix: "order-" }, [a("order-1"), a("order-2"), a("order-3"), b("order-1")]],
        [{ keyPrefix: "ORDER-" }, []],
        [{ keyPrefix: "a_" }, [b("a_b")]],
        [{ keyPrefix: "a%" }, [b("a%c")]],
        [{ keyPrefix: "a\\" }, [b("a\\d")]],
        [{ scope: SCOPE, tool: "send_email", status: "completed" }, [a("order-2")]],
        [{ scope: OTHER_SCOPE, keyPrefix: "order-" }, [b("order-1")]],
        [{ scope: "tenant-c" }, []],
      ];
      for (const [query, expected] of cases) {
        assert.deepEqual(await listIds(t, query), [...expected].sort(), `list(${JSON.stringify(query)})`);
      }
    },
  ],
  [
    "list filters by creation time: createdAfter is inclusive and createdBefore exclusive",
    async (t) => {
      const t0 = t.clock.now();
      for (const key of ["k0", "k1", "k2"]) {
        await claimFree(t, { key });
        await t.clock.advance(1_000);
      }
      const ids = (...keys: string[]) => keys.map((key) => `${SCOPE}/${key}`);
      assert.deepEqual(await listIds(t, { createdAfter: t0 + 1_000 }), ids("k1", "k2"));
      assert.deepEqual(await listIds(t, { createdBefore: t0 + 1_000 }), ids("k0"));
      assert.deepEqual(await listIds(t, { createdAfter: t0 + 1_000, createdBefore: t0 + 2_000 }), ids("k1"));
      assert.deepEqual(await listIds(t, { createdAfter: t0 + 1, createdBefore: t0 + 1_000 }), []);
    },
  ],
  [
    "list pages cover every record exactly once, at most limit per page",
    async (t) => {
      const expected: string[] = [];
      for (let i = 0; i < 10; i++) {
        const scope = i % 3 === 0 ? OTHER_SCOPE : SCOPE;
        await claimFree(t, { scope, key: `page-${i}` });
        expected.push(`${scope}/page-${i}`);
      }
      const records = await listAll(t, { limit: 3 });
      assert.deepEqual(records.map(idOf).sort(), expected.sort());
      for (const record of records)
        assert.deepEqual(fields(record), fields(await current(t, record.scope, record.key)));
      assert.deepEqual(
        await listIds(t, { scope: SCOPE, limit: 2 }),
        expected.filter((id) => id.startsWith(`${SCOPE}/`)).sort(),
      );
      const first = await t.store.list({ limit: 3 });
      assert.equal(first.records.length, 3);
      assert.notEqual(first.nextCursor, undefined, "a full page with more to come must carry a cursor");
      const everything = await t.store.list({ limit: 1000 });
      assert.equal(everything.records.length, 10);
      assert.equal(everything.nextCursor, undefined, "the last page carries no cursor");
    },
  ],
  [
    "list pages skip nothing when scopes share keys",
    async (t) => {
      // Each key lives in three scopes, so a page can end inside one key's run of scopes, and a cursor that
      // compared keys alone would skip the same key in the scopes after it.
      const scopes = [OTHER_SCOPE, SCOPE, "tenant-c"];
      const expected: string[] = [];
      for (const key of ["k2", "k0", "k1"]) {
        for (const scope of scopes) {
          await claimFree(t, { scope, key });
          expected.push(`${scope}/${key}`);
        }
      }
      expected.sort();
      for (const limit of [1, 2, 4]) {
        assert.deepEqual(await listIds(t, { limit }), expected, `pages of ${limit}`);
      }
      assert.deepEqual(
        await listIds(t, { keyPrefix: "k1", limit: 1 }),
        scopes.map((scope) => `${scope}/k1`).sort(),
        "pages of one key across its scopes",
      );
    },
  ],
  [
    "list returns at most 100 records when no limit is given",
    async (t) => {
      for (let i = 0; i < 105; i++) await claimFree(t, { key: `bulk-${i}` });
      const page = await t.store.list({});
      assert.equal(page.records.length, 100);
      assert.notEqual(page.nextCursor, undefined);
      assert.equal((await listAll(t, {})).length, 105);
    },
  ],
  [
    "list rejects a limit that is not an integer from 1 to 1000",
    async (t) => {
      await claimFree(t);
      for (const limit of [0, -1, 1.5, 1_001, Number.NaN, Number.POSITIVE_INFINITY]) {
        await assert.rejects(() => t.store.list({ limit }), Error, `list accepted limit ${limit}`);
      }
      assert.equal((await t.store.list({ limit: 1_000 })).records.length, 1);
      assert.equal((await t.store.list({ limit: 1 })).records.length, 1);
    },
  ],
  [
    "purge removes only expired records and reports how many it removed",
    async (t) => {
      for (const key of ["short-1", "short-2", "long", "running"]) await claimFree(t, { key });
      await settled(t, "token-a", { key: "short-1", ttlMs: 1_000 });
      await settled(t, "token-a", { key: "short-2", status: "failed", ttlMs: 1_000 });
      await settled(t, "token-a", { key: "long" });
      assert.deepEqual(await t.store.purge({ now: t.clock.now() }), { deleted: 0 });
      await t.clock.advance(1_000);
      assert.deepEqual(await t.store.purge({ now: t.clock.now() }), { deleted: 2 });
      assert.deepEqual(await listIds(t, {}), [`${SCOPE}/long`, `${SCOPE}/running`]);
      assert.equal((await current(t, SCOPE, "long"))?.status, "completed");
      assert.equal((await current(t, SCOPE, "running"))?.status, "in_progress");
      assert.deepEqual(await t.store.purge({ now: t.clock.now() }), { deleted: 0 });
    },
  ],
  [
    "purge removes at most limit records per call",
    async (t) => {
      for (let i = 0; i < 5; i++) await claimFree(t, { key: `expiring-${i}`, ttlMs: 1_000, leaseMs: 1_000 });
      await claimFree(t, { key: "live" });
      await t.clock.advance(2_000);
      const deleted: number[] = [];
      for (let i = 0; i < 4; i++)
        deleted.push((await t.store.purge({ now: t.clock.now(), limit: 2 })).deleted);
      assert.deepEqual(deleted, [2, 2, 1, 0]);
      assert.deepEqual(await listIds(t, {}), [`${SCOPE}/live`]);
    },
  ],
  [
    "a purged key can be claimed again as a new record",
    async (t) => {
      await claimFree(t);
      await settled(t, "token-a", { ttlMs: 1_000 });
      await t.clock.advance(1_000);
      assert.deepEqual(await t.store.purge({ now: t.clock.now() }), { deleted: 1 });
      const request = claimRequest(t, { token: "token-b" });
      const again = await t.store.claim(request);
      assert.equal(again.claimed, true);
      assert.deepEqual(fields(again.record), newRecord(request));
    },
  ],
];

/** The claim by `token` did not land: it was refused (rejected or answered with another holder). */
async function claimNeverLands(t: Tools, key: string, token: string): Promise<void> {
  const outcome = await t.store.claim(claimRequest(t, { key, token })).catch(() => undefined);
  assert.notEqual(
    outcome?.claimed,
    true,
    `the claim by ${token}, released before it arrived, landed on ${key}`,
  );
  assert.notEqual(outcome?.record.token, token, `the claim by ${token} answered with its own record`);
  assert.notEqual((await current(t, SCOPE, key))?.token, token, `the key ${key} holds the released ${token}`);
}

/** Cases for a store whose requests may reach it out of order (`claimsMayArriveLate`). */
const lateClaimSpecs: readonly Spec[] = [
  [
    "a claim arriving after its release never lands, whatever the key held when the release came",
    async (t) => {
      const late = "token-late";
      // The release comes first, on keys holding: nothing; another caller's expired record; another
      // caller's tombstone (a released claim); another caller's live claim; another's completed record.
      await claimFree(t, { key: "expired", token: "token-old", leaseMs: 1_000, ttlMs: 1_000 });
      await claimFree(t, { key: "released", token: "token-b" });
      assert.equal(await t.store.release({ scope: SCOPE, key: "released", token: "token-b" }), true);
      await claimFree(t, { key: "live", token: "token-b" });
      await claimFree(t, { key: "completed", token: "token-b" });
      await settled(t, "token-b", { key: "completed", ttlMs: 1_000 });
      await t.clock.advance(2_000);
      const keys = ["nothing", "expired", "released", "live", "completed"];
      for (const key of keys) {
        assert.equal(await t.store.release({ scope: SCOPE, key, token: late }), false, `release on ${key}`);
      }
      assert.equal(
        (await current(t, SCOPE, "live"))?.token,
        "token-b",
        "a release by another token changed the holder",
      );
      // Then the late claim arrives, while the live claim is still live and after everything expired.
      for (const key of keys) await claimNeverLands(t, key, late);
      await t.clock.advance(LEASE_MS + TTL_MS);
      for (const key of keys) await claimNeverLands(t, key, late);
      // The keys are not blocked: a new claim takes each, and the late claim still stays out after it.
      for (const key of keys) await claimFree(t, { key, token: "token-new" });
      for (const key of keys) await claimNeverLands(t, key, late);
    },
  ],
  [
    "a released claim stays out after the key was claimed again and that record expired and was purged",
    async (t) => {
      const late = "token-late";
      await claimFree(t, { token: "token-old", leaseMs: 1_000, ttlMs: 1_000 });
      await t.clock.advance(2_000);
      assert.equal(await t.store.release({ scope: SCOPE, key: KEY, token: late }), false);
      await claimFree(t, { token: "token-c", leaseMs: 1_000, ttlMs: 1_000 });
      await t.clock.advance(2_000);
      await claimNeverLands(t, KEY, late);
      await t.store.purge({ now: t.clock.now() });
      await claimNeverLands(t, KEY, late);
      await claimFree(t, { token: "token-d" });
    },
  ],
  [
    "purge removes an expired record, and delete a live one, whose key keeps a released token; the late claim stays out",
    async (t) => {
      const late = "token-late";
      await claimFree(t, { leaseMs: 1_000, ttlMs: 1_000 });
      // A claim by token-late was given up on and released while token-a held the key.
      assert.equal(await t.store.release({ scope: SCOPE, key: KEY, token: late }), false);
      await t.clock.advance(10_000);
      assert.deepEqual(
        await t.store.purge({ now: t.clock.now() }),
        { deleted: 1 },
        "purge removes an expired record, whatever its key remembers",
      );
      assert.deepEqual(await listIds(t, {}), []);
      await claimNeverLands(t, KEY, late);
      await claimFree(t, { token: "token-b" });

      await claimFree(t, { key: "deleted", token: "token-c" });
      assert.equal(await t.store.release({ scope: SCOPE, key: "deleted", token: late }), false);
      assert.equal(await t.store.delete({ scope: SCOPE, key: "deleted" }), true);
      assert.equal(await current(t, SCOPE, "deleted"), undefined);
      await claimNeverLands(t, "deleted", late);
      await claimFree(t, { key: "deleted", token: "token-d" });
    },
  ],
  [
    "every claim released on a key stays out, past 128 releases within a day (none is forgotten to make room)",
    async (t) => {
      const tokens = Array.from({ length: 150 }, (_, i) => `${i.toString(16).padStart(32, "0")}`);
      for (const token of tokens) {
        // A claim that landed with its reply lost, as far as its caller knows, and the release it sends next.
        await claimFree(t, { token });
        assert.equal(await t.store.release({ scope: SCOPE, key: KEY, token }), true, `release ${token}`);
      }
      for (const token of [tokens[0]!, tokens[127]!, tokens[128]!, tokens.at(-1)!])
        await claimNeverLands(t, KEY, token);
      await claimFree(t, { token: "token-new" });
    },
  ],
  [
    "releases of many given-up claims on a held key, all at once, each answer false and leave the holder",
    async (t) => {
      const holder = await claimFree(t);
      const tokens = Array.from({ length: 30 }, (_, i) => `token-late-${i}`);
      const answers = await Promise.allSettled(
        tokens.map((token) => t.store.release({ scope: SCOPE, key: KEY, token })),
      );
      assert.deepEqual(
        answers.map((answer) => (answer.status === "fulfilled" ? answer.value : String(answer.reason))),
        tokens.map(() => false),
      );
      assert.deepEqual(fields(await current(t)), fields(holder));
      for (const token of [tokens[0]!, tokens.at(-1)!]) await claimNeverLands(t, KEY, token);
    },
  ],
  [
    "a settled record keeps replaying after a late release added its token",
    async (t) => {
      await claimFree(t, { token: "token-b" });
      assert.equal(await t.store.release({ scope: SCOPE, key: KEY, token: "token-late" }), false);
      const record = await settled(t, "token-b");
      const replay = await t.store.claim(claimRequest(t, { token: "token-c" }));
      assert.equal(replay.claimed, false);
      assert.deepEqual(fields(replay.record), fields(record));
      assert.deepEqual(await listIds(t, {}), [`${SCOPE}/${KEY}`]);
    },
  ],
];

/** The code of what `run` rejected with, or "resolved" when it did not. */
async function refusal(run: () => Promise<unknown>): Promise<string> {
  try {
    await run();
    return "resolved";
  } catch (error) {
    if (isIdempotencyError(error)) return error.code;
    throw error;
  }
}

function resolveOptions(t: Tools, overrides: Partial<ResolveOptions> = {}): ResolveOptions {
  return {
    store: t.store,
    scope: SCOPE,
    key: KEY,
    as: "completed",
    result: { sent: true, messageId: "m-1" },
    evidence: "the provider's log shows m-1 delivered",
    by: "ops@example.com",
    clock: t.clock,
    // How long a passed lease must age before a record is freed is the resolver's rule, not the store's.
    minStaleMs: 0,
    ...overrides,
  } as ResolveOptions;
}

/** A record whose owner stopped: claimed, then its lease passed. */
async function staleRecord(t: Tools, overrides: Partial<ClaimRequest> = {}): Promise<IdempotencyRecord> {
  const claimed = await claimFree(t, overrides);
  await t.clock.advance(LEASE_MS + 1);
  return claimed;
}

/** `store` with its release replaced: every other operation goes to `store` as it is. */
function withRelease(store: IdempotencyStore, release: IdempotencyStore["release"]): IdempotencyStore {
  return {
    claim: (request) => store.claim(request),
    takeover: (request) => store.takeover(request),
    settle: (request) => store.settle(request),
    renew: (request) => store.renew(request),
    release,
    get: (id, now) => store.get(id, now),
    delete: (id) => store.delete(id),
    list: (query) => store.list(query),
    purge: (request) => store.purge(request),
    ...(store.maxStoredResultBytes !== undefined ? { maxStoredResultBytes: store.maxStoredResultBytes } : {}),
  };
}

/**
 * Operators' resolutions (`idempotool/review`) work through the contract alone, so every store must hold
 * them: fenced by the version the operator saw, refused on a record that needs none, one winner among
 * operators racing, and a trail that outlives a freed key.
 */
const resolutionSpecs: readonly Spec[] = [
  [
    "a resolution as completed settles a stale record: later reads see the result and who resolved it",
    async (t) => {
      const stale = await staleRecord(t);
      const queue = await reviewQueue({ store: t.store, clock: t.clock });
      assert.deepEqual(
        queue.items.map((item) => [item.key, item.reason]),
        [[KEY, "lease_passed"]],
        "the stale record is the queue's one item",
      );
      const entry = await resolveRecord(resolveOptions(t, { expectVersion: queue.items[0]!.version }));
      assert.equal(entry.state, "applied");
      const record = await current(t);
      assert.equal(record?.status, "completed", "the record is completed");
      assert.notEqual(record?.token, stale.token, "the resolution took the record over from its owner");
      assert.deepEqual(JSON.parse(record?.result ?? "null"), { sent: true, messageId: "m-1" });
      assert.equal(decodeCompletedNote(record!.error).resolution?.by, "ops@example.com");
      assert.equal(
        await t.store.settle(settleRequest(t, stale.token)),
        null,
        "the old owner can no longer settle",
      );
      const trail = await readTrail({ store: t.store, scope: SCOPE, key: KEY });
      assert.deepEqual(
        trail.map((e) => [e.as, e.by, e.state, e.before.status]),
        [["completed", "ops@example.com", "applied", "in_progress"]],
      );
      assert.equal((await reviewQueue({ store: t.store, clock: t.clock })).total, 0, "the queue is empty");
    },
  ],
  [
    "a resolution as not executed frees the key, and its trail outlives the record",
    async (t) => {
      await claimFree(t);
      await settled(t, "token-a", {
        status: "unknown",
        result: null,
        error: '{"name":"Error","message":"timeout"}',
      });
      const queue = await reviewQueue({ store: t.store, clock: t.clock });
      assert.equal(queue.items[0]?.reason, "unknown");
      assert.equal(queue.items[0]?.failure?.message, "timeout", "the queue shows why the outcome is unknown");
      await resolveRecord(resolveOptions(t, { as: "not_executed", expectVersion: queue.items[0]!.version }));
      assert.equal(await current(t), undefined, "the key is free");
      await claimFree(t, { token: "token-b" });
      const trail = await readTrail({ store: t.store, scope: SCOPE, key: KEY });
      assert.deepEqual(
        trail.map((e) => [e.as, e.before.status, e.state]),
        [["not_executed", "unknown", "applied"]],
      );
    },
  ],
  [
    "a resolution is refused when the record changed since the operator saw it, and nothing changes",
    async (t) => {
      await staleRecord(t);
      const seen = (await reviewQueue({ store: t.store, clock: t.clock })).items[0]!.version;
      // The owner was only slow: it renews, then settles.
      assert.equal(await t.store.renew(renewRequest(t, "token-a")), true);
      assert.equal(
        await refusal(() => resolveRecord(resolveOptions(t, { expectVersion: seen }))),
        "record_changed",
      );
      await settled(t, "token-a", { result: '{"sent":"by the owner"}' });
      assert.equal(
        await refusal(() => resolveRecord(resolveOptions(t, { expectVersion: seen }))),
        "record_changed",
      );
      assert.equal((await current(t))?.result, '{"sent":"by the owner"}', "the owner's result stands");
      assert.deepEqual(await readTrail({ store: t.store, scope: SCOPE, key: KEY }), [], "no trail entry");
      assert.equal(
        await refusal(() => resolveRecord(resolveOptions(t, { key: "never-claimed" }))),
        "record_changed",
        "a key with no record",
      );
    },
  ],
  [
    "a record with a live lease or a recorded outcome is not an operator's to resolve",
    async (t) => {
      await claimFree(t);
      assert.equal(
        await refusal(() => resolveRecord(resolveOptions(t))),
        "record_not_resolvable",
        "live lease",
      );
      await settled(t, "token-a", {
        status: "failed",
        result: null,
        error: '{"name":"Error","message":"no"}',
      });
      assert.equal(
        await refusal(() => resolveRecord(resolveOptions(t, { as: "not_executed" }))),
        "record_not_resolvable",
        "failed",
      );
      assert.equal((await current(t))?.status, "failed", "the failure stands");
    },
  ],
  [
    "operators racing to resolve one record: exactly one resolution applies",
    async (t) => {
      await staleRecord(t);
      const seen = (await reviewQueue({ store: t.store, clock: t.clock })).items[0]!.version;
      const racers = Array.from({ length: Math.min(t.concurrency, 10) }, (_, i) =>
        refusal(() =>
          resolveRecord(
            resolveOptions(t, {
              expectVersion: seen,
              by: `operator-${i}`,
              ...(i % 2 === 0 ? { as: "not_executed" } : { result: { messageId: `m-${i}` } }),
            }),
          ),
        ),
      );
      const outcomes = await Promise.all(racers);
      assert.equal(
        outcomes.filter((o) => o === "resolved").length,
        1,
        `one winner, got ${outcomes.join(", ")}`,
      );
      assert.ok(
        outcomes.every((o) => o === "resolved" || o === "record_changed"),
        outcomes.join(", "),
      );
      const trail = await readTrail({ store: t.store, scope: SCOPE, key: KEY });
      assert.equal(trail.filter((e) => e.state === "applied").length, 1, "one applied entry in the trail");
    },
  ],
  [
    "the queue lists stale and unknown records oldest first, and neither live leases, settled records nor the trail",
    async (t) => {
      await claimFree(t, { key: "oldest" });
      await t.clock.advance(1_000);
      await claimFree(t, { key: "unknown", token: "token-u" });
      await settled(t, "token-u", { key: "unknown", status: "unknown", result: null, error: null });
      await claimFree(t, { key: "done", token: "token-d" });
      await settled(t, "token-d", { key: "done" });
      await t.clock.advance(LEASE_MS);
      await claimFree(t, { key: "stale", token: "token-s" });
      await claimFree(t, { key: "other-tool", token: "token-o", tool: "charge_card", scope: OTHER_SCOPE });
      await t.clock.advance(LEASE_MS);
      await resolveRecord(resolveOptions(t, { scope: OTHER_SCOPE, key: "other-tool", as: "not_executed" }));
      await claimFree(t, { key: "live", token: "token-l" });
      const queue = await reviewQueue({ store: t.store, clock: t.clock });
      assert.deepEqual(
        queue.items.map((item) => item.key),
        ["oldest", "unknown", "stale"],
        "oldest first; the live lease, the settled record, the freed key and the trail are not listed",
      );
      assert.deepEqual(queue.byTool, { [TOOL]: 3 });
      const filtered = await reviewQueue({ store: t.store, clock: t.clock, keyPrefix: "un", olderThanMs: 1 });
      assert.deepEqual(
        filtered.items.map((item) => item.key),
        ["unknown"],
      );
    },
  ],
  [
    "a record in progress is freed only once its lease has been passed for minStaleMs, and a refusal leaves no trail",
    async (t) => {
      await staleRecord(t);
      const wait = { as: "not_executed", minStaleMs: 5 * 60_000 } as const;
      assert.equal(await refusal(() => resolveRecord(resolveOptions(t, wait))), "record_not_resolvable");
      assert.equal((await current(t))?.token, "token-a", "the record is its worker's still");
      assert.deepEqual(
        await listIds(t, { scope: "idempotool:trail" }),
        [],
        "nothing of the refused resolution is left in the trail's scope",
      );
      await t.clock.advance(5 * 60_000);
      await resolveRecord(resolveOptions(t, wait));
      assert.equal(await current(t), undefined, "the key is free");
    },
  ],
  [
    "a release applied with its reply lost, the key claimed by another caller since, counts as applied",
    async (t) => {
      await staleRecord(t);
      let lost = false;
      const store = withRelease(t.store, async (request) => {
        const released = await t.store.release(request);
        if (lost || request.scope !== SCOPE) return released;
        lost = true;
        // The key was freed, and another caller claimed it before the reply came back.
        await claimFree(t, { token: "token-b" });
        throw new Error("the connection closed before the reply to release");
      });
      const entry = await resolveRecord(resolveOptions(t, { store, as: "not_executed" }));
      assert.ok(lost, "the release's reply was lost");
      assert.equal(entry.state, "applied");
      assert.equal((await current(t))?.token, "token-b", "the new caller's claim stands");
      const trail = await readTrail({ store: t.store, scope: SCOPE, key: KEY });
      assert.deepEqual(
        trail.map((e) => [e.as, e.state]),
        [["not_executed", "applied"]],
      );
    },
  ],
  [
    "the queue and its counts take in a call's record that lives in the trail's scope under a tool of its own",
    async (t) => {
      await claimFree(t, { scope: "idempotool:trail", key: "user-key", token: "token-u" });
      await t.clock.advance(LEASE_MS);
      const queue = await reviewQueue({ store: t.store, clock: t.clock });
      assert.deepEqual(
        queue.items.map((item) => [item.scope, item.key, item.reason]),
        [["idempotool:trail", "user-key", "lease_passed"]],
      );
      const counts = await reviewCounts({ store: t.store, clock: t.clock });
      assert.equal(counts.stale, 1, "counted as a stale record");
      assert.deepEqual(counts.resolutionsPerDay, [], "not read as a resolution");
    },
  ],
];
