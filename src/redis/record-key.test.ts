import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { encodePart, globLiteral, parseRecordName, recordName } from "./record-key.js";

// Any UTF-16 string, lone surrogates included, 1–40 code units (scopes and keys are never empty).
const part = fc.string({ unit: "binary", minLength: 1, maxLength: 40 });
const awkwardPart = fc.string({
  unit: fc.constantFrom(":", "{", "}", "%", "*", "?", "[", "]", "\\", " ", "a", "3", "A", "\ud800", "\udc00"),
  minLength: 1,
  maxLength: 12,
});
const anyPart = fc.oneof(part, awkwardPart);

describe("record key names", () => {
  it("read back as the (scope, key) they were written for", () => {
    fc.assert(
      fc.property(anyPart, anyPart, (scope, key) => {
        expect(parseRecordName("p:", recordName("p:", scope, key))).toEqual({ scope, key });
      }),
      { numRuns: 2_000 },
    );
  });

  it("never collide: two different pairs get two different names", () => {
    fc.assert(
      fc.property(anyPart, anyPart, anyPart, anyPart, (s1, k1, s2, k2) => {
        fc.pre(s1 !== s2 || k1 !== k2);
        expect(recordName("p:", s1, k1)).not.toBe(recordName("p:", s2, k2));
      }),
      { numRuns: 2_000 },
    );
    expect(recordName("p:", "ab", "c")).not.toBe(recordName("p:", "a", "bc"));
  });

  it("hold exactly one ':' after the prefix, no hash tag, glob, ASCII space or control character, and valid UTF-16", () => {
    fc.assert(
      fc.property(anyPart, anyPart, (scope, key) => {
        const rest = recordName("p:", scope, key).slice(2);
        expect(rest.split(":")).toHaveLength(2);
        expect(rest).not.toMatch(/[{}*?[\]\\]/);
        expect(
          [...rest].every((char) => char.charCodeAt(0) > 0x20 && char !== "\x7f"),
          "ASCII space or control",
        ).toBe(true);
        expect(rest, "lone surrogate").not.toMatch(/\p{Cs}/u);
      }),
      { numRuns: 2_000 },
    );
  });

  it("keep key prefixes: a key starts with p exactly when its encoding starts with p's", () => {
    // A prefix ending in a high surrogate can split a pair the key encodes whole; list narrows without it.
    const endsInHighSurrogate = (text: string) => /[\uD800-\uDBFF]$/.test(text);
    fc.assert(
      fc.property(
        anyPart,
        anyPart.filter((p) => !endsInHighSurrogate(p)),
        (key, keyPrefix) => {
          expect(encodePart(key).startsWith(encodePart(keyPrefix))).toBe(key.startsWith(keyPrefix));
        },
      ),
      { numRuns: 2_000 },
    );
  });

  it("refuse names this codec did not write for this prefix", () => {
    expect(parseRecordName("p:", "q:a:b")).toBeUndefined();
    expect(parseRecordName("p:", "p:a:b:c")).toBeUndefined();
    expect(parseRecordName("p:", "p:a")).toBeUndefined();
    expect(parseRecordName("p:", "p::b")).toBeUndefined();
    // Not how "A" is written, so not one of ours.
    expect(parseRecordName("p:", "p:%41:b")).toBeUndefined();
    expect(parseRecordName("p:", "p:%3A:b")).toEqual({ scope: ":", key: "b" });
  });

  it("escape a prefix for SCAN's MATCH", () => {
    expect(globLiteral("app[1]*?\\:")).toBe("app\\[1\\]\\*\\?\\\\:");
  });
});
