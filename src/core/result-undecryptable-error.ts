/**
 * The error for a stored value that cannot be trusted with the keys given.
 * @module
 */
import { ErrorCode, IdempotencyError } from "./errors.js";

/** Why a stored value could not be opened. */
export type UndecryptableReason =
  | "no_encryption_configured"
  | "unknown_key_id"
  | "authentication_failed"
  | "malformed"
  | "not_sealed";

/**
 * A stored result or failure cannot be trusted with the keys given: a missing or wrong key, a value
 * altered at rest or moved from another record, or (with `encryption` configured) a value that is not
 * sealed at all. Never garbage: the caller gets this instead. A record fingerprinted under a key that is
 * not configured gets it too (`unknown_key_id`, `no_encryption_configured`): its arguments cannot be
 * compared, so it is neither replayed nor taken for a conflict.
 * Its code is `result_undecryptable` (500); `reason` says which of those it was.
 */
export class ResultUndecryptableError extends IdempotencyError {
  override name = "ResultUndecryptableError";
  readonly reason: UndecryptableReason;
  /** The key id the record names, when it could be read. */
  readonly keyId: string | undefined;
  constructor(reason: UndecryptableReason, keyId: string | undefined, options?: { cause?: unknown }) {
    super(
      ErrorCode.resultUndecryptable,
      `A stored idempotency record could not be decrypted: ${explain(reason, keyId)}.`,
      options,
    );
    this.reason = reason;
    this.keyId = keyId;
  }
}

function explain(reason: UndecryptableReason, keyId: string | undefined): string {
  switch (reason) {
    case "no_encryption_configured":
      return `it is sealed or fingerprinted with key "${keyId ?? "?"}" but no \`encryption\` (or \`fingerprintKeys\`) option is configured`;
    case "unknown_key_id":
      return `it is sealed or fingerprinted with key "${keyId ?? "?"}", which is not among the configured keys (keep old keys until their records expire)`;
    case "authentication_failed":
      return `key "${keyId ?? "?"}" does not open it: the key is wrong, or the value was altered at rest or moved from another record`;
    case "malformed":
      return "its envelope is malformed (the record was altered at rest)";
    case "not_sealed":
      return (
        "it is stored in plaintext while `encryption` is configured (the record was written before encryption " +
        "was turned on, or altered at rest); set `encryption.acceptPlaintext` only while migrating such a store"
      );
  }
}
