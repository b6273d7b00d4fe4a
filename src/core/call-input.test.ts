import { describe, expect, it } from "vitest";
import {
  compensationKeyPrefix,
  ownCompensationCall,
  validateCallKey,
  validateKey,
  validateScope,
} from "./call-input.js";
import { IdempotencyError } from "./errors.js";

function thrown(run: () => unknown): IdempotencyError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(IdempotencyError);
    return error as IdempotencyError;
  }
  throw new Error("expected a throw");
}

describe("validateKey", () => {
  it("returns the key it accepts", () => {
    expect(validateKey("turn-7-alice", "send_email")).toBe("turn-7-alice");
    expect(validateKey("k".repeat(255), "send_email")).toBe("k".repeat(255));
  });

  for (const key of [undefined, null]) {
    it(`calls a ${String(key)} key missing, and tells the caller to choose one that repeats with the call`, () => {
      const error = thrown(() => validateKey(key, "send_email"));
      expect(error.code).toBe("idempotency_key_missing");
      expect(error.message).toMatch(/^send_email: no idempotency key\. Pass \{ key \}/);
      expect(error.message).toContain("stable across every repeat (see keys.fromState and keys.intent)");
      expect(error.message).toContain("idempotool never makes one up");
    });
  }

  it("names the type of a key that is no string", () => {
    const error = thrown(() => validateKey(42, "send_email"));
    expect(error.code).toBe("idempotency_key_invalid");
    expect(error.message).toBe("send_email: the idempotency key must be a string, got number.");
  });

  it("names the allowed length and the key's own", () => {
    const error = thrown(() => validateKey("k".repeat(256), "send_email"));
    expect(error.code).toBe("idempotency_key_invalid");
    expect(error.message).toBe("send_email: the idempotency key must be 1–255 characters, got 256.");
  });

  it("says why a key cut in the middle of a character is refused", () => {
    const error = thrown(() => validateKey("order-\ud83d", "send_email"));
    expect(error.code).toBe("idempotency_key_invalid");
    expect(error.message).toContain("lone UTF-16 surrogate at index 6");
    expect(error.message).toContain(
      "Stores keep it as U+FFFD, so two keys that differ only there would be one record",
    );
  });

  it("refuses idempotool's reserved key spaces, naming each and asking for another key", () => {
    const marker = thrown(() => validateKey("~similar~abc", "send_email"));
    expect(marker.code).toBe("idempotency_key_invalid");
    expect(marker.message).toBe(
      'send_email: idempotency keys starting with "~similar~" are reserved for idempotool\'s near-duplicate markers; choose another key.',
    );
    const compensation = thrown(() => validateKey(`${compensationKeyPrefix}abc`, "send_email"));
    expect(compensation.message).toBe(
      'send_email: idempotency keys starting with "~compensation~" are reserved for idempotool\'s saga compensations; choose another key.',
    );
  });
});

describe("validateCallKey", () => {
  const key = `${compensationKeyPrefix}${"0".repeat(64)}`;

  it("lets idempotool's own compensation call use a compensation key, and nobody else", () => {
    const own = { key };
    expect(ownCompensationCall(own)).toBe(own);
    expect(validateCallKey(key, "refund", own)).toBe(key);
    expect(thrown(() => validateCallKey(key, "refund", { key })).code).toBe("idempotency_key_invalid");
  });

  it("still refuses a near-duplicate marker's key on idempotool's own call", () => {
    const own = ownCompensationCall({});
    expect(thrown(() => validateCallKey("~similar~abc", "refund", own)).code).toBe("idempotency_key_invalid");
  });
});

describe("validateScope", () => {
  it("defaults to the default scope and returns a scope it accepts", () => {
    expect(validateScope(undefined)).toBe("default");
    expect(validateScope("tenant-a")).toBe("tenant-a");
    expect(validateScope("s".repeat(255))).toBe("s".repeat(255));
  });

  const bad: [string, unknown, string][] = [
    ["empty", "", "got 0 characters"],
    ["over 255 characters", "s".repeat(256), "got 256 characters"],
    ["a number", 7, "got number"],
    ["null", null, "got object"],
  ];
  for (const [label, scope, got] of bad) {
    it(`refuses a scope that is ${label}, saying what a scope must be and what it got`, () => {
      const error = thrown(() => validateScope(scope));
      expect(error.code).toBe("invalid_arguments");
      expect(error.message).toBe(`The scope must be a string of 1–255 characters, ${got}.`);
    });
  }

  it("says where a scope's lone surrogate is and why it is refused", () => {
    const error = thrown(() => validateScope("tenant-\udc00"));
    expect(error.code).toBe("invalid_arguments");
    expect(error.message).toBe(
      "The scope has a lone UTF-16 surrogate at index 7: stores keep it as U+FFFD, so two scopes that differ only there would be one.",
    );
  });
});
