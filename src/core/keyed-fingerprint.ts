/**
 * Keyed fingerprints: HMAC-SHA-256 of the canonical JSON of the arguments under a secret, so a store
 * dump does not let anyone test guesses of arguments with little entropy (a 6-digit code, an amount).
 * A keyed fingerprint names the key it was made with and carries that key's check value
 * (`hmac-sha256:<keyId>:<check>:<hex>`): a record made before a key rotation still matches its repeats
 * afterwards, and a reader whose key of that id has other bytes is told its key is wrong, not that the
 * arguments changed. A plain one (a record written before keys were configured) still matches its plain
 * SHA-256.
 * @module
 */
import { Buffer } from "node:buffer";
import { createHmac, hkdfSync } from "node:crypto";
import type { Call } from "./call.js";
import { type CanonicalJsonOptions, canonicalJson } from "./canonical-json.js";
import { ResultUndecryptableError, type UndecryptableReason } from "./errors.js";
import { fingerprint } from "./fingerprint.js";
import type { InvalidOption } from "./option-checks.js";
import type { ResultCodec } from "./result-codec.js";

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
  /** Each key's check value (see {@link keyCheck}), by key id. */
  readonly checks: ReadonlyMap<string, string>;
  readonly current: string;
}

const keyedPrefix = "hmac-sha256:";
const keyIdPattern = /^[A-Za-z0-9_.-]{1,64}$/;
/** Separates the fingerprint key derived from an encryption key from the key itself. */
const derivationLabel = "idempotool fingerprint v1";
/**
 * The fixed text a key's check value is the MAC of. It is not canonical JSON (which starts with `{`, `[`,
 * `"`, a digit, `-`, `t`, `f` or `n`), so no arguments and no HTTP request print ever have it as their MAC.
 */
const checkLabel = "idempotool fingerprint key check v1";
/** Hex characters of a check value kept: 64 bits, so another key's check matches by chance 1 in 2^64. */
const checkHexLength = 16;
const checkPattern = /^[0-9a-f]{16}$/;
const macPattern = /^[0-9a-f]{64}$/;

/** The fingerprint a new record carries: keyed under the current key when keys are configured. */
export function fingerprintWith(
  keys: ResolvedFingerprintKeys | undefined,
  value: unknown,
  options?: CanonicalJsonOptions,
): string {
  if (keys === undefined) return fingerprint(value, options);
  const keyId = keys.current;
  const mac = hmacHex(keys.keys.get(keyId)!, canonicalJson(value, options));
  return `${keyedPrefix}${keyId}:${keys.checks.get(keyId)!}:${mac}`;
}

/**
 * Whether a stored fingerprint stands for `value`: the same text as `print` (its fingerprint under the
 * current key), or its fingerprint under the configured key the stored one names, or, for a plain
 * stored fingerprint, its unkeyed SHA-256.
 *
 * A keyed fingerprint that cannot be compared throws `ResultUndecryptableError`, never a conflict: made
 * under a key id that is not configured (`unknown_key_id`; `no_encryption_configured` when no key is), or
 * under a configured key id whose bytes differ from this process's, which its check value tells
 * (`authentication_failed`). Only a fingerprint whose check value is this key's, and whose MAC differs,
 * means other arguments. A keyed fingerprint of an earlier build carries no check value: it matches as
 * before, and a mismatch stays a conflict (a wrong key cannot be told from other arguments there).
 */
export function fingerprintMatches(
  codec: ResultCodec | undefined,
  stored: string,
  print: string,
  value: unknown,
  options?: CanonicalJsonOptions,
): boolean {
  if (stored === print) return true;
  const keys = codec?.fingerprintKeys;
  if (!stored.startsWith(keyedPrefix)) {
    // Written before keys were configured: it leaks what it always did, and a value sealed for another
    // record still does not open here, so matching it costs nothing in integrity.
    return keys !== undefined && fingerprint(value, options) === stored;
  }
  const parts = stored.slice(keyedPrefix.length).split(":");
  const keyId = parts[0]!;
  if (!keyIdPattern.test(keyId) || parts.length < 2 || parts.length > 3) throw malformed(undefined);
  const key = keys?.keys.get(keyId);
  if (keys === undefined || key === undefined) throw unusableKey(codec, keyId);
  const storedMac = parts.at(-1)!;
  // Two parts: written by an earlier build, with no check value. A mismatch there cannot tell a wrong key
  // from other arguments, so it stays a conflict, as it was (nothing runs, nothing is replayed).
  const check = parts.length === 3 ? parts[1]! : undefined;
  if (!macPattern.test(storedMac) || (check !== undefined && !checkPattern.test(check)))
    throw malformed(keyId);
  // Only a MAC made with this very key can match, so the check value decides which error a mismatch is,
  // never whether a record replays: a forged check turns a replay or a conflict into this error, nothing more.
  if (check !== undefined && check !== keys.checks.get(keyId)) {
    throw fingerprintError(
      "authentication_failed",
      keyId,
      `its fingerprint was made with other bytes for key "${keyId}" than the ones configured here (its key ` +
        "check value differs): this process's key, or that of the process that wrote the record, is wrong, or " +
        "the record was altered at rest. Whether the arguments match cannot be told",
      "fix the key, then retry with the same idempotency key (a new key would run the call again)",
    );
  }
  return storedMac === hmacHex(key, canonicalJson(value, options));
}

