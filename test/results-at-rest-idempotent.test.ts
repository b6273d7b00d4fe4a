import { createCipheriv, randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { KeyConflictError } from "../src/core/errors.js";
import { fingerprint, sha256Hex } from "../src/core/fingerprint.js";
import { idempotent } from "../src/core/idempotent.js";
import { memoryStore } from "../src/core/memory-store.js";
import { definitiveFailure } from "../src/core/outcomes.js";
import { ResultUndecryptableError, resolveCodec } from "../src/core/result-codec.js";
import { decodeFailure, decodeResult, encodeFailure, encodeResult } from "../src/core/serialize.js";
import type { IdempotencyStore } from "../src/core/store.js";
import { reconcileOnce } from "../src/reconcile/index.js";
import { saga } from "../src/saga/index.js";

const k1 = randomBytes(32);
const k2 = randomBytes(32);

it("idempotent() stores results encrypted and redacted, replays them, and rotates keys", async () => {
  const store = memoryStore();
  let runs = 0;
  const fn = async () => {
    runs++;
    return { card: { number: "4242" }, token: "tok", id: "ch_1" };
  };
  const v1 = idempotent(fn, {
    name: "charge",
    store,
    redact: ["token"],
    encryption: { keys: { k1 }, current: "k1" },
  });
  const first = await v1({}, { key: "a" });
  expect(first.result.token).toBe("tok");
  const raw = await store.get({ scope: "default", key: "a" }, Date.now());
  expect(raw?.result).not.toContain("4242");
  const v2 = idempotent(fn, {
    name: "charge",
    store,
    redact: ["token"],
    encryption: { keys: { k2, k1 }, current: "k2" },
  });
  const replay = await v2({}, { key: "a" });
  expect(replay).toMatchObject({
    was_replay: true,
    result: { card: { number: "4242" }, token: "[redacted]", id: "ch_1" },
  });
  const wrong = idempotent(fn, { name: "charge", store, encryption: { keys: { k2 }, current: "k2" } });
  await expect(wrong({}, { key: "a" })).rejects.toBeInstanceOf(ResultUndecryptableError);
  expect(runs).toBe(1);
});

it("idempotent() seals definitive failures and replays them", async () => {
  const store = memoryStore();
  const encryption = { keys: { k1 }, current: "k1" };
  const tool = idempotent(
    async () => {
      throw definitiveFailure(new Error("card 4242 declined"), { last4: "4242" });
    },
    { name: "charge", store, encryption },
  );
  await expect(tool({}, { key: "a" })).rejects.toThrow("card 4242 declined");
  expect((await store.get({ scope: "default", key: "a" }, Date.now()))?.error).not.toContain("4242");
  await expect(tool({}, { key: "a" })).rejects.toMatchObject({
    message: "card 4242 declined",
    was_replay: true,
  });
});

/** A value sealed as records were before envelopes named their record: only the key id authenticated. */
function sealedV1(text: string, keyId: string, key: Uint8Array): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", key, iv, { authTagLength: 16 });
  cipher.setAAD(Buffer.from(keyId, "utf8"));
  const body = Buffer.concat([cipher.update(text, "utf8"), cipher.final()]);
  const parts = [iv, cipher.getAuthTag(), body].map((bytes) => bytes.toString("base64url"));
  return `idempotool:aes-256-gcm:v1:${keyId}:${parts.join(":")}`;
}

/** Write a settled record through the store contract, as an earlier release (or an attacker) would. */
async function settleRaw(
  store: IdempotencyStore,
  record: { key: string; tool: string; fingerprint: string; result?: string | null; error?: string | null },
  status: "completed" | "failed" = "completed",
): Promise<void> {
  const now = Date.now();
  const id = { scope: "default", key: record.key };
  const token = `t-${record.key}`;
  await store.claim({
    ...id,
    tool: record.tool,
    fingerprint: record.fingerprint,
    token,
    leaseMs: 60_000,
    ttlMs: 60_000,
    now,
  });
  await store.settle({
    ...id,
    token,
    status,
    result: record.result ?? null,
    error: record.error ?? null,
    ttlMs: 60_000,
    now,
  });
}

