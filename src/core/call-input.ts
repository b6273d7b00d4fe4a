/**
 * A call's key and scope, checked before the store or the tool is touched: bad input gets a typed error
 * and no side effect.
 */
import { ErrorCode, IdempotencyError } from "./errors.js";
import { similarMarkerPrefix } from "./similar.js";
import { loneSurrogateIndex } from "./unicode.js";

const maxKeyLength = 255;

/**
 * Every key of a saga's compensation record starts with this; a caller's key may not, so no call's record
 * can sit where a compensation goes (to block it, or to be replayed as its outcome).
 */
export const compensationKeyPrefix = "~compensation~";

// The call options idempotool made for its own compensation calls. A set, not a flag on the object: no
// caller can forge membership (a Proxy answers any property, never this).
const ownCompensationCalls = new WeakSet<object>();

/**
 * Mark call options as idempotool's own call under a compensation key (a saga's compensation). No entry
 * point exports it, so no caller can make one.
 */
export function ownCompensationCall<C extends object>(call: C): C {
  ownCompensationCalls.add(call);
  return call;
}

/**
 * Check a caller's key: a string of 1–255 characters. A missing key is an error, never a fresh UUID.
 * @example
 * validateKey("turn-7-alice", "send_email"); // "turn-7-alice"
 */
export function validateKey(key: unknown, tool: string): string {
  return checkKey(key, tool, false);
}

/** {@link validateKey} for `idempotent()`'s calls: idempotool's own compensation call may use its key. */
export function validateCallKey(key: unknown, tool: string, call: object): string {
  return checkKey(key, tool, ownCompensationCalls.has(call));
}

function checkKey(key: unknown, tool: string, ownCompensation: boolean): string {
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
  if (key.startsWith(similarMarkerPrefix))
    throw reserved(tool, similarMarkerPrefix, "near-duplicate markers");
  if (key.startsWith(compensationKeyPrefix) && !ownCompensation) {
    throw reserved(tool, compensationKeyPrefix, "saga compensations");
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

function reserved(tool: string, prefix: string, what: string): IdempotencyError {
  return new IdempotencyError(
    ErrorCode.keyInvalid,
    `${tool}: idempotency keys starting with "${prefix}" are reserved for idempotool's ${what}; choose another key.`,
  );
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