/**
 * Whether the record's fingerprint stands for this call's arguments. The first comparison is the whole
 * cost on the common path; the rest runs only on a mismatch (a rotated key, or a real conflict).
 */
export function sameFingerprint<A, R>(call: Call<A, R>, stored: string): boolean {
  if (stored === call.fingerprint) return true;
  const codec = call.options.codec;
  if (codec?.fingerprintKeys === undefined && !stored.startsWith(keyedPrefix)) return false;
  const value = call.options.significant ? call.options.significant(call.args) : call.args;
  return fingerprintMatches(codec, stored, call.fingerprint, value, { bigint: call.options.bigint });
}

/**
 * A key check value: the first 64 bits of the HMAC-SHA-256 of a fixed label under the fingerprint key. The
 * same for every record of the key, so it tells nothing of any arguments; a MAC, so it tells nothing of
 * the key either. It only lets a reader tell "made with other key bytes" from "made for other arguments".
 */
function keyCheck(key: Uint8Array): string {
  return hmacHex(key, checkLabel).slice(0, checkHexLength);
}

function hmacHex(key: Uint8Array, text: string): string {
  return createHmac("sha256", key).update(text, "utf8").digest("hex");
}

/** Why a stored keyed fingerprint names a key this process does not hold. */
function unusableKey(codec: ResultCodec | undefined, keyId: string): ResultUndecryptableError {
  const keep = "keep a key configured until every record fingerprinted under it has expired";
  if (codec?.fingerprintKeys !== undefined) {
    return fingerprintError(
      "unknown_key_id",
      keyId,
      `its fingerprint was made with key "${keyId}", which is not among the configured fingerprint keys, ` +
        "so whether the arguments match cannot be told",
      keep,
    );
  }
  if (codec?.encryption !== undefined) {
    return fingerprintError(
      "unknown_key_id",
      keyId,
      `its fingerprint was made with key "${keyId}", and \`fingerprintKeys: false\` configures no ` +
        "fingerprint key, so whether the arguments match cannot be told",
      `${keep} (do not set \`fingerprintKeys: false\` before then)`,
    );
  }
  return fingerprintError(
    "no_encryption_configured",
    keyId,
    `its fingerprint was made with key "${keyId}", but no \`encryption\` or \`fingerprintKeys\` option is ` +
      "configured, so whether the arguments match cannot be told",
    keep,
  );
}

function malformed(keyId: string | undefined): ResultUndecryptableError {
  return fingerprintError(
    "malformed",
    keyId,
    "its keyed fingerprint is not in the form idempotool writes (the record was altered at rest)",
    undefined,
  );
}

/**
 * A fingerprint that cannot be compared, told as what it is: not a conflict (the arguments may well be the
 * same), and nothing runs again (the call may have run) or is replayed.
 */
function fingerprintError(
  reason: UndecryptableReason,
  keyId: string | undefined,
  why: string,
  next: string | undefined,
): ResultUndecryptableError {
  const error = new ResultUndecryptableError(reason, keyId);
  error.message =
    `A stored idempotency record could not be compared with this call: ${why}. Nothing ran again and ` +
    `nothing was replayed${next === undefined ? "" : `: ${next}`}.`;
  return error;
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
    return withChecks(keys, encryption.current);
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
  return withChecks(keys, option.current);
}

function withChecks(keys: ReadonlyMap<string, Uint8Array>, current: string): ResolvedFingerprintKeys {
  const checks = new Map<string, string>();
  for (const [keyId, key] of keys) checks.set(keyId, keyCheck(key));
  return { keys, checks, current };
}
