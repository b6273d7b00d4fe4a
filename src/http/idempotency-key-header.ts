/**
 * The `Idempotency-Key` header as draft-ietf-httpapi-idempotency-key-header defines it: an RFC 8941
 * Item whose value is an sf-string (`Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"`). Most
 * deployed APIs (Stripe among them) send the key bare, so a bare token is accepted too.
 */
import { ErrorCode, IdempotencyError } from "../core/errors.js";

/** The header names this module reads and writes. */
export const HttpHeader = {
  /** The request header carrying the key. */
  idempotencyKey: "Idempotency-Key",
  /** Set to `true` on a response the server replayed instead of running the request again (Stripe's name). */
  idempotentReplayed: "Idempotent-Replayed",
  retryAfter: "Retry-After",
} as const;
export type HttpHeader = (typeof HttpHeader)[keyof typeof HttpHeader];

/**
 * How a client writes the key: `"bare"` (`Idempotency-Key: order-42`, what Stripe and most APIs expect)
 * or `"sf-string"` (`Idempotency-Key: "order-42"`, the draft's form).
 */
export const KeyFormat = { bare: "bare", sfString: "sf-string" } as const;
export type KeyFormat = (typeof KeyFormat)[keyof typeof KeyFormat];

/** What {@link parseIdempotencyKey} made of a header value. */
export type ParsedIdempotencyKey =
  | { readonly ok: true; readonly key: string; readonly format: KeyFormat }
  | { readonly ok: false; readonly problem: string };

const maxKeyLength = 255;
// RFC 8941 §3.3.3: a string holds printable ASCII; only DQUOTE and backslash are escaped.
const sfStringAtStart = /^"((?:[\x20\x21\x23-\x5B\x5D-\x7E]|\\["\\])*)"/;
// RFC 8941 §3.1.2 parameters after the item: `;key` or `;key=bare-item`. The draft defines none; they are ignored.
const parameterAtStart =
  /^;\x20*[a-z*][a-z0-9_.*-]*(?:=(?:"(?:[\x20\x21\x23-\x5B\x5D-\x7E]|\\["\\])*"|-?\d{1,15}(?:\.\d{1,3})?|[A-Za-z*][\w!#$%&'*+.^`|~:/-]*|:[A-Za-z0-9+/=]*:|\?[01]))?/;
const bareKey = /^[\x21-\x7E]+$/;

/**
 * Read an `Idempotency-Key` header value: an sf-string (with optional parameters, which are ignored) or,
 * for compatibility, a bare run of visible ASCII characters. Two header lines (which arrive joined by
 * ", ") and keys over 255 characters are malformed.
 * @example
 * import { parseIdempotencyKey } from "idempotool/http";
 *
 * parseIdempotencyKey('"8e03978e-40d5-43e8-bc93-6894a57f9324"'); // { ok: true, key: "8e03978e-…", format: "sf-string" }
 * parseIdempotencyKey("order-42"); // { ok: true, key: "order-42", format: "bare" }
 * parseIdempotencyKey('"a", "b"'); // { ok: false, problem: "…" }
 */
export function parseIdempotencyKey(value: string): ParsedIdempotencyKey {
  const text = value.trim();
  if (text.startsWith('"')) {
    const match = sfStringAtStart.exec(text);
    if (!match) {
      return malformed(
        'is not a well-formed sf-string (printable ASCII in double quotes; escape only \\ and ")',
      );
    }
    let rest = text.slice(match[0].length);
    for (let parameter = parameterAtStart.exec(rest); parameter; parameter = parameterAtStart.exec(rest)) {
      rest = rest.slice(parameter[0].length);
    }
    if (rest !== "") {
      return malformed(
        "has text after the quoted key; send exactly one Idempotency-Key header holding one key",
      );
    }
    return checkLength(match[1]!.replace(/\\(["\\])/g, "$1"), KeyFormat.sfString);
  }
  if (!bareKey.test(text)) {
    return text === ""
      ? malformed("is empty")
      : malformed(
          "is neither an sf-string nor a bare token (visible ASCII without spaces); send exactly one key",
        );
  }
  return checkLength(text, KeyFormat.bare);
}

function checkLength(key: string, format: KeyFormat): ParsedIdempotencyKey {
  if (key.length === 0) return malformed("holds an empty key");
  if (key.length > maxKeyLength) {
    return malformed(`holds a key of ${key.length} characters; at most ${maxKeyLength} are accepted`);
  }
  return { ok: true, key, format };
}

function malformed(problem: string): ParsedIdempotencyKey {
  return { ok: false, problem: `The Idempotency-Key header ${problem}.` };
}

/**
 * Write `key` as an `Idempotency-Key` header value. Throws `idempotency_key_missing` for a missing key and
 * `idempotency_key_invalid` for one that is empty, over 255 characters, or not printable ASCII (a bare key
 * also may not contain spaces or start with a double quote).
 * @example
 * import { formatIdempotencyKey } from "idempotool/http";
 *
 * formatIdempotencyKey("order-42", "sf-string"); // '"order-42"'
 * formatIdempotencyKey("order-42", "bare"); // "order-42"
 */
export function formatIdempotencyKey(key: unknown, format: KeyFormat = KeyFormat.bare): string {
  if (key === undefined || key === null) {
    throw new IdempotencyError(
      ErrorCode.keyMissing,
      "No idempotency key. Pass { idempotencyKey }, chosen before the first attempt and kept for every retry " +
        "of this operation (see keys.fromState and keys.intent); idempotool never makes one up.",
    );
  }
  if (typeof key !== "string") {
    throw new IdempotencyError(
      ErrorCode.keyInvalid,
      `The idempotency key must be a string, got ${typeof key}.`,
    );
  }
  if (key.length === 0 || key.length > maxKeyLength) {
    throw new IdempotencyError(
      ErrorCode.keyInvalid,
      `The idempotency key must be 1–${maxKeyLength} characters, got ${key.length}.`,
    );
  }
  if (format === KeyFormat.sfString) {
    if (!/^[\x20-\x7E]+$/.test(key)) {
      throw new IdempotencyError(
        ErrorCode.keyInvalid,
        "An sf-string idempotency key holds printable ASCII only; hash longer or non-ASCII material into one (keys.intent).",
      );
    }
    return `"${key.replace(/["\\]/g, "\\$&")}"`;
  }
  if (format !== KeyFormat.bare) {
    throw new IdempotencyError(
      ErrorCode.invalidOptions,
      `keyFormat must be "bare" or "sf-string", got ${String(format)}.`,
    );
  }
  if (!bareKey.test(key) || key.startsWith('"')) {
    throw new IdempotencyError(
      ErrorCode.keyInvalid,
      'A bare idempotency key holds visible ASCII without spaces and does not start with a double quote; use keyFormat "sf-string" or another key.',
    );
  }
  return key;
}
