/**
 * The Idempotency-Key header (an RFC 8941 sf-string per the draft, or a bare token), Retry-After, and
 * the key helpers for SDKs.
 */
import { describe, expect, it } from "vitest";
import {
  formatIdempotencyKey,
  idempotencyKeyHeader,
  parseIdempotencyKey,
  parseRetryAfter,
  withIdempotencyKey,
} from "../src/http/index.js";
import { backoffMs, resolveRetry } from "../src/http/retry-policy.js";
import { isIdempotencyError } from "../src/index.js";

describe("parseIdempotencyKey", () => {
  it("reads the draft's sf-string form", () => {
    expect(parseIdempotencyKey('"8e03978e-40d5-43e8-bc93-6894a57f9324"')).toEqual({
      ok: true,
      key: "8e03978e-40d5-43e8-bc93-6894a57f9324",
      format: "sf-string",
    });
  });

  it('unescapes \\" and \\\\ and keeps spaces inside the quotes', () => {
    expect(parseIdempotencyKey('"a \\"quoted\\" \\\\ key"')).toMatchObject({
      ok: true,
      key: 'a "quoted" \\ key',
    });
  });

  it("ignores RFC 8941 parameters after the string, and surrounding whitespace", () => {
    expect(parseIdempotencyKey('  "k-1";v=2;exp=?1  ')).toMatchObject({ ok: true, key: "k-1" });
  });

  it("accepts a bare token for compatibility with Stripe-style clients", () => {
    expect(parseIdempotencyKey("KG5LxwFBepaKHyUD")).toEqual({
      ok: true,
      key: "KG5LxwFBepaKHyUD",
      format: "bare",
    });
  });

  it.each([
    ['"a", "b"', "two header lines joined"],
    ["a, b", "two bare keys joined"],
    ['"unterminated', "an unterminated string"],
    ['"bad\\n"', "an escape RFC 8941 does not allow"],
    ['""', "an empty string"],
    ["", "an empty value"],
    ["has space", "a bare key with a space"],
    ['"é"', "a non-ASCII character"],
    [`"${"k".repeat(256)}"`, "a key over 255 characters"],
  ])("refuses %j (%s)", (value) => {
    const parsed = parseIdempotencyKey(value);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.problem).toMatch(/^The Idempotency-Key header/);
  });
});

describe("formatIdempotencyKey", () => {
  it("writes bare by default and as an sf-string on request, escaping quotes and backslashes", () => {
    expect(formatIdempotencyKey("order-42")).toBe("order-42");
    expect(formatIdempotencyKey('say "hi"\\', "sf-string")).toBe('"say \\"hi\\"\\\\"');
    expect(parseIdempotencyKey(formatIdempotencyKey('say "hi"\\', "sf-string"))).toMatchObject({
      key: 'say "hi"\\',
    });
  });

  it("throws idempotency_key_missing for no key, never inventing one", () => {
    for (const missing of [undefined, null]) {
      expect(() => formatIdempotencyKey(missing)).toThrowError(
        expect.objectContaining({ code: "idempotency_key_missing" }),
      );
    }
  });

  it("throws idempotency_key_invalid for keys a header cannot carry", () => {
    for (const [key, format] of [
      ["", "bare"],
      ["k".repeat(256), "bare"],
      ["with space", "bare"],
      ['"quoted', "bare"],
      ["naïve", "sf-string"],
      ["line\nbreak", "sf-string"],
    ] as const) {
      try {
        formatIdempotencyKey(key, format);
        expect.unreachable(`${JSON.stringify(key)} should be refused`);
      } catch (error) {
        expect(isIdempotencyError(error, "idempotency_key_invalid"), JSON.stringify(key)).toBe(true);
      }
    }
  });
});

describe("key helpers for SDKs", () => {
  it("withIdempotencyKey gives the request option Stripe's and Stainless SDKs take", () => {
    expect(withIdempotencyKey("checkout-7f3a")).toEqual({ idempotencyKey: "checkout-7f3a" });
    expect(() => withIdempotencyKey(undefined as unknown as string)).toThrowError(
      expect.objectContaining({ code: "idempotency_key_missing" }),
    );
  });

  it("idempotencyKeyHeader gives the header, bare or as an sf-string", () => {
    expect(idempotencyKeyHeader("order-42")).toEqual({ "Idempotency-Key": "order-42" });
    expect(idempotencyKeyHeader("order-42", "sf-string")).toEqual({ "Idempotency-Key": '"order-42"' });
  });
});

describe("Retry-After and backoff", () => {
  const now = Date.parse("2026-10-21T07:27:58Z");

  it("reads delay-seconds and HTTP dates, never a negative wait", () => {
    expect(parseRetryAfter("3", now)).toBe(3_000);
    expect(parseRetryAfter("0", now)).toBe(0);
    expect(parseRetryAfter("Wed, 21 Oct 2026 07:28:00 GMT", now)).toBe(2_000);
    expect(parseRetryAfter("Wed, 21 Oct 2026 07:00:00 GMT", now)).toBe(0);
    expect(parseRetryAfter(null, now)).toBeUndefined();
    expect(parseRetryAfter("soon", now)).toBeUndefined();
    expect(parseRetryAfter("1.5", now)).toBeUndefined();
  });

  it("doubles the backoff up to its cap, with jitter between half and all of it", () => {
    const policy = resolveRetry({ initialDelayMs: 100, maxDelayMs: 1_000 });
    expect([1, 2, 3, 4, 5, 6].map((n) => backoffMs(policy, n, () => 0))).toEqual([
      50, 100, 200, 400, 500, 500,
    ]);
    expect([1, 2, 3, 4, 5].map((n) => backoffMs(policy, n, () => 1))).toEqual([100, 200, 400, 800, 1_000]);
  });

  it("names the retry option at fault", () => {
    expect(() => resolveRetry({ maxAttempts: 0 })).toThrow(/retry\.maxAttempts/);
    expect(() => resolveRetry({ timeoutMs: 1.5 })).toThrow(/retry\.timeoutMs/);
  });
});
