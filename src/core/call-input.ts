/**
 * A call's key and scope, checked before the store or the tool is touched: bad input gets a typed error
 * and no side effect.
 */
import { ErrorCode, IdempotencyError } from "./errors.js";
import { similarMarkerPrefix } from "./similar.js";
import { loneSurrogateIndex } from "./unicode.js";

const maxKeyLength = 255;

/**
 * Check a caller's key: a string of 1–255 characters. A missing key is an error, never a fresh UUID.
 * @example
 * validateKey("turn-7-alice", "send_email"); // "turn-7-alice"
 */
export function validateKey(key: unknown, tool: string): string {
  if (key === undefined || key === null) {
    throw new IdempotencyError(
      ErrorCode.keyMissing,
      `${tool}: no idempotency key. Pass { key }, chosen by the caller before the call and stable across ` +
        "every repeat (see keys.fromState and keys.intent); idempotool never makes one up.",
    );
  }
  if (typeof key !== "string") {
    throw new IdempotencyError(
      ErrorCode.keyInvalid,
      `${tool}: the idempotency key must be a string, got ${typeof key}.`,
    );
  }
  if (key.length === 0 || key.length > maxKeyLength) {
    throw new IdempotencyError(
      ErrorCode.keyInvalid,
      `${tool}: the idempotency key must be 1–${maxKeyLength} characters, got ${key.length}.`,
    );
  }
  if (key.startsWith(similarMarkerPrefix)) {
    throw new IdempotencyError(
      ErrorCode.keyInvalid,
      `${tool}: idempotency keys starting with "${similarMarkerPrefix}" are reserved for idempotool's ` +
        "near-duplicate markers; choose another key.",
    );
  }
  const lone = loneSurrogateIndex(key);
  if (lone !== -1) {
    throw new IdempotencyError(
      ErrorCode.keyInvalid,
      `${tool}: the idempotency key has a lone UTF-16 surrogate at index ${lone} (a string cut in the middle ` +
        "of a character?). Stores keep it as U+FFFD, so two keys that differ only there would be one record.",
    );
  }
  return key;
}

export function validateScope(scope: unknown): string {
  if (scope === undefined) return "default";
  if (typeof scope !== "string" || scope.length === 0 || scope.length > maxKeyLength) {
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      `The scope must be a string of 1–${maxKeyLength} characters, got ${typeof scope === "string" ? `${scope.length} characters` : typeof scope}.`,
    );
  }
  const lone = loneSurrogateIndex(scope);
  if (lone !== -1) {
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      `The scope has a lone UTF-16 surrogate at index ${lone}: stores keep it as U+FFFD, so two scopes that ` +
        "differ only there would be one.",
    );
  }
  return scope;
}
