import { createCipheriv, randomBytes } from "node:crypto";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { IdempotencyError } from "./errors.js";
import { invalidOptionFor } from "./option-checks.js";
import { ResultUndecryptableError, resolveCodec } from "./result-codec.js";
import {
  decodeFailure,
  decodeResult,
  decodeResultProblem,
  encodeFailure,
  encodeResult,
} from "./serialize.js";

const invalid = invalidOptionFor("resolveCodec()");
const k1 = randomBytes(32);
const k2 = randomBytes(32);
/** The record every sealed value in these tests belongs to. */
const record = { scope: "default", key: "k", tool: "charge", fingerprint: "f" };

function stored(
  result: unknown,
  codec = resolveCodec(undefined, { keys: { k1 }, current: "k1" }, invalid),
): string {
  const encoded = encodeResult(result, 1024 * 1024, codec, record);
  if (!encoded.ok || encoded.text === null) throw new Error("not kept");
  return encoded.text;
}

describe("serialize with a result codec", () => {
  it("stores plain JSON without a codec, exactly as before", () => {
    expect(encodeResult({ a: 1 }, 100)).toEqual({ ok: true, text: '{"a":1}' });
    expect(decodeResult('{"a":1}')).toEqual({ a: 1 });
  });

  it("refuses a Map or Set wherever JSON.stringify would reach it, and keeps everything else as JSON.stringify writes it", () => {
    const unserializable = (result: unknown) => {
      const encoded = encodeResult(result, 1024 * 1024);
      return encoded.ok ? undefined : encoded.problem;
    };
    class Registry extends Map<string, number> {
      readonly label = "subclass with fields";
    }
    let deep: unknown = new Map([["a", 1]]);
    for (let i = 0; i < 40; i++) deep = { inner: deep };
    const lossy: unknown[] = [
      new Map([["a", 1]]),
      new Set([1]),
      { rows: [{ tags: new Set(["x"]) }] },
      [1, [2, new Map()]],
      new Registry([["a", 1]]),
      { when: { toJSON: () => new Map([["a", 1]]) } },
      deep,
    ];
    for (const result of lossy) {
      expect(unserializable(result)).toMatchObject({ code: "result_unserializable" });
    }
    // JSON.stringify calls toJSON on functions (classes too) and on BigInts, not only on objects.
    const handler = Object.assign(() => 1, { toJSON: () => new Map([["a", 1]]) });
    const currency = class {
      readonly code = "usd";
      static toJSON() {
        return new Set(["usd"]);
      }
    };
    for (const result of [handler, { handler }, [handler], { type: currency }]) {
      expect(unserializable(result)).toMatchObject({ code: "result_unserializable" });
    }
    const bigintPrototype = BigInt.prototype as { toJSON?: unknown };
    bigintPrototype.toJSON = function (this: bigint) {
      return new Map([["v", String(this)]]);
    };
    try {
      for (const result of [5n, { id: 1n }, new BigInt64Array([2n])]) {
        expect(unserializable(result)).toMatchObject({ code: "result_unserializable" });
      }
    } finally {
      delete bigintPrototype.toJSON;
    }
    const cyclic: Record<string, unknown> = { id: 1 };
    cyclic.self = { back: cyclic };
    expect(unserializable(cyclic)).toMatchObject({
      code: "result_unserializable",
      reason: expect.stringContaining("circular"),
    });
    expect(unserializable({ id: 1n })).toMatchObject({ code: "result_unserializable" });

    let nested: unknown = { leaf: [1, "two", null, true] };
    for (let i = 0; i < 40; i++) nested = { inner: nested, list: [i] };
    const kept: unknown[] = [
      { queued: true, to: "alice@example.com", id: "m-1" },
      [{ a: [1, { b: "c" }] }, "s", 2.5, null],
      { at: new Date(0), n: new Number(3), s: new String("ab"), skipped: undefined, f: () => 1 },
      Object.assign(Object.create({ inherited: new Map() }), { own: 1 }),
      new Uint8Array([1, 2]),
      nested,
      "text",
      null,
    ];
    for (const result of kept) {
      expect(encodeResult(result, 1024 * 1024)).toEqual({ ok: true, text: JSON.stringify(result) });
    }
  });

  it("refuses a Map or Set made in another realm (node:vm), which instanceof does not see, with a reason naming it", () => {
    const other = runInNewContext(`({
      map: new Map([["a", 1]]),
      set: new Set([1]),
      nested: { rows: [new Map()] },
      plain: { a: [1, { b: "c" }] },
    })`) as Record<string, unknown>;
    expect(other.map instanceof Map).toBe(false);
    for (const [name, kind] of [
      ["map", "Map"],
      ["set", "Set"],
      ["nested", "Map"],
    ] as const) {
      const encoded = encodeResult(other[name], 1024 * 1024);
      expect(encoded.ok, name).toBe(false);
      expect(encoded.ok ? undefined : encoded.problem, name).toMatchObject({
        code: "result_unserializable",
        reason: expect.stringContaining(`a ${kind} has no JSON form`),
      });
    }
    // Another realm's plain objects and arrays are kept as JSON.stringify writes them.
    const plain = encodeResult(other.plain, 1024 * 1024);
    expect(plain).toMatchObject({ ok: true });
    expect(plain.ok && plain.text).toBe(JSON.stringify(other.plain));
  });

  it("reads a result once, so a getter that answers a Map is refused whichever read it answers it on", () => {
    const changing = (answers: unknown[]) => {
      let reads = 0;
      return {
        result: {
          get value() {
            return answers[Math.min(reads++, answers.length - 1)];
          },
        },
        reads: () => reads,
      };
    };
    // A Map on the first read: refused, not stored as what a second read answered.
    const mapFirst = changing([new Map([["a", 1]]), { a: 1 }]);
    expect(encodeResult(mapFirst.result, 1024)).toMatchObject({
      ok: false,
      problem: { code: "result_unserializable" },
    });
    expect(mapFirst.reads()).toBe(1);
    // A plain object on the first read: kept as that read answered it, never as a later Map flattened to {}.
    const plainFirst = changing([{ a: 1 }, new Map([["a", 1]])]);
    expect(encodeResult(plainFirst.result, 1024)).toEqual({ ok: true, text: '{"value":{"a":1}}' });
    expect(plainFirst.reads()).toBe(1);
  });

  it("looks at no more of a result than JSON.stringify would before it fails", () => {
    // A result JSON.stringify refuses at its first member: the scan for Maps must not walk all the rest first.
    let reads = 0;
    const rows = Array.from({ length: 50_000 }, () => ({
      get value() {
        reads++;
        return 1;
      },
    }));
    const encoded = encodeResult({ id: 1n, rows }, 1024 * 1024);
    expect(encoded).toMatchObject({ ok: false, problem: { code: "result_unserializable" } });
    expect(reads).toBeLessThanOrEqual(4_096);
  });

  it("redacts named fields, through arrays, without touching the caller's value", () => {
    const codec = resolveCodec(["card.number", "token", "items.secret", "absent.path"], undefined, invalid);
    const result = {
      card: { number: "4242", brand: "visa" },
      token: "t",
      items: [{ secret: 1, id: 1 }, { id: 2 }],
    };
    const text = stored(result, codec);
    expect(JSON.parse(text)).toEqual({
      card: { number: "[redacted]", brand: "visa" },
      token: "[redacted]",
      items: [{ secret: "[redacted]", id: 1 }, { id: 2 }],
    });
    expect(result.card.number).toBe("4242");
  });

  it("applies the size limit to the redacted plaintext, before encryption", () => {
    const codec = resolveCodec(["blob"], { keys: { k1 }, current: "k1" }, invalid);
    expect(encodeResult({ blob: "x".repeat(500) }, 100, codec, record).ok).toBe(true);
    expect(encodeResult({ other: "x".repeat(500) }, 100, codec, record)).toMatchObject({
      ok: false,
      problem: { code: "result_too_large" },
    });
  });

  it("seals results and failures so the stored text holds no plaintext, and opens them again", () => {
    const codec = resolveCodec(undefined, { keys: { k1 }, current: "k1" }, invalid);
    const text = stored({ secret: "hunter2" }, codec);
    expect(text).not.toContain("hunter2");
    expect(text.startsWith("idempotool:aes-256-gcm:v2:k1:")).toBe(true);
    expect(decodeResult(text, codec, record)).toEqual({ secret: "hunter2" });
    expect(stored({ secret: "hunter2" }, codec)).not.toBe(text); // a fresh IV every time

    const failure = encodeFailure(
      "failed",
      new Error("card 4242 declined"),
      { last4: "4242" },
      1024,
      codec,
      record,
    );
    expect(failure).not.toContain("4242");
    expect(decodeFailure("failed", failure, codec, record)).toEqual({
      name: "Error",
      message: "card 4242 declined",
      data: { last4: "4242" },
    });
  });

  it("rotates keys: new records use the current key, old ones open by their key id", () => {
    const old = stored("before", resolveCodec(undefined, { keys: { k1 }, current: "k1" }, invalid));
    const rotated = resolveCodec(undefined, { keys: { k2, k1 }, current: "k2" }, invalid);
    const fresh = stored("after", rotated);
    expect(fresh).toContain(":k2:");
    expect(decodeResult(old, rotated, record)).toBe("before");
    expect(decodeResult(fresh, rotated, record)).toBe("after");
  });

  it("throws a typed error, never garbage, for a missing, unknown or wrong key", () => {
    const text = stored("secret");
    const attempts = [
      [undefined, "no_encryption_configured"],
      [resolveCodec(undefined, { keys: { k2 }, current: "k2" }, invalid), "unknown_key_id"],
      [resolveCodec(undefined, { keys: { k1: k2 }, current: "k1" }, invalid), "authentication_failed"],
    ] as const;
    for (const [codec, reason] of attempts) {
      const error = (() => {
        try {
          decodeResult(text, codec, record);
        } catch (e) {
          return e;
        }
      })();
      expect(error).toBeInstanceOf(ResultUndecryptableError);
      expect(error).toBeInstanceOf(IdempotencyError);
      expect(error).toMatchObject({ reason });
    }
    expect(() =>
      decodeFailure(
        "failed",
        encodeFailure(
          "failed",
          new Error("x"),
          undefined,
          1024,
          resolveCodec(undefined, { keys: { k1 }, current: "k1" }, invalid),
          record,
        ),
      ),
    ).toThrow(ResultUndecryptableError);
  });

  it("detects tampering: any flipped byte or swapped key id fails authentication", () => {
    const codec = resolveCodec(undefined, { keys: { k1, k2: k1 }, current: "k1" }, invalid);
    const text = stored({ amount: 100 }, codec);
    const body = text.lastIndexOf(":") + 1;
    for (const at of [body, body + 3, text.length - 2]) {
      const flipped = text.slice(0, at) + (text[at] === "A" ? "B" : "A") + text.slice(at + 1);
      expect(() => decodeResult(flipped, codec, record)).toThrow(ResultUndecryptableError);
    }
    // The key id is authenticated too: relabelling a record fails even where the key bytes match.
    expect(() => decodeResult(text.replace(":k1:", ":k2:"), codec, record)).toThrow(ResultUndecryptableError);
    expect(() => decodeResult("idempotool:aes-256-gcm:v1:k1:bad", codec, record)).toThrow(
      ResultUndecryptableError,
    );
  });

  it("binds a failure to the status it was recorded under: an unknown outcome's error never opens as a definitive failure", () => {
    const codec = resolveCodec(undefined, { keys: { k1 }, current: "k1" }, invalid);
    const note = encodeFailure(
      "unknown",
      new Error("timed out after the send"),
      undefined,
      1024,
      codec,
      record,
    );
    const failure = encodeFailure("failed", new Error("declined"), undefined, 1024, codec, record);
    expect(decodeFailure("unknown", note, codec, record)).toMatchObject({
      message: "timed out after the send",
    });
    expect(decodeFailure("failed", failure, codec, record)).toMatchObject({ message: "declined" });
    expect(() => decodeFailure("failed", note, codec, record)).toThrow(
      expect.objectContaining({ reason: "authentication_failed" }),
    );
    expect(() => decodeFailure("unknown", failure, codec, record)).toThrow(ResultUndecryptableError);
  });

  it("seals an undefined result, and with encryption refuses an emptied result or failure unless acceptPlaintext", () => {
    const codec = resolveCodec(undefined, { keys: { k1 }, current: "k1" }, invalid);
    const text = stored(undefined, codec);
    expect(text.startsWith("idempotool:aes-256-gcm:v2:k1:")).toBe(true);
    expect(decodeResult(text, codec, record)).toBeUndefined();
    expect(() => decodeResult(text, codec, { ...record, key: "other" })).toThrow(ResultUndecryptableError);
    expect(() => decodeResult(null, codec, record)).toThrow(
      expect.objectContaining({ reason: "not_sealed" }),
    );
    expect(() => decodeFailure("failed", null, codec, record)).toThrow(
      expect.objectContaining({ reason: "not_sealed" }),
    );
    const migrating = resolveCodec(
      undefined,
      { keys: { k1 }, current: "k1", acceptPlaintext: true },
      invalid,
    );
    expect(decodeResult(null, migrating, record)).toBeUndefined();
    expect(decodeFailure("failed", null, migrating, record)).toMatchObject({ message: "the tool failed" });
    // Without encryption nothing changes: undefined is stored as no value.
    expect(encodeResult(undefined, 100)).toEqual({ ok: true, text: null });
    expect(decodeResult(null)).toBeUndefined();
  });

  it("seals the note on a result that was not kept, and refuses one that is not sealed for this record", () => {
    const codec = resolveCodec(undefined, { keys: { k1 }, current: "k1" }, invalid);
    const encoded = encodeResult("x".repeat(50), 10, codec, record);
    if (encoded.ok) throw new Error("kept");
    expect(encoded.error).not.toContain("result_too_large");
    expect(decodeResultProblem(encoded.error, codec, record)).toEqual({
      code: "result_too_large",
      sizeBytes: 52,
      maxBytes: 10,
    });
    expect(() => decodeResultProblem(encoded.error, codec, { ...record, key: "other" })).toThrow(
      ResultUndecryptableError,
    );
    const forged = JSON.stringify({ code: "result_unserializable", reason: "forged" });
    expect(() => decodeResultProblem(forged, codec, record)).toThrow(
      expect.objectContaining({ reason: "not_sealed" }),
    );
    const migrating = resolveCodec(
      undefined,
      { keys: { k1 }, current: "k1", acceptPlaintext: true },
      invalid,
    );
    expect(decodeResultProblem(forged, migrating, record)).toMatchObject({ reason: "forged" });
    // Without encryption the note stays plain JSON, as before.
    const plain = encodeResult("x".repeat(50), 10);
    if (plain.ok) throw new Error("kept");
    expect(decodeResultProblem(plain.error)).toMatchObject({ code: "result_too_large" });
  });

  it("opens a v1 value, bound to no record, only while acceptUnboundV1 is true (the default)", () => {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", k1, iv, { authTagLength: 16 });
    cipher.setAAD(Buffer.from("k1", "utf8"));
    const body = Buffer.concat([cipher.update('{"id":"ch_old"}', "utf8"), cipher.final()]);
    const parts = [iv, cipher.getAuthTag(), body].map((bytes) => bytes.toString("base64url"));
    const v1 = `idempotool:aes-256-gcm:v1:k1:${parts.join(":")}`;
    for (const acceptUnboundV1 of [undefined, true]) {
      const codec = resolveCodec(undefined, { keys: { k1 }, current: "k1", acceptUnboundV1 }, invalid);
      expect(decodeResult(v1, codec, record)).toEqual({ id: "ch_old" });
    }
    const strict = resolveCodec(undefined, { keys: { k1 }, current: "k1", acceptUnboundV1: false }, invalid);
    expect(() => decodeResult(v1, strict, record)).toThrow(
      expect.objectContaining({ reason: "unbound_v1", keyId: "k1" }),
    );
    expect(() => decodeFailure("failed", v1, strict, record)).toThrow(
      expect.objectContaining({ reason: "unbound_v1" }),
    );
    // What it does not touch: v2 values keep opening.
    expect(decodeResult(stored("new", strict), strict, record)).toBe("new");
  });

  it("validates the options at configuration time, naming the option", () => {
    expect(() => resolveCodec(undefined, { keys: { k1: randomBytes(16) }, current: "k1" }, invalid)).toThrow(
      /encryption.keys.k1/,
    );
    expect(() => resolveCodec(undefined, { keys: { k1 }, current: "k9" }, invalid)).toThrow(
      /encryption.current/,
    );
    expect(() => resolveCodec(undefined, { keys: { "a:b": k1 }, current: "a:b" }, invalid)).toThrow(/key id/);
    expect(() => resolveCodec(["card..number"], undefined, invalid)).toThrow(/redact/);
    expect(() =>
      resolveCodec(undefined, { keys: { k1 }, current: "k1", acceptUnboundV1: "no" as never }, invalid),
    ).toThrow(/encryption.acceptUnboundV1/);
    expect(resolveCodec(undefined, undefined, invalid)).toBeUndefined();
  });
});

