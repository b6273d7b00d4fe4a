/**
 * A key problem reads as a key problem: a record whose keyed fingerprint was made with other bytes under the
 * same key id is `result_undecryptable` (`authentication_failed`), never `idempotency_key_conflict`; only a
 * record made with this very key, for other arguments, is a conflict. Either way nothing runs again and
 * nothing is replayed. The key check value in the fingerprint tells the two apart; it is the MAC of a fixed
 * label, so it says nothing of the arguments, and forging it changes which error is told, nothing more.
 */
import { randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { KeyConflictError, ResultUndecryptableError } from "../src/core/errors.js";
import { fingerprint } from "../src/core/fingerprint.js";
import { idempotent } from "../src/core/idempotent.js";
import { memoryStore } from "../src/core/memory-store.js";
import type { IdempotencyStore } from "../src/core/store.js";
import {
  idempotencyMiddleware,
  idempotentFetch,
  isIdempotentFetchError,
  type NextHandler,
} from "../src/http/index.js";
import { checkpoint, postgresDedupTableSql, postgresTransactionalOnce } from "../src/ops/index.js";
import { freshTable, testPool } from "./fixtures/pg-helpers.js";
import { tamper } from "./fixtures/tamper.js";

const k1 = randomBytes(32);
/** The same key id with other bytes: a server configured with the wrong secret. */
const wrongK1 = randomBytes(32);
const k2 = randomBytes(32);
const right = { keys: { k1 }, current: "k1" };
const wrong = { keys: { k1: wrongK1 }, current: "k1" };

const keyProblem = { name: "ResultUndecryptableError", reason: "authentication_failed", keyId: "k1" };

async function storedFingerprint(store: IdempotencyStore, key: string, scope = "default"): Promise<string> {
  return (await store.get({ scope, key }, Date.now()))!.fingerprint;
}

describe("idempotent(): wrong key bytes under the same key id", () => {
  /** A charge tool; `runs` counts the runs of this one instance. */
  function charge(store: IdempotencyStore, options: object) {
    let runs = 0;
    const tool = idempotent(async (args: { cents: number }) => ({ run: ++runs, cents: args.cents }), {
      name: "charge",
      store,
      ...options,
    });
    return Object.defineProperty(tool, "runs", { get: () => runs }) as typeof tool & {
      readonly runs: number;
    };
  }

  it("is a key problem (authentication_failed), not a conflict: the tool does not run and nothing is replayed", async () => {
    const store = memoryStore();
    await charge(store, { encryption: right })({ cents: 100 }, { key: "order-1" });
    const misconfigured = charge(store, { encryption: wrong });
    const error = await misconfigured({ cents: 100 }, { key: "order-1" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ResultUndecryptableError);
    expect(error).toMatchObject({ ...keyProblem, code: "result_undecryptable", httpStatus: 500 });
    expect((error as Error).message).not.toMatch(/different arguments/);
    expect((error as Error).message).toMatch(/other bytes for key "k1"/);
    // Other arguments are no different to a reader that cannot compare them.
    await expect(misconfigured({ cents: 5 }, { key: "order-1" })).rejects.toMatchObject(keyProblem);
    expect(misconfigured.runs).toBe(0);
  });

  it("stays a conflict for other arguments under the right key, and a replay for the same ones", async () => {
    const store = memoryStore();
    const tool = charge(store, { encryption: right });
    await tool({ cents: 100 }, { key: "order-1" });
    await expect(tool({ cents: 5 }, { key: "order-1" })).rejects.toBeInstanceOf(KeyConflictError);
    await expect(tool({ cents: 100 }, { key: "order-1" })).resolves.toMatchObject({
      was_replay: true,
      result: { run: 1 },
    });
    expect(tool.runs).toBe(1);
  });

  it("tells a wrong retired key from other arguments after a rotation too", async () => {
    const store = memoryStore();
    await charge(store, { encryption: right })({ cents: 100 }, { key: "order-1" });
    const rotated = charge(store, { encryption: { keys: { k2, k1 }, current: "k2" } });
    await expect(rotated({ cents: 100 }, { key: "order-1" })).resolves.toMatchObject({ was_replay: true });
    await expect(rotated({ cents: 5 }, { key: "order-1" })).rejects.toBeInstanceOf(KeyConflictError);
    const rotatedWrong = charge(store, { encryption: { keys: { k2, k1: wrongK1 }, current: "k2" } });
    await expect(rotatedWrong({ cents: 100 }, { key: "order-1" })).rejects.toMatchObject(keyProblem);
    expect(rotated.runs + rotatedWrong.runs).toBe(0);
  });

  it("does the same with fingerprintKeys of its own, without encryption", async () => {
    const store = memoryStore();
    await charge(store, { fingerprintKeys: { keys: { k1 }, current: "k1" } })({ cents: 100 }, { key: "a" });
    const misconfigured = charge(store, { fingerprintKeys: { keys: { k1: wrongK1 }, current: "k1" } });
    await expect(misconfigured({ cents: 100 }, { key: "a" })).rejects.toMatchObject(keyProblem);
    expect(misconfigured.runs).toBe(0);
  });

  it("is still a conflict when the key belongs to another tool keyed with other bytes under the same id", async () => {
    const store = memoryStore();
    await charge(store, { encryption: right })({ cents: 100 }, { key: "order-1" });
    // A refund tool with its own secret that happens to share the id "k1": a key reused across tools.
    let refunds = 0;
    const refund = idempotent(async () => ++refunds, { name: "refund", store, encryption: wrong });
    await expect(refund({ cents: 100 }, { key: "order-1" })).rejects.toMatchObject({
      name: "KeyConflictError",
      originalTool: "charge",
      tool: "refund",
    });
    expect(refunds).toBe(0);
  });
});

describe("`fingerprintKeys: false` with `encryption` against a keyed record", () => {
  it("reports unknown_key_id, and does not say that no encryption is configured", async () => {
    const store = memoryStore();
    let runs = 0;
    const fn = async () => ++runs;
    await idempotent(fn, { name: "t", store, encryption: right })({ code: "1" }, { key: "a" });
    const plain = idempotent(fn, { name: "t", store, encryption: right, fingerprintKeys: false });
    const error = await plain({ code: "1" }, { key: "a" }).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: "ResultUndecryptableError", reason: "unknown_key_id", keyId: "k1" });
    expect((error as Error).message).not.toMatch(/no `encryption`/);
    expect((error as Error).message).toMatch(/`fingerprintKeys: false`/);
    expect(runs).toBe(1);
  });

  it("still says no_encryption_configured when neither option is given", async () => {
    const store = memoryStore();
    const fn = async () => "ok";
    await idempotent(fn, { name: "t", store, encryption: right })({ code: "1" }, { key: "a" });
    await expect(idempotent(fn, { name: "t", store })({ code: "1" }, { key: "a" })).rejects.toMatchObject({
      reason: "no_encryption_configured",
      keyId: "k1",
    });
  });
});

