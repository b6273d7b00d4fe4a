import { describe, expect, expectTypeOf, it } from "vitest";
import {
  ApprovalMismatchError,
  IdempotencyError,
  isIdempotencyError,
  KeyConflictError,
  KeyInUseError,
  LeaseLostError,
  OutcomeUnknownError,
  ResultTooLargeError,
  ResultUndecryptableError,
  ResultUnserializableError,
  retryAfterMsOf,
  StoreFullError,
} from "./errors.js";
import { claimedRecord, type IdempotencyRecord, RecordStatus } from "./store.js";

const record: IdempotencyRecord = {
  scope: "tenant-a",
  key: "order-1",
  tool: "send_email",
  fingerprint: "f".repeat(64),
  status: RecordStatus.unknown,
  token: "token-a",
  result: null,
  error: null,
  attempts: 1,
  createdAt: 1_767_225_600_000,
  updatedAt: 1_767_225_600_000,
  leaseExpiresAt: 1_767_225_660_000,
  expiresAt: 1_767_312_000_000,
};

describe("isIdempotencyError", () => {
  it("narrows a code to the class the core raises it with, so its fields are there", () => {
    const caught: unknown = new OutcomeUnknownError(record, "the tool threw");
    if (!isIdempotencyError(caught, "outcome_unknown")) throw new Error("expected outcome_unknown");
    expectTypeOf(caught).toEqualTypeOf<OutcomeUnknownError & { readonly code: "outcome_unknown" }>();
    expectTypeOf(caught.record).toEqualTypeOf<IdempotencyRecord>();
    expect(caught.record.key).toBe("order-1");

    const lost: unknown = new LeaseLostError("order-1");
    if (!isIdempotencyError(lost, "lease_lost")) throw new Error("expected lease_lost");
    expectTypeOf(lost.key).toEqualTypeOf<string>();
    expect(lost.key).toBe("order-1");
  });

  it("narrows every code that carries data to its class", () => {
    const cases = [
      ["idempotency_key_conflict", new KeyConflictError(record, "e".repeat(64))],
      ["idempotency_key_in_use", new KeyInUseError(record, 100, 900)],
      ["outcome_unknown", new OutcomeUnknownError(record, "crashed")],
      ["store_full", new StoreFullError(10)],
      ["result_too_large", new ResultTooLargeError(2_000, 1_000, record)],
      ["result_unserializable", new ResultUnserializableError(record, "a cycle")],
      ["result_undecryptable", new ResultUndecryptableError("unknown_key_id", "k9")],
      ["lease_lost", new LeaseLostError("order-1")],
    ] as const;
    for (const [code, error] of cases) {
      expect(isIdempotencyError(error, code), code).toBe(true);
      expect(isIdempotencyError(error), code).toBe(true);
      // Another error with the same code and none of the data is not taken for the class.
      expect(isIdempotencyError(new IdempotencyError(code, "foreign"), code), code).toBe(false);
    }
    const conflict: unknown = cases[0][1];
    if (isIdempotencyError(conflict, "idempotency_key_conflict")) {
      expectTypeOf(conflict.originalFingerprint).toEqualTypeOf<string>();
    }
    const inUse: unknown = cases[1][1];
    if (isIdempotencyError(inUse, "idempotency_key_in_use"))
      expectTypeOf(inUse.retryAfterMs).toEqualTypeOf<number>();
    const tooLarge: unknown = cases[4][1];
    if (isIdempotencyError(tooLarge, "result_too_large"))
      expectTypeOf(tooLarge.maxBytes).toEqualTypeOf<number>();
    const undecryptable: unknown = cases[6][1];
    if (isIdempotencyError(undecryptable, "result_undecryptable")) {
      expectTypeOf(undecryptable.keyId).toEqualTypeOf<string | undefined>();
      expect(undecryptable.reason).toBe("unknown_key_id");
    }
  });

  it("matches a code without data by the code alone, and any idempotool error without a code", () => {
    const down: unknown = new IdempotencyError("store_unavailable", "down");
    expect(isIdempotencyError(down, "store_unavailable")).toBe(true);
    expect(isIdempotencyError(down, "outcome_unknown")).toBe(false);
    if (isIdempotencyError(down)) expectTypeOf(down).toEqualTypeOf<IdempotencyError>();
    if (isIdempotencyError(down, "store_unavailable")) {
      expectTypeOf(down).toEqualTypeOf<IdempotencyError & { readonly code: "store_unavailable" }>();
    }
    expect(isIdempotencyError(new Error("store_unavailable"))).toBe(false);
  });

  it("takes an approval for other arguments for the conflict it is", () => {
    const mismatch: unknown = new ApprovalMismatchError({
      tool: "send_email",
      scope: "default",
      key: "k-1",
      approvedKey: "k-1",
      approvedFingerprint: "a".repeat(64),
      fingerprint: "b".repeat(64),
      requestedAt: "",
    });
    expect(mismatch).toBeInstanceOf(KeyConflictError);
    if (!isIdempotencyError(mismatch, "idempotency_key_conflict")) throw new Error("expected a conflict");
    expect(mismatch.originalFingerprint).toBe("a".repeat(64));
    expect(mismatch.originalTool).toBe("send_email");
    expect(mismatch.message).toContain("An approval covers exactly the arguments it was shown");
  });
});

describe("retryAfterMsOf", () => {
  const claim = { scope: "s", key: "k", tool: "t", fingerprint: "f", token: "o", ttlMs: 60_000 };

  it("is the time until the holder's lease passes, whether that is 134 ms or 42 s away", () => {
    expect(retryAfterMsOf(claimedRecord({ ...claim, leaseMs: 1_000, now: 0 }, 0), 866)).toBe(134);
    expect(retryAfterMsOf(claimedRecord({ ...claim, leaseMs: 45_000, now: 0 }, 0), 3_000)).toBe(42_000);
  });

  it("is at least 100 ms, and never more than the holder's lease when its clock ran ahead of ours", () => {
    expect(retryAfterMsOf(claimedRecord({ ...claim, leaseMs: 1_000, now: 0 }, 0), 999)).toBe(100);
    // A writer 30 s ahead: its lease looks 75 s away to us, but it took only 45 s.
    expect(retryAfterMsOf(claimedRecord({ ...claim, leaseMs: 45_000, now: 30_000 }, 30_000), 0)).toBe(45_000);
  });
});
