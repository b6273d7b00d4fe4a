import { describe, expect, it } from "vitest";
import { isIdempotencyError } from "./errors.js";
import { durationOption, loneSurrogateIndex, maxTimerMs, maxTtlMs, sizeOption } from "./option-checks.js";

function thrown(run: () => unknown): Error {
  try {
    run();
  } catch (error) {
    expect(isIdempotencyError(error, "invalid_options")).toBe(true);
    return error as Error;
  }
  throw new Error("expected invalid_options");
}

describe("option checks", () => {
  it("returns the fallback when the option is not given, and the value when it is in range", () => {
    expect(durationOption("api()", "leaseMs", undefined, 60_000)).toBe(60_000);
    expect(durationOption("api()", "leaseMs", undefined)).toBeUndefined();
    expect(durationOption("api()", "leaseMs", maxTimerMs, 60_000)).toBe(maxTimerMs);
    expect(durationOption("api()", "waitMs", 0, 10, { min: 0 })).toBe(0);
    expect(durationOption("api()", "ttlMs", maxTtlMs, 1, { max: maxTtlMs })).toBe(maxTtlMs);
    expect(sizeOption("api()", "maxRecords", Number.MAX_SAFE_INTEGER, 1)).toBe(Number.MAX_SAFE_INTEGER);
  });

  it("names the owner, the option, the range and the value it got", () => {
    expect(thrown(() => durationOption("redisStore()", "commandTimeoutMs", 2 ** 31, 5000)).message).toBe(
      `redisStore(): option \`commandTimeoutMs\` must be a whole number from 1 to ${maxTimerMs} (milliseconds), got ${2 ** 31}.`,
    );
    expect(thrown(() => sizeOption("memoryStore()", "maxRecords", "10", 1)).message).toBe(
      `memoryStore(): option \`maxRecords\` must be a whole number from 1 to ${Number.MAX_SAFE_INTEGER}, got "10".`,
    );
  });

  it("describes any value without throwing itself, a null-prototype object or a symbol included", () => {
    expect(thrown(() => durationOption("api()", "leaseMs", Object.create(null), 1)).message).toMatch(
      /got an object\.$/,
    );
    expect(thrown(() => durationOption("api()", "leaseMs", Symbol("ms"), 1)).message).toMatch(/got a symbol/);
    expect(thrown(() => durationOption("api()", "leaseMs", 10n, 1)).message).toMatch(/got 10\.$/);
  });

  it("keeps ten years plus the longest lease a date from any time this century", () => {
    expect(Number.isNaN(new Date(Date.UTC(2099, 11, 31) + maxTtlMs + maxTimerMs).getTime())).toBe(false);
  });
});

describe("loneSurrogateIndex", () => {
  it("finds the first lone surrogate, high or low, and passes pairs", () => {
    expect(loneSurrogateIndex("")).toBe(-1);
    expect(loneSurrogateIndex("plain ascii")).toBe(-1);
    expect(loneSurrogateIndex("é 漢字 \ud83d\ude00")).toBe(-1);
    expect(loneSurrogateIndex("\ud83d")).toBe(0);
    expect(loneSurrogateIndex("ab\ude00")).toBe(2);
    expect(loneSurrogateIndex("\ud83d\ude00x\ud83d")).toBe(3);
    expect(loneSurrogateIndex("\ude00\ud83d")).toBe(0);
    expect(loneSurrogateIndex("\ud83d\ud83d\ude00")).toBe(0);
  });
});
