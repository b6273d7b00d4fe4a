import { describe, expect, it } from "vitest";
import { KeyConflictError } from "../src/core/errors.js";
import type { IdempotencyRecord } from "../src/core/store.js";
import { toolCallErrorOf } from "../src/tool-calls/tool-call-error.js";

const emailRecord: IdempotencyRecord = {
  scope: "default",
  key: "turn-7",
  tool: "send_email",
  fingerprint: "a".repeat(64),
  status: "completed",
  token: "t",
  createdAt: Date.parse("2026-01-01T09:00:00Z"),
  updatedAt: Date.parse("2026-01-01T09:00:00Z"),
  leaseExpiresAt: 0,
  expiresAt: Date.parse("2026-01-02T09:00:00Z"),
  attempts: 1,
  result: "{}",
  error: null,
};

describe("toolCallErrorOf on a conflict", () => {
  it("tells the model another tool holds the key, not that its own arguments changed", () => {
    const error = toolCallErrorOf(new KeyConflictError(emailRecord, "a".repeat(64), "send_sms"), "send_sms");
    expect(error.code).toBe("idempotency_key_conflict");
    expect(error.message).toContain("send_email");
    expect(error.message).not.toContain("different arguments");
  });

  it("still explains a conflict of arguments under the same tool as before", () => {
    const error = toolCallErrorOf(new KeyConflictError(emailRecord, "b".repeat(64)), "send_email");
    expect(error.message).toContain("different arguments");
  });
});
