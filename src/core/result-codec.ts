/**
 * Results at rest: redaction of named result fields and authenticated encryption of what a store
 * keeps, so a store dump shows neither card numbers nor tokens, and a sealed value opens only in the
 * record it was sealed for. See docs/results-at-rest.md.
 */
import { Buffer } from "node:buffer";
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { ResultUndecryptableError } from "./errors.js";
import {
  type FingerprintKeyOptions,
  type ResolvedFingerprintKeys,
  resolveFingerprintKeys,
} from "./keyed-fingerprint.js";
import type { InvalidOption } from "./option-checks.js";

export { ResultUndecryptableError, type UndecryptableReason } from "./errors.js";

/** What a redacted field is stored as. */
export const redactedValue = "[redacted]";

/** How stored results, failures and fingerprints are transformed on their way to the store and back. */
export interface ResultCodec {
  /** Dotted paths, each split into its segments. */
  readonly redact: readonly (readonly string[])[];
  readonly encryption: ResolvedEncryption | undefined;
  /** Secrets stored fingerprints are keyed with; undefined keeps plain SHA-256 fingerprints. */
  readonly fingerprintKeys: ResolvedFingerprintKeys | undefined;
}

/** Keys by id; new records use `current`, old ones are opened by the key id they carry. */
export interface EncryptionOptions {
  /** 32-byte AES-256 keys by key id (letters, digits, `_`, `-`, `.`; at most 64 characters). */
  readonly keys: Readonly<Record<string, Uint8Array>>;
  /** The key id new records are sealed with. */
  readonly current: string;
  /**
   * Only while migrating a store that holds records written before `encryption` was configured: also
   * replay stored results and failures that are not sealed, and a completed record that keeps no result
   * as `undefined`. Default false: an unsealed value or an empty result is refused
   * (`ResultUndecryptableError`, reason `not_sealed`), since anyone who can write the store could have
   * put it there.
   */
  readonly acceptPlaintext?: boolean | undefined;
  /**
   * Also open values sealed by earlier builds in the `v1` envelope, which names no record: anyone who
   * can write the store can copy one into another record of the same key id, and it opens there.
   * Default true, so records sealed before an upgrade still replay. Set it to false once every record
   * sealed by an earlier build has expired (or retire the key ids those builds sealed with): then a `v1`
   * value is refused (`ResultUndecryptableError`, reason `unbound_v1`).
   */
  readonly acceptUnboundV1?: boolean | undefined;
}

export interface ResolvedEncryption {
  readonly keys: ReadonlyMap<string, Uint8Array>;
  readonly current: string;
  readonly acceptPlaintext: boolean;
  readonly acceptUnboundV1: boolean;
}

/**
 * The record a sealed value belongs to. It is authenticated with the value, so a value copied under
 * another key, into another scope, to another tool or to other arguments does not open there.
 */
export interface RecordBinding {
  readonly scope: string;
  readonly key: string;
  readonly tool: string;
  /** The fingerprint the record carries. */
  readonly fingerprint: string;
}

/**
 * Which of a record's fields a sealed value was written to, and for a failure under which status: a
 * result never opens as a failure, a note on why a result was not kept never opens as either, and the
 * error an unknown outcome keeps never opens as a definitive failure (a record whose status was flipped
 * from unknown to failed would otherwise replay "it failed" for a call that may have succeeded).
 */
export type SealedField = "result" | "result-problem" | "failure:failed" | "failure:unknown";

// Not valid JSON, so a sealed value can never be mistaken for a plaintext result, and vice versa.
const envelopePrefix = "idempotool:";
const algorithmPrefix = "idempotool:aes-256-gcm:";
/** v1 authenticates the key id only; it is still opened (while `acceptUnboundV1`), never written. */
const v1 = "v1";
/** v2 authenticates the key id, the field (a failure's with its status) and the record it belongs to. */
const v2 = "v2";
const keyIdPattern = /^[A-Za-z0-9_.-]{1,64}$/;
const ivBytes = 12;
const tagBytes = 16;

/** Whether a stored string claims to be a sealed envelope (a plaintext JSON value never starts so). */
export function isSealed(text: string): boolean {
  return text.startsWith(envelopePrefix);
}