describe("keyed fingerprints", () => {
  const encryption = { keys: { k1 }, current: "k1" };

  it("keys the stored fingerprint when encryption is configured: a 6-digit code cannot be recovered from it", async () => {
    const store = memoryStore();
    const verifyCode = idempotent(async (args: { code: string }) => ({ ok: args.code.length === 6 }), {
      name: "verify_code",
      store,
      encryption,
    });
    await verifyCode({ code: "493027" }, { key: "login-1" });
    const stored = (await store.get({ scope: "default", key: "login-1" }, Date.now()))?.fingerprint;
    expect(stored).toMatch(/^hmac-sha256:k1:[0-9a-f]{16}:[0-9a-f]{64}$/);
    // The attack: fingerprint every candidate code and look for the stored one.
    let recovered: string | undefined;
    for (let n = 493_000; n < 494_000; n++) {
      const code = String(n).padStart(6, "0");
      if (fingerprint({ code }) === stored) recovered = code;
    }
    expect(recovered).toBeUndefined();
  });

  it("keeps replaying across a key rotation: a fingerprint made under the old key still matches", async () => {
    const store = memoryStore();
    let runs = 0;
    const fn = async (args: { code: string }) => ({ run: ++runs, code: args.code });
    const original = idempotent(fn, { name: "verify_code", store, encryption });
    await original({ code: "493027" }, { key: "a" });
    const rotated = { keys: { k2, k1 }, current: "k2" };
    const rotatedTool = idempotent(fn, { name: "verify_code", store, encryption: rotated });
    await expect(rotatedTool({ code: "493027" }, { key: "a" })).resolves.toMatchObject({
      was_replay: true,
      result: { run: 1 },
    });
    await expect(rotatedTool({ code: "000000" }, { key: "a" })).rejects.toBeInstanceOf(KeyConflictError);
    await rotatedTool({ code: "493027" }, { key: "b" });
    expect((await store.get({ scope: "default", key: "b" }, Date.now()))?.fingerprint).toMatch(
      /^hmac-sha256:k2:/,
    );
    // Without the old key, the arguments cannot be compared: neither a replay nor a conflict.
    const forgot = idempotent(fn, {
      name: "verify_code",
      store,
      encryption: { keys: { k2 }, current: "k2" },
    });
    await expect(forgot({ code: "493027" }, { key: "a" })).rejects.toMatchObject({
      name: "ResultUndecryptableError",
      reason: "unknown_key_id",
      keyId: "k1",
    });
    expect(runs).toBe(2);
  });

  it("still opens records sealed before envelopes named their record, with their plain fingerprints", async () => {
    const store = memoryStore();
    const args = { cents: 100 };
    await settleRaw(store, {
      key: "old",
      tool: "charge",
      fingerprint: fingerprint(args),
      result: sealedV1(JSON.stringify({ id: "ch_old" }), "k1", k1),
    });
    let runs = 0;
    const charge = idempotent(async () => ({ id: `ch_${++runs}` }), { name: "charge", store, encryption });
    await expect(charge(args, { key: "old" })).resolves.toMatchObject({
      was_replay: true,
      result: { id: "ch_old" },
    });
    await expect(charge({ cents: 5 }, { key: "old" })).rejects.toBeInstanceOf(KeyConflictError);
    expect(runs).toBe(0);
  });

  it("lets a v1 value copied into another record open there until acceptUnboundV1 is false, then refuses every v1 value", async () => {
    const store = memoryStore();
    const paid = { cents: 100 };
    const other = { cents: 5 };
    const v1 = sealedV1(JSON.stringify({ id: "ch_old" }), "k1", k1);
    await settleRaw(store, { key: "old", tool: "charge", fingerprint: fingerprint(paid), result: v1 });
    // Someone who can write the store copies it into a record of other arguments.
    await settleRaw(store, { key: "copy", tool: "charge", fingerprint: fingerprint(other), result: v1 });
    let runs = 0;
    const fn = async () => ({ id: `ch_${++runs}` });
    const migrating = idempotent(fn, { name: "charge", store, encryption });
    await expect(migrating(other, { key: "copy" })).resolves.toMatchObject({ result: { id: "ch_old" } });
    const strict = idempotent(fn, {
      name: "charge",
      store,
      encryption: { ...encryption, acceptUnboundV1: false },
    });
    for (const [args, key] of [
      [paid, "old"],
      [other, "copy"],
    ] as const) {
      await expect(strict(args, { key })).rejects.toMatchObject({
        name: "ResultUndecryptableError",
        reason: "unbound_v1",
        keyId: "k1",
      });
    }
    expect(runs).toBe(0);
  });

  it("matches the plain fingerprints of records written before any key was configured", async () => {
    const store = memoryStore();
    const args = { cents: 100 };
    const fn = async () => ({ id: "ch_new" });
    await idempotent(fn, { name: "charge", store })(args, { key: "plain" });
    const migrating = idempotent(fn, {
      name: "charge",
      store,
      encryption: { ...encryption, acceptPlaintext: true },
    });
    await expect(migrating(args, { key: "plain" })).resolves.toMatchObject({ was_replay: true });
    const keyedOnly = idempotent(fn, {
      name: "charge",
      store,
      fingerprintKeys: { keys: { f1: k2 }, current: "f1" },
    });
    await expect(keyedOnly(args, { key: "plain" })).resolves.toMatchObject({ was_replay: true });
    await expect(keyedOnly({ cents: 1 }, { key: "plain" })).rejects.toBeInstanceOf(KeyConflictError);
  });

  it("takes its own fingerprintKeys without encryption, and `false` keeps plain fingerprints", async () => {
    const store = memoryStore();
    const fn = async () => "ok";
    await idempotent(fn, { name: "t", store, fingerprintKeys: { keys: { f1: k2 }, current: "f1" } })(
      { code: "1" },
      { key: "keyed" },
    );
    await idempotent(fn, { name: "t", store, encryption, fingerprintKeys: false })(
      { code: "1" },
      { key: "plain" },
    );
    const get = async (key: string) => (await store.get({ scope: "default", key }, Date.now()))?.fingerprint;
    expect(await get("keyed")).toMatch(/^hmac-sha256:f1:/);
    expect(await get("plain")).toBe(fingerprint({ code: "1" }));
    expect(() =>
      idempotent(fn, { name: "t", store, fingerprintKeys: { keys: { f1: randomBytes(16) }, current: "f1" } }),
    ).toThrow(/`fingerprintKeys.keys.f1`/);
    expect(() =>
      idempotent(fn, { name: "t", store, fingerprintKeys: { keys: { f1: k2 }, current: "f2" } }),
    ).toThrow(/`fingerprintKeys.current`/);
  });
});

