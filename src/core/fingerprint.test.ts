import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isIdempotencyError } from "./errors.js";
import { fingerprint, sha256Hex } from "./fingerprint.js";

const args = { to: "alice@example.com", subject: "Hi", n: 1, cc: ["bob@example.com"] };

describe("fingerprint", () => {
  it("is the SHA-256 hex of the canonical JSON (checked against sha256sum)", () => {
    // printf '%s' '{"cc":["bob@example.com"],"n":1,"subject":"Hi","to":"alice@example.com"}' | sha256sum
    expect(fingerprint(args)).toBe("4a5d9157e8e2f3dfd683d94df21c42859f5743f556f8819bc9a039abc0b34811");
  });

  it("hashes strings as UTF-8 (checked against sha256sum)", () => {
    // printf '%s' '{"greeting":"Grüße €😀"}' | sha256sum
    expect(fingerprint({ greeting: "Grüße €😀" })).toBe(
      "bc35874f9186d9555d3d90547ce3e5c73246d8e0067982ae0f73217e5216e85b",
    );
  });

  it("is equal across key order, at every level", () => {
    expect(fingerprint({ cc: ["bob@example.com"], n: 1, subject: "Hi", to: "alice@example.com" })).toBe(
      fingerprint(args),
    );
    expect(fingerprint({ outer: { b: 1, a: { y: 2, x: 3 } } })).toBe(
      fingerprint({ outer: { a: { x: 3, y: 2 }, b: 1 } }),
    );
  });

  it.each<[string, unknown]>([
    ["a changed top-level value", { ...args, subject: "Hello" }],
    ["a changed nested value", { ...args, cc: ["carol@example.com"] }],
    ["a reordered array", { ...args, cc: ["bob@example.com", "carol@example.com"].reverse() }],
    ["an extra array element", { ...args, cc: ["bob@example.com", "bob@example.com"] }],
    ["a number become a string", { ...args, n: "1" }],
    ["a number become a boolean", { ...args, n: true }],
    ["a value become null", { ...args, n: null }],
    ["a missing field", { to: args.to, subject: args.subject, cc: args.cc }],
    ["an extra field", { ...args, bcc: [] }],
    ["an empty array become an empty object", { ...args, cc: {} }],
  ])("changes with %s", (_, changed) => {
    expect(fingerprint(changed)).not.toBe(fingerprint(args));
  });

  it("tells null from a missing field, and a missing field equals an undefined one", () => {
    expect(fingerprint({ a: 1, b: null })).not.toBe(fingerprint({ a: 1 }));
    expect(fingerprint({ a: 1, b: undefined })).toBe(fingerprint({ a: 1 }));
  });

  it("tells 1 from '1' at the top level and in arrays", () => {
    expect(fingerprint(1)).not.toBe(fingerprint("1"));
    expect(fingerprint([1])).not.toBe(fingerprint(["1"]));
  });

  it("is 64 lowercase hex characters for any JSON value", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(fingerprint(value)).toMatch(/^[0-9a-f]{64}$/);
      }),
    );
  });

  it("passes the bigint option through", () => {
    expect(fingerprint({ amount: 5n }, { bigint: "string" })).toBe(fingerprint({ amount: "5" }));
    let caught: unknown;
    try {
      fingerprint({ amount: 5n });
    } catch (error) {
      caught = error;
    }
    expect(isIdempotencyError(caught, "invalid_arguments")).toBe(true);
  });
});

describe("sha256Hex", () => {
  it("matches the standard digests", () => {
    expect(sha256Hex("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    expect(sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });
});