/**
 * Seal a stored string with the current key: AES-256-GCM, a random 12-byte IV, and as additional
 * authenticated data the envelope version, the key id, the field and the record it belongs to.
 * Format: `idempotool:aes-256-gcm:v2:<kid>:<iv>:<tag>:<ciphertext>` (base64url).
 */
export function seal(
  text: string,
  encryption: ResolvedEncryption,
  field: SealedField,
  record: RecordBinding | undefined,
): string {
  // Every caller that configures encryption passes the record; an unbound seal would be a silent downgrade.
  if (record === undefined) throw new TypeError("idempotool: a sealed value needs the record it belongs to");
  const keyId = encryption.current;
  const key = encryption.keys.get(keyId);
  if (key === undefined) throw new ResultUndecryptableError("unknown_key_id", keyId);
  const iv = randomBytes(ivBytes);
  const cipher = createCipheriv("aes-256-gcm", key, iv, { authTagLength: tagBytes });
  cipher.setAAD(v2Aad(keyId, field, record));
  const body = Buffer.concat([cipher.update(text, "utf8"), cipher.final()]);
  const tag = cipher.getAuthTag();
  return `${algorithmPrefix}${v2}:${keyId}:${b64(iv)}:${b64(tag)}:${b64(body)}`;
}

/**
 * Open a stored string. Without `encryption`, plaintext passes through and a sealed value is refused;
 * with it, a sealed value must open for this field of this record, plaintext passes only with
 * `acceptPlaintext`, and a `v1` value only with `acceptUnboundV1`. Throws
 * {@link ResultUndecryptableError}, never returns garbage.
 */
export function open(
  text: string,
  encryption: ResolvedEncryption | undefined,
  field: SealedField,
  record: RecordBinding | undefined,
): string {
  if (!isSealed(text)) {
    if (encryption === undefined || encryption.acceptPlaintext) return text;
    throw new ResultUndecryptableError("not_sealed", undefined);
  }
  const parts = text.slice(algorithmPrefix.length).split(":");
  const [version, keyId, iv, tag, body] = parts;
  if (
    !text.startsWith(algorithmPrefix) ||
    parts.length !== 5 ||
    (version !== v1 && version !== v2) ||
    keyId === undefined ||
    iv === undefined ||
    tag === undefined ||
    body === undefined ||
    !keyIdPattern.test(keyId)
  ) {
    throw new ResultUndecryptableError("malformed", undefined);
  }
  if (encryption === undefined) throw new ResultUndecryptableError("no_encryption_configured", keyId);
  if (version === v1 && !encryption.acceptUnboundV1) throw new ResultUndecryptableError("unbound_v1", keyId);
  const key = encryption.keys.get(keyId);
  if (key === undefined) throw new ResultUndecryptableError("unknown_key_id", keyId);
  const ivBuffer = strictBase64url(iv);
  const tagBuffer = strictBase64url(tag);
  const bodyBuffer = strictBase64url(body);
  if (
    ivBuffer?.length !== ivBytes ||
    tagBuffer?.length !== tagBytes ||
    bodyBuffer === undefined ||
    (version === v2 && record === undefined)
  ) {
    throw new ResultUndecryptableError("malformed", keyId);
  }
  const aad = version === v1 ? Buffer.from(keyId, "utf8") : v2Aad(keyId, field, record!);
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, ivBuffer, { authTagLength: tagBytes });
    decipher.setAAD(aad);
    decipher.setAuthTag(tagBuffer);
    return Buffer.concat([decipher.update(bodyBuffer), decipher.final()]).toString("utf8");
  } catch (error) {
    throw new ResultUndecryptableError("authentication_failed", keyId, { cause: error });
  }
}

/** One unambiguous encoding of what a v2 envelope authenticates (a JSON array of strings). */
function v2Aad(keyId: string, field: SealedField, record: RecordBinding): Buffer {
  return Buffer.from(
    JSON.stringify([v2, keyId, field, record.scope, record.key, record.tool, record.fingerprint]),
    "utf8",
  );
}

/**
 * base64url that decodes and re-encodes to itself: Node's decoder skips characters outside the alphabet
 * and ignores the spare bits of the last character, so a changed character could otherwise go unseen.
 */
function strictBase64url(text: string): Buffer | undefined {
  const bytes = Buffer.from(text, "base64url");
  return b64(bytes) === text ? bytes : undefined;
}