describe("encryption means integrity: any changed character of a sealed value is refused", () => {
  const invalid = (option: string, problem: string): never => {
    throw new Error(`${option} ${problem}`);
  };
  const record = { scope: "tenant-a", key: "order-1", tool: "charge", fingerprint: "hmac-sha256:k1:00" };

  /** Every position, each replaced by three others (in and out of the base64url alphabet). */
  function* changed(text: string): Generator<string> {
    for (let at = 0; at < text.length; at++) {
      const char = text[at]!;
      for (const other of [char === "A" ? "B" : "A", char === "0" ? "1" : "0", "~"]) {
        yield text.slice(0, at) + other + text.slice(at + 1);
      }
    }
  }

  for (const acceptPlaintext of [false, true]) {
    it(`gives ResultUndecryptableError for results and failures${acceptPlaintext ? " (acceptPlaintext)" : ""}`, () => {
      const codec = resolveCodec(undefined, { keys: { k1 }, current: "k1", acceptPlaintext }, invalid);
      const result = encodeResult({ id: "ch_1", cents: 100 }, 1024, codec, record);
      if (!result.ok || result.text === null) throw new Error("not kept");
      const failure = encodeFailure("failed", new Error("declined"), { last4: "4242" }, 1024, codec, record);
      let checked = 0;
      for (const text of changed(result.text)) {
        expect(() => decodeResult(text, codec, record), text).toThrow(ResultUndecryptableError);
        checked++;
      }
      for (const text of changed(failure)) {
        expect(() => decodeFailure("failed", text, codec, record), text).toThrow(ResultUndecryptableError);
      }
      expect(checked).toBe(result.text.length * 3);
      // And unchanged, both open.
      expect(decodeResult(result.text, codec, record)).toEqual({ id: "ch_1", cents: 100 });
      expect(decodeFailure("failed", failure, codec, record)).toMatchObject({ message: "declined" });
    });
  }
});

