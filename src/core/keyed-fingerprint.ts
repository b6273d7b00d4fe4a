/**
 * Keyed fingerprints: HMAC-SHA-256 of the canonical JSON of the arguments under a secret, so a store
 * dump does not let anyone test guesses of arguments with little entropy (a 6-digit code, an amount).
 * A keyed fingerprint names the key it was made with (`hmac-sha256:<keyId>:<hex>`), so a record made
 * before a key rotation still matches its repeats afterwards; a plain one (a record written before keys
 * were configured) still matches its plain SHA-256.
 * @module
 */
import { Buffer } from "node:buffer";
import { createHmac, hkdfSync } from "node:crypto";
import type { Call } from "./call.js";
import { type CanonicalJsonOptions, canonicalJson } from "./canonical-json.js";
import { ResultUndecryptableError } from "./errors.js";
import { fingerprint } from "./fingerprint.js";
import type { InvalidOption } from "./option-checks.js";

/** Secrets that key stored fingerprints, by id; new records use `current`. */
export interface FingerprintKeyOptions {
  /** Secrets of at least 32 bytes by key id (letters, digits, `_`, `-`, `.`; at most 64 characters). */
  readonly keys: Readonly<Record<string, Uint8Array>>;
  /** The key id new records are fingerprinted with. */
  readonly current: string;
}

export interface ResolvedFingerprintKeys {
  /** HMAC keys by key id. */
  readonly keys: ReadonlyMap<string, Uint8Array>;
  readonly current: string;
}

const keyedPrefix = "hmac-sha256:";
const keyIdPattern = /^[A-Za-z0-9_.-]{1,64}$/;
/** Separates the fingerprint key derived from an encryption key from the key itself. */
const derivationLabel = "idempotool fingerprint v1";

/** The fingerprint a new record carries: keyed under the current key when keys are configured. */
export function fingerprintWith(
  keys: ResolvedFingerprintKeys | undefined,
  value: unknown,
  options?: CanonicalJsonOptions,
): string {
  if (keys === undefined) return fingerprint(value, options);
  return keyedFingerprint(keys, keys.current, canonicalJson(value, options))!;
}

/**
 * Whether a stored fingerprint stands for `value`: the same text as `print` (its fingerprint under the
 * current key), or its fingerprint under the configured key the stored one names, or, for a plain
 * stored fingerprint, its unkeyed SHA-256. A stored fingerprint made under a key that is not
 * configured throws `ResultUndecryptableError`: whether the arguments match cannot be told.
 */
export function fingerprintMatches(
  keys: ResolvedFingerprintKeys | undefined,
  stored: string,
  print: string,
  value: unknown,
  options?: CanonicalJsonOptions,
): boolean {
  if (stored === print) return true;
  if (stored.startsWith(keyedPrefix)) {
    const keyId = stored.slice(keyedPrefix.length, stored.indexOf(":", keyedPrefix.length));
    if (keys === undefined) throw new ResultUndecryptableError("no_encryption_configured", keyId);
    if (!keys.keys.has(keyId)) throw new ResultUndecryptableError("unknown_key_id", keyId);
    return keyedFingerprint(keys, keyId, canonicalJson(value, options)) === stored;
  }
  // Written before keys were configured: it leaks what it always did, and a value sealed for another
  // record still does not open here, so matching it costs nothing in integrity.
  return keys !== undefined && fingerprint(value, options) === stored;
}

/**
 * Whether the record's fingerprint stands for this call's arguments. The first comparison is the whole
 * cost on the common path; the rest runs only on a mismatch (a rotated key, or a real conflict).
 */
export function sameFingerprint<A, R>(c: Call<A, R>, stored: string): boolean {
  if (stored === c.fingerprint) return true;
  const keys = c.o.codec?.fingerprintKeys;
  if (keys === undefined && !stored.startsWith(keyedPrefix)) return false;
  const value = c.o.significant ? c.o.significant(c.args) : c.args;
  return fingerprintMatches(keys, stored, c.fingerprint, value, { bigint: c.o.bigint });
}

function keyedFingerprint(
  keys: ResolvedFingerprintKeys,
  keyId: string,
  canonical: string,
): string | undefined {
  const key = keys.keys.get(keyId);
  if (key === undefined) return undefined;
  return `${keyedPrefix}${keyId}:${createHmac("sha256", key).update(canonical, "utf8").digest("hex")}`;
}

/**
 * Validate `fingerprintKeys`, or derive the keys from the encryption keys (HKDF-SHA-256, one per
 * encryption key id) when it is not given and encryption is. `false` keeps plain SHA-256 fingerprints.
 */
export function resolveFingerprintKeys(
  option: FingerprintKeyOptions | false | undefined,
  encryption: { readonly keys: ReadonlyMap<string, Uint8Array>; readonly current: string } | undefined,
  invalid: InvalidOption,
): ResolvedFingerprintKeys | undefined {
  if (option === false) return undefined;
  if (option === undefined) {
    if (encryption === undefined) return undefined;
    const keys = new Map<string, Uint8Array>();
    for (const [keyId, key] of encryption.keys) {
      keys.set(keyId, Buffer.from(hkdfSync("sha256", key, new Uint8Array(0), derivationLabel, 32)));
    }
    return { keys, current: encryption.current };
  }
  if (typeof option !== "object" || option === null || typeof option.keys !== "object") {
    invalid(
      "fingerprintKeys",
      "must be { keys: { [keyId]: secret of 32 bytes or more }, current: keyId } or false",
    );
  }
  const keys = new Map<string, Uint8Array>();
  for (const [keyId, key] of Object.entries(option.keys)) {
    if (!keyIdPattern.test(keyId)) {
      invalid(
        `fingerprintKeys.keys.${keyId}`,
        "has an invalid key id: use letters, digits, _, - or . (at most 64)",
      );
    }
    if (!(key instanceof Uint8Array) || key.length < 32) {
      invalid(
        `fingerprintKeys.keys.${keyId}`,
        "must be a secret of at least 32 bytes, e.g. crypto.randomBytes(32)",
      );
    }
    keys.set(keyId, Buffer.from(key));
  }
  if (typeof option.current !== "string" || !keys.has(option.current)) {
    invalid("fingerprintKeys.current", "must name one of fingerprintKeys.keys");
  }
  return { keys, current: option.current };
}