function b64(bytes: Buffer): string {
  return bytes.toString("base64url");
}

/**
 * Replace the named fields of a JSON value with `"[redacted]"`. A path walks objects by name and
 * every element of an array it meets (`"items.card.number"`). Absent paths are ignored.
 * The value is the parsed copy about to be stored, never the caller's object.
 */
export function redactPaths(value: unknown, paths: readonly (readonly string[])[]): unknown {
  for (const path of paths) redactOne(value, path, 0);
  return value;
}

function redactOne(node: unknown, path: readonly string[], depth: number): void {
  if (Array.isArray(node)) {
    for (const element of node) redactOne(element, path, depth);
    return;
  }
  if (typeof node !== "object" || node === null) return;
  const segment = path[depth];
  if (segment === undefined || !Object.hasOwn(node, segment)) return;
  const record = node as Record<string, unknown>;
  if (depth === path.length - 1) record[segment] = redactedValue;
  else redactOne(record[segment], path, depth + 1);
}

/**
 * Validate `redact`, `encryption` and `fingerprintKeys`, naming the option at fault, and build the codec.
 * Returns undefined when none applies (results are stored as plain JSON, fingerprints as plain SHA-256).
 */
export function resolveCodec(
  redact: readonly string[] | undefined,
  encryption: EncryptionOptions | undefined,
  invalid: InvalidOption,
  fingerprintKeys?: FingerprintKeyOptions | false,
): ResultCodec | undefined {
  if (redact === undefined && encryption === undefined && (fingerprintKeys ?? false) === false) {
    return undefined;
  }
  const sealing = encryption === undefined ? undefined : resolveEncryption(encryption, invalid);
  return {
    redact: redactionPaths(redact, invalid),
    encryption: sealing,
    fingerprintKeys: resolveFingerprintKeys(fingerprintKeys, sealing, invalid),
  };
}

/** Validate `redact` (dotted field paths) and split each path into its segments. */
export function redactionPaths(redact: readonly string[] | undefined, invalid: InvalidOption): string[][] {
  const paths: string[][] = [];
  if (redact === undefined) return paths;
  if (!Array.isArray(redact)) invalid("redact", 'must be an array of dotted field paths ("card.number")');
  for (const path of redact) {
    const segments = typeof path === "string" ? path.split(".") : [];
    if (segments.length === 0 || segments.some((segment) => segment === "")) {
      invalid(
        "redact",
        `has an invalid path ${JSON.stringify(path)}: use dotted field names ("card.number")`,
      );
    }
    paths.push(segments);
  }
  return paths;
}

function resolveEncryption(encryption: EncryptionOptions, invalid: InvalidOption): ResolvedEncryption {
  if (typeof encryption !== "object" || encryption === null || typeof encryption.keys !== "object") {
    invalid(
      "encryption",
      "must be { keys: { [keyId]: 32-byte key }, current: keyId, acceptPlaintext?: boolean, acceptUnboundV1?: boolean }",
    );
  }
  const keys = new Map<string, Uint8Array>();
  for (const [keyId, key] of Object.entries(encryption.keys)) {
    if (!keyIdPattern.test(keyId)) {
      invalid(
        `encryption.keys.${keyId}`,
        "has an invalid key id: use letters, digits, _, - or . (at most 64)",
      );
    }
    if (!(key instanceof Uint8Array) || key.length !== 32) {
      invalid(`encryption.keys.${keyId}`, "must be a 32-byte key (AES-256), e.g. crypto.randomBytes(32)");
    }
    keys.set(keyId, Buffer.from(key));
  }
  if (typeof encryption.current !== "string" || !keys.has(encryption.current)) {
    invalid("encryption.current", "must name one of encryption.keys");
  }
  if (encryption.acceptPlaintext !== undefined && typeof encryption.acceptPlaintext !== "boolean") {
    invalid("encryption.acceptPlaintext", "must be a boolean");
  }
  if (encryption.acceptUnboundV1 !== undefined && typeof encryption.acceptUnboundV1 !== "boolean") {
    invalid("encryption.acceptUnboundV1", "must be a boolean");
  }
  return {
    keys,
    current: encryption.current,
    acceptPlaintext: encryption.acceptPlaintext ?? false,
    acceptUnboundV1: encryption.acceptUnboundV1 ?? true,
  };
}