describe("outcomes recorded outside idempotent() are sealed for their record too", () => {
  const encryption = { keys: { k1 }, current: "k1" };

  it("the reconciler seals what it records with the tool's encryption, and the tool replays it", async () => {
    const store = memoryStore();
    let runs = 0;
    const send = idempotent(
      async () => {
        runs++;
        throw new Error("timed out after the send");
      },
      { name: "send_sms", store, encryption },
    );
    await expect(send({ to: "+1555" }, { key: "sms-1" })).rejects.toMatchObject({ code: "outcome_unknown" });
    await reconcileOnce({
      store,
      tools: { send_sms: { verify: () => ({ status: "completed", result: { sid: "SM1" } }), encryption } },
    });
    expect((await store.get({ scope: "default", key: "sms-1" }, Date.now()))?.result).not.toContain("SM1");
    await expect(send({ to: "+1555" }, { key: "sms-1" })).resolves.toMatchObject({
      was_replay: true,
      result: { sid: "SM1" },
    });
    expect(runs).toBe(1);
  });

  it("a saga seals its steps, and compensates with the opened step", async () => {
    const store = memoryStore();
    const undone: unknown[] = [];
    const refund = saga({
      name: "refund",
      store,
      encryption,
      run: async (args: { orderId: string }) => ({ externalId: `re_${args.orderId}` }),
      compensate: async (_record, { step }) => {
        undone.push(step);
      },
    });
    await refund({ orderId: "o-1" }, { key: "refund-o-1" });
    expect((await store.get({ scope: "default", key: "refund-o-1" }, Date.now()))?.result).not.toContain(
      "re_o-1",
    );
    expect(refund.reconciler.encryption).toBe(encryption);
    await refund.compensate({ key: "refund-o-1" }, "duplicate");
    expect(undone).toEqual([{ externalId: "re_o-1" }]);
  });
});

describe("the near-duplicate marker with keyed fingerprints", () => {
  it("names its marker after the keyed fingerprint, so its key does not reveal the similar fields", async () => {
    const store = memoryStore();
    const send = idempotent(async (args: { to: string; body: string }) => ({ sent: args.to }), {
      name: "send_sms",
      store,
      encryption: { keys: { k1 }, current: "k1" },
      similar: { fields: ["to"] },
    });
    await send({ to: "+15550100", body: "hi" }, { key: "turn-1" });
    const again = await send({ to: "+15550100", body: "hi again" }, { key: "turn-2" });
    expect(again.recent_similar_call?.idempotency_key).toBe("turn-1");
    const { records } = await store.list({ limit: 10 });
    const marker = records.find((record) => record.key.startsWith("~similar~"));
    // The marker a plain fingerprint would make: anyone could compute it for every phone number.
    const plain = `~similar~${sha256Hex(`send_sms\u0000${fingerprint({ to: "+15550100" })}`)}`;
    expect(marker?.key).toBeDefined();
    expect(marker?.key).not.toBe(plain);
  });
});
