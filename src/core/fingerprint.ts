/**
 * Fingerprints: SHA-256 of the RFC 8785 canonical JSON of a value, so equal arguments in any key order
 * match and any change in a value, a type or a field's presence does not.
 * @module
 */
import * as crypto from "node:crypto";
import { type CanonicalJsonOptions, canonicalJson } from "./canonical-json.js";

/**
 * SHA-256 (lowercase hex) of the canonical JSON of `value` (docs/concepts.md, "Fingerprints"). Throws an
 * `invalid_arguments` `IdempotencyError` for values JSON would change silently; see {@link canonicalJson}.
 * @example
 * import { fingerprint } from "idempotool";
 *
 * fingerprint({ to: "alice@example.com", subject: "Hi" }) === fingerprint({ subject: "Hi", to: "alice@example.com" }); // true
 */
export function fingerprint(value: unknown, options?: CanonicalJsonOptions): string {
  return sha256Hex(canonicalJson(value, options));
}

/**
 * SHA-256 (lowercase hex, 64 characters) of `text` encoded as UTF-8.
 * @example
 * import { sha256Hex } from "idempotool";
 *
 * sha256Hex(""); // "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
 */
export function sha256Hex(text: string): string {
  return sha256(text);
}

// The one-shot crypto.hash, cheaper than streaming, arrived in Node 20.12; earlier 20.x releases, which the
// package still supports, take the streaming path.
const sha256: (text: string) => string =
  typeof crypto.hash === "function"
    ? (text) => crypto.hash("sha256", text, "hex")
    : (text) => crypto.createHash("sha256").update(text, "utf8").digest("hex");