describe("the key check value", () => {
  it("is the same for every record of a key, differs between keys, and is none of the arguments' MACs", async () => {
    const store = memoryStore();
    const fn = async () => "ok";
    await idempotent(fn, { name: "t", store, encryption: right })({ code: "493027" }, { key: "a" });
    await idempotent(fn, { name: "t", store, encryption: right })({ code: "000000" }, { key: "b" });
    await idempotent(fn, { name: "t", store, encryption: wrong })({ code: "493027" }, { key: "c" });
    const [a, b, c] = await Promise.all(["a", "b", "c"].map((key) => storedFingerprint(store, key)));
    const shape = /^hmac-sha256:k1:([0-9a-f]{16}):([0-9a-f]{64})$/;
    const [, checkA, macA] = a!.match(shape)!;
    const [, checkB, macB] = b!.match(shape)!;
    const [, checkC] = c!.match(shape)!;
    expect(checkA).toBe(checkB);
    expect(macA).not.toBe(macB);
    expect(checkC).not.toBe(checkA);
    expect(macA).not.toContain(checkA);
    expect(a).not.toContain(fingerprint({ code: "493027" }));
  });

  it("forged, it turns a replay into the key problem, never into a run or another record's result", async () => {
    const store = memoryStore();
    let runs = 0;
    const tool = idempotent(async () => ++runs, { name: "t", store, encryption: right });
    await tool({ cents: 100 }, { key: "a" });
    const stored = await storedFingerprint(store, "a");
    const forged = stored.replace(/^(hmac-sha256:k1:)[0-9a-f]/, (_, head: string) =>
      stored[head.length] === "0" ? `${head}1` : `${head}0`,
    );
    await tamper(store, "a", { fingerprint: forged });
    await expect(tool({ cents: 100 }, { key: "a" })).rejects.toMatchObject(keyProblem);
    expect(runs).toBe(1);
  });

  it("copied onto a record made with another key, it changes nothing: a conflict, as without it", async () => {
    const store = memoryStore();
    let runs = 0;
    const fn = async () => ++runs;
    await idempotent(fn, { name: "t", store, encryption: right })({ cents: 100 }, { key: "good" });
    await idempotent(fn, { name: "t", store, encryption: wrong })({ cents: 100 }, { key: "bad" });
    const goodCheck = (await storedFingerprint(store, "good")).split(":")[2]!;
    const [prefix, id, , mac] = (await storedFingerprint(store, "bad")).split(":");
    await tamper(store, "bad", { fingerprint: [prefix, id, goodCheck, mac].join(":") });
    const tool = idempotent(fn, { name: "t", store, encryption: right });
    await expect(tool({ cents: 100 }, { key: "bad" })).rejects.toBeInstanceOf(KeyConflictError);
    expect(runs).toBe(2);
  });

  it("stripped, the record reads as one of an earlier build: its sealed result no longer opens there", async () => {
    const store = memoryStore();
    let runs = 0;
    const tool = idempotent(async () => ({ run: ++runs }), { name: "t", store, encryption: right });
    await tool({ cents: 100 }, { key: "a" });
    const [prefix, id, , mac] = (await storedFingerprint(store, "a")).split(":");
    await tamper(store, "a", { fingerprint: [prefix, id, mac].join(":") });
    // The fingerprint still matches (it was made with this key for these arguments), but the result was
    // sealed for the record as written: moved to another fingerprint, it is refused, never replayed wrong.
    await expect(tool({ cents: 100 }, { key: "a" })).rejects.toMatchObject({
      name: "ResultUndecryptableError",
      reason: "authentication_failed",
    });
    expect(runs).toBe(1);
  });

  it("refuses a keyed fingerprint that is not in the form idempotool writes (malformed)", async () => {
    const store = memoryStore();
    let runs = 0;
    const tool = idempotent(async () => ++runs, { name: "t", store, encryption: right });
    await tool({ cents: 100 }, { key: "a" });
    await tamper(store, "a", { fingerprint: `hmac-sha256:k1:zz:${"0".repeat(64)}` });
    await expect(tool({ cents: 100 }, { key: "a" })).rejects.toMatchObject({ reason: "malformed" });
    expect(runs).toBe(1);
  });
});

