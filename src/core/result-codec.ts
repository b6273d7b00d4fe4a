/**
 * Results at rest (DESIGN §7): redaction of named result fields and authenticated encryption of
 * what a store keeps, so a store dump shows neither card numbers nor tokens.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { ErrorCode, IdempotencyError } from "./errors.js";

/** What a redacted field is stored as. */
export const redactedValue = "[redacted]";

/** How stored results and failures are transformed on their way to the store and back. */
export interface ResultCodec {
  /** Dotted paths, each split into its segments. */
  readonly redact: readonly (readonly string[])[];
  readonly encryption: ResolvedEncryption | undefined;
}

/** Keys by id; new records use `current`, old ones are opened by the key id they carry. */
export interface EncryptionOptions {
  /** 32-byte AES-256 keys by key id (letters, digits, `_`, `-`, `.`; at most 64 characters). */
  readonly keys: Readonly<Record<string, Uint8Array>>;
  /** The key id new records are sealed with. */
  readonly current: string;
}

export interface ResolvedEncryption {
  readonly keys: ReadonlyMap<string, Uint8Array>;
  readonly current: string;
}

/** Why a sealed record could not be opened. */
export type UndecryptableReason =
  | "no_encryption_configured"
  | "unknown_key_id"
  | "authentication_failed"
  | "malformed";

/**
 * A stored result or failure was sealed, and it cannot be opened with the keys given: a missing or
 * wrong key, or a record altered at rest. Never garbage: the caller gets this instead.
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
      return `it is sealed with key "${keyId ?? "?"}" but no \`encryption\` option is configured`;
    case "unknown_key_id":
      return `it is sealed with key "${keyId ?? "?"}", which is not among the configured keys (keep old keys until their records expire)`;
    case "authentication_failed":
      return `key "${keyId ?? "?"}" does not open it: the key is wrong or the record was altered at rest`;
    case "malformed":
      return "its envelope is malformed (the record was altered at rest)";
  }
}

// Not valid JSON, so a sealed record can never be mistaken for a plaintext result, and vice versa.
const sealedPrefix = "idempotool:aes-256-gcm:v1:";
const keyIdPattern = /^[A-Za-z0-9_.-]{1,64}$/;
const ivBytes = 12;
const tagBytes = 16;

/** Whether a stored string is a sealed envelope. */
export function isSealed(text: string): boolean {
  return text.startsWith(sealedPrefix);
}

/**
 * Seal a stored string with the current key: AES-256-GCM, a random 12-byte IV, the key id bound as
 * additional authenticated data. Format: `idempotool:aes-256-gcm:v1:<kid>:<iv>:<tag>:<ciphertext>` (base64url).
 */
export function seal(text: string, encryption: ResolvedEncryption): string {
  const key = encryption.keys.get(encryption.current);
  if (key === undefined) throw new ResultUndecryptableError("unknown_key_id", encryption.current);
  const iv = randomBytes(ivBytes);
  const cipher = createCipheriv("aes-256-gcm", key, iv, { authTagLength: tagBytes });
  cipher.setAAD(Buffer.from(encryption.current, "utf8"));
  const body = Buffer.concat([cipher.update(text, "utf8"), cipher.final()]);
  const tag = cipher.getAuthTag();
  return `${sealedPrefix}${encryption.current}:${b64(iv)}:${b64(tag)}:${b64(body)}`;
}

/** Open a sealed string; plaintext passes through. Throws {@link ResultUndecryptableError}, never returns garbage. */
export function open(text: string, encryption: ResolvedEncryption | undefined): string {
  if (!isSealed(text)) return text;
  const parts = text.slice(sealedPrefix.length).split(":");
  const [keyId, iv, tag, body] = parts;
  if (
    parts.length !== 4 ||
    keyId === undefined ||
    iv === undefined ||
    tag === undefined ||
    body === undefined
  ) {
    throw new ResultUndecryptableError("malformed", undefined);
  }
  if (!keyIdPattern.test(keyId)) throw new ResultUndecryptableError("malformed", undefined);
  if (encryption === undefined) throw new ResultUndecryptableError("no_encryption_configured", keyId);
  const key = encryption.keys.get(keyId);
  if (key === undefined) throw new ResultUndecryptableError("unknown_key_id", keyId);
  const ivBuffer = Buffer.from(iv, "base64url");
  const tagBuffer = Buffer.from(tag, "base64url");
  if (ivBuffer.length !== ivBytes || tagBuffer.length !== tagBytes) {
    throw new ResultUndecryptableError("malformed", keyId);
  }
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, ivBuffer, { authTagLength: tagBytes });
    decipher.setAAD(Buffer.from(keyId, "utf8"));
    decipher.setAuthTag(tagBuffer);
    return Buffer.concat([decipher.update(Buffer.from(body, "base64url")), decipher.final()]).toString(
      "utf8",
    );
  } catch (error) {
    throw new ResultUndecryptableError("authentication_failed", keyId, { cause: error });
  }
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
 * Validate `redact` and `encryption`, naming the option at fault, and build the codec.
 * Returns undefined when neither is given (results are stored as plain JSON).
 */
export function resolveCodec(
  redact: readonly string[] | undefined,
  encryption: EncryptionOptions | undefined,
  invalid: (option: string, problem: string) => never,
): ResultCodec | undefined {
  if (redact === undefined && encryption === undefined) return undefined;
  const paths: string[][] = [];
  if (redact !== undefined) {
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
  }
  return {
    redact: paths,
    encryption: encryption === undefined ? undefined : resolveEncryption(encryption, invalid),
  };
}

function resolveEncryption(
  encryption: EncryptionOptions,
  invalid: (option: string, problem: string) => never,
): ResolvedEncryption {
  if (typeof encryption !== "object" || encryption === null || typeof encryption.keys !== "object") {
    invalid("encryption", "must be { keys: { [keyId]: 32-byte key }, current: keyId }");
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
  return { keys, current: encryption.current };
}