describe("a failure over the size limit", () => {
  const bytes = (text: string) => Buffer.byteLength(text, "utf8");
  const declined = Object.assign(new Error("card declined"), { name: "CardError", code: "card_declined" });
  /** Data that makes the plain stored failure exactly `size` bytes. */
  const dataFor = (size: number) => {
    const base = bytes(
      JSON.stringify({ name: "CardError", message: "card declined", code: "card_declined", data: "" }),
    );
    return "x".repeat(size - base);
  };

  it("keeps a failure of exactly the limit with its data", () => {
    const text = encodeFailure("failed", declined, dataFor(1000), 1000);
    expect(bytes(text)).toBe(1000);
    expect(decodeFailure("failed", text)).toEqual({
      name: "CardError",
      message: "card declined",
      code: "card_declined",
      data: dataFor(1000),
    });
  });

  it("drops the data one byte over, keeping name, message and code and saying why, in the fields older readers read", () => {
    const text = encodeFailure("failed", declined, dataFor(1001), 1000);
    const note = { code: "result_too_large", sizeBytes: 1001, maxBytes: 1000 };
    expect(JSON.parse(text)).toEqual({
      name: "CardError",
      message: "card declined",
      code: "card_declined",
      dataNotKept: note,
    });
    expect(decodeFailure("failed", text)).toEqual({
      name: "CardError",
      message: "card declined",
      code: "card_declined",
      dataNotKept: note,
    });
  });

  it("counts bytes, not characters", () => {
    const data = "€".repeat(400); // 400 characters, 1,200 bytes
    const text = encodeFailure("failed", declined, data, 1000);
    expect(decodeFailure("failed", text)).toMatchObject({ dataNotKept: { maxBytes: 1000 } });
    expect(decodeFailure("failed", text).data).toBeUndefined();
    expect(decodeFailure("failed", encodeFailure("failed", declined, data, 2000)).data).toBe(data);
  });

  it("bounds by the store's limit where it is lower than maxResultBytes, and by maxResultBytes where that is", () => {
    const data = dataFor(1001);
    for (const [maxBytes, storeMaxBytes] of [
      [1000, 5000],
      [5000, 1000],
    ] as const) {
      const failure = decodeFailure(
        "failed",
        encodeFailure("failed", declined, data, maxBytes, undefined, undefined, storeMaxBytes),
      );
      expect(failure.dataNotKept).toEqual({ code: "result_too_large", sizeBytes: 1001, maxBytes: 1000 });
    }
    const kept = encodeFailure("failed", declined, data, 1001, undefined, undefined, 1001);
    expect(decodeFailure("failed", kept).data).toBe(data);
  });

  it("measures the sealed text with encryption, which is larger than the failure", () => {
    const codec = resolveCodec(undefined, { keys: { k1 }, current: "k1" }, invalid);
    const text = encodeFailure("failed", declined, dataFor(900), 1000, codec, record);
    expect(bytes(text)).toBeLessThanOrEqual(1000);
    const failure = decodeFailure("failed", text, codec, record);
    expect(failure).toMatchObject({ name: "CardError", message: "card declined", code: "card_declined" });
    expect(failure.data).toBeUndefined();
    expect(failure.dataNotKept).toMatchObject({ code: "result_too_large", maxBytes: 1000 });
    expect(failure.dataNotKept).toHaveProperty("sizeBytes", expect.any(Number));
    expect((failure.dataNotKept as { sizeBytes: number }).sizeBytes).toBeGreaterThan(1000);
  });

  it("cuts a message too large even without the data, with a marker, keeping name and code", () => {
    const codec = resolveCodec(undefined, { keys: { k1 }, current: "k1" }, invalid);
    const messages = ["m".repeat(50_000), "€".repeat(20_000), "😀".repeat(20_000), `a${"😀".repeat(20_000)}`];
    for (const message of messages) {
      const error = Object.assign(new Error(message), { code: 402 });
      for (const [sealWith, binding] of [
        [undefined, undefined],
        [codec, record],
      ] as const) {
        const text = encodeFailure("failed", error, { big: message }, 4000, sealWith, binding, 5000);
        expect(bytes(text)).toBeLessThanOrEqual(4000);
        const failure = decodeFailure("failed", text, sealWith, binding);
        expect(failure).toMatchObject({
          name: "Error",
          code: 402,
          dataNotKept: { code: "result_too_large" },
        });
        const [kept, marker] = failure.message.split("…");
        expect(marker).toBe(" [message cut short to fit the 4000-byte limit]");
        expect(message.startsWith(kept ?? "")).toBe(true);
        // The longest start that fits: one more character (four bytes at most, sealed a few more) would not.
        expect(bytes(text)).toBeGreaterThan(4000 - 12);
        if (sealWith === undefined && message.startsWith("m")) expect(bytes(text)).toBe(4000);
        expect(kept).not.toMatch(/[\uD800-\uDBFF]$/);
      }
    }
  });

  it("keeps a message that fits exactly whole, and cuts one a byte longer", () => {
    const base = bytes(JSON.stringify({ name: "Error", message: "" }));
    const fitting = "m".repeat(1000 - base);
    expect(
      decodeFailure("failed", encodeFailure("failed", new Error(fitting), undefined, 1000)).message,
    ).toBe(fitting);
    const over = decodeFailure("failed", encodeFailure("failed", new Error(`${fitting}m`), undefined, 1000));
    expect(over.message).toMatch(/^m+… \[message cut short/);
  });

  it("keeps what it can of a failure whose name alone is over the limit, rather than nothing", () => {
    const error = Object.assign(new Error("declined"), { name: "N".repeat(2000) });
    const failure = decodeFailure("failed", encodeFailure("failed", error, undefined, 1000));
    expect(failure).toEqual({
      name: "N".repeat(2000),
      message: "… [message cut short to fit the 1000-byte limit]",
    });
  });

  it("keeps a thrown value that is no Error as an Error with its text, and only a string or number code", () => {
    expect(decodeFailure("failed", encodeFailure("failed", "plain text", undefined, 1000))).toEqual({
      name: "Error",
      message: "plain text",
    });
    expect(decodeFailure("failed", encodeFailure("failed", null, undefined, 1000))).toEqual({
      name: "Error",
      message: "null",
    });
    const odd = Object.assign(new Error("x"), { code: { nested: true } });
    expect(decodeFailure("failed", encodeFailure("failed", odd, undefined, 1000))).toEqual({
      name: "Error",
      message: "x",
    });
    expect(decodeResultProblem(null)).toBeUndefined();
  });

  it("cuts the message of an unknown outcome too, which keeps no data", () => {
    const text = encodeFailure("unknown", new Error("t".repeat(10_000)), undefined, 1000);
    expect(bytes(text)).toBeLessThanOrEqual(1000);
    const failure = decodeFailure("unknown", text);
    expect(failure.message).toMatch(/^t+… \[message cut short to fit the 1000-byte limit\]$/);
    expect(failure.dataNotKept).toBeUndefined();
  });

  it("notes data that has no JSON form, rather than losing the failure", () => {
    const cyclic: { self?: unknown } = {};
    cyclic.self = cyclic;
    const failure = decodeFailure("failed", encodeFailure("failed", declined, cyclic, 1000));
    expect(failure).toMatchObject({ name: "CardError", code: "card_declined" });
    expect(failure.data).toBeUndefined();
    expect(failure.dataNotKept).toMatchObject({ code: "result_unserializable" });
  });

  it("decodes a failure stored before the note existed, and ignores a note that is not one", () => {
    const old = JSON.stringify({ name: "CardError", message: "card declined", code: "card_declined" });
    expect(decodeFailure("failed", old)).toEqual({
      name: "CardError",
      message: "card declined",
      code: "card_declined",
    });
    const odd = JSON.stringify({ name: "E", message: "m", dataNotKept: { code: "other" } });
    expect(decodeFailure("failed", odd)).toEqual({ name: "E", message: "m" });
  });
});