describe("records keyed by earlier builds, with no key check value", () => {
  it("still replay for the same arguments and conflict for others; a wrong key there still reads as a conflict", async () => {
    const store = memoryStore();
    let runs = 0;
    const fingerprintKeys = { keys: { k1 }, current: "k1" };
    const fn = async () => ({ run: ++runs });
    await idempotent(fn, { name: "t", store, fingerprintKeys })({ cents: 100 }, { key: "old" });
    const [prefix, id, , mac] = (await storedFingerprint(store, "old")).split(":");
    await tamper(store, "old", { fingerprint: [prefix, id, mac].join(":") });
    const tool = idempotent(fn, { name: "t", store, fingerprintKeys });
    await expect(tool({ cents: 100 }, { key: "old" })).resolves.toMatchObject({ was_replay: true });
    await expect(tool({ cents: 5 }, { key: "old" })).rejects.toBeInstanceOf(KeyConflictError);
    const misconfigured = idempotent(fn, {
      name: "t",
      store,
      fingerprintKeys: { keys: { k1: wrongK1 }, current: "k1" },
    });
    // Fails closed as before: no run, no replay, though it cannot tell which of the two it is.
    await expect(misconfigured({ cents: 100 }, { key: "old" })).rejects.toBeInstanceOf(KeyConflictError);
    expect(runs).toBe(1);
  });
});

describe("OP-2 on PostgreSQL: wrong key bytes under the same key id", () => {
  const pool = testPool({ max: 3 });
  let table = "";
  beforeEach(async () => {
    table = freshTable();
    await pool.query(postgresDedupTableSql(table));
  });
  afterEach(() => pool.query(`DROP TABLE IF EXISTS "${table}"`));
  afterAll(() => pool.end());

  function once(encryption: object, args: object, tool = "charge", extra: object = {}) {
    let writes = 0;
    const outcome = postgresTransactionalOnce(
      pool,
      { table, tool, key: "order-1", args, encryption, ...extra } as Parameters<
        typeof postgresTransactionalOnce
      >[1],
      async () => ({ write: ++writes }),
    );
    return { outcome, writes: () => writes };
  }

  it("is a key problem (authentication_failed), not a conflict, and the write does not run", async () => {
    await once(right, { cents: 100 }).outcome;
    const misconfigured = once(wrong, { cents: 100 });
    const error = await misconfigured.outcome.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ResultUndecryptableError);
    expect(error).toMatchObject(keyProblem);
    expect(misconfigured.writes()).toBe(0);
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "${table}"`);
    expect(rows[0].n).toBe(1);
  });

  it("stays a conflict for other arguments under the right key, and for another tool's row", async () => {
    await once(right, { cents: 100 }).outcome;
    await expect(once(right, { cents: 5 }).outcome).rejects.toBeInstanceOf(KeyConflictError);
    await expect(once(wrong, { cents: 100 }, "refund").outcome).rejects.toMatchObject({
      name: "KeyConflictError",
      originalTool: "charge",
    });
    await expect(once(right, { cents: 100 }).outcome).resolves.toMatchObject({ was_replay: true });
  });

  it("says unknown_key_id with `fingerprintKeys: false`, not that no encryption is configured", async () => {
    await once(right, { cents: 100 }).outcome;
    const error = await once(right, { cents: 100 }, "charge", { fingerprintKeys: false }).outcome.catch(
      (e: unknown) => e,
    );
    expect(error).toMatchObject({ reason: "unknown_key_id", keyId: "k1" });
    expect((error as Error).message).not.toMatch(/no `encryption`/);
  });
});

describe("checkpoint(): wrong key bytes under the same key id", () => {
  it("is a key problem, and the checkpoint does not say to run", async () => {
    const store = memoryStore();
    const first = await checkpoint(store, {
      tool: "charge",
      key: "a",
      args: { cents: 100 },
      encryption: right,
    });
    await first.complete({ id: "ch_1" });
    await expect(
      checkpoint(store, { tool: "charge", key: "a", args: { cents: 100 }, encryption: wrong }),
    ).rejects.toMatchObject(keyProblem);
  });
});

describe("the HTTP middleware and idempotentFetch: a server with the wrong key", () => {
  function post(body: unknown): Request {
    return new Request("http://api.test/payments", {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": "pay-1" },
      body: JSON.stringify(body),
    });
  }

  function servers() {
    const store = memoryStore();
    let runs = 0;
    const next: NextHandler = async () => Response.json({ id: `pay_${++runs}` }, { status: 201 });
    const scope = () => "tenant-a";
    const good = idempotencyMiddleware({ store, scope, encryption: right });
    const bad = idempotencyMiddleware({ store, scope, encryption: wrong });
    return { good, bad, next, runs: () => runs };
  }

  it("answers 500 result_undecryptable, not 422, and runs nothing", async () => {
    const { good, bad, next, runs } = servers();
    await good(post({ cents: 100 }), next);
    const answer = await bad(post({ cents: 100 }), next);
    expect(answer.status).toBe(500);
    expect(answer.headers.get("content-type")).toBe("application/problem+json");
    const problem = (await answer.json()) as { detail: string };
    expect(problem).toMatchObject({ status: 500, code: "result_undecryptable" });
    expect(problem.detail).toMatch(/retry with the same idempotency key/);
    // The right key still tells other arguments apart.
    expect((await good(post({ cents: 5 }), next)).status).toBe(422);
    expect(runs()).toBe(1);
  });

  it("idempotentFetch retries it as a server error, and gets the replay from a server with the right key", async () => {
    const { good, bad, next, runs } = servers();
    await good(post({ cents: 100 }), next);
    const answered: number[] = [];
    // A fleet where one instance has the wrong key: the first attempt lands there, the retry elsewhere.
    const fleet = [bad, good];
    const outcome = await idempotentFetch("http://api.test/payments", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ cents: 100 }),
      idempotencyKey: "pay-1",
      retry: { maxAttempts: 3, initialDelayMs: 0 },
      fetch: async (url, init) => {
        const response = await fleet[answered.length % fleet.length]!(new Request(url, init), next);
        answered.push(response.status);
        return response;
      },
    });
    expect(answered).toEqual([500, 201]);
    expect(outcome).toMatchObject({ attempts: 2, replayed: true });
    expect(await outcome.response.json()).toEqual({ id: "pay_1" });
    expect(runs()).toBe(1);
  });

  it("idempotentFetch never reads it as a conflict: after its retries it rejects with result_undecryptable", async () => {
    const { good, bad, next, runs } = servers();
    await good(post({ cents: 100 }), next);
    const error = await idempotentFetch("http://api.test/payments", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ cents: 100 }),
      idempotencyKey: "pay-1",
      retry: { maxAttempts: 3, initialDelayMs: 0 },
      fetch: async (url, init) => bad(new Request(url, init), next),
    }).then(
      () => undefined,
      (rejected: unknown) => rejected,
    );
    // Not a failed response a caller's `if (!response.ok) throw` would read as "it did not happen".
    expect(isIdempotentFetchError(error, "result_undecryptable")).toBe(true);
    expect(error).toMatchObject({ attempts: 3, idempotencyKey: "pay-1" });
    expect((error as Error).message).toMatch(/may have taken effect.*same key/);
    expect(runs()).toBe(1);
  });
});
