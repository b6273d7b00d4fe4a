/**
 * Idempotency keys: the checks a caller's key and scope pass before the store or the tool is touched (bad
 * input gets a typed error and no side effect), the prefixes idempotool keeps for its own records, and the
 * helpers that derive one key per logical operation (docs/keys.md).
 * @module
 */
import { canonicalJson } from "./canonical-json.js";
import { ErrorCode, IdempotencyError } from "./errors.js";
import { fingerprint, sha256Hex } from "./fingerprint.js";
import { fingerprintWith, type ResolvedFingerprintKeys } from "./keyed-fingerprint.js";
import { loneSurrogateIndex } from "./option-checks.js";

/** The longest key: a caller's, or one the helpers accept or make (derived keys are far shorter). */
const maxKeyLength = 255;

/**
 * Every key of a saga's compensation record starts with this; a caller's key may not, so no call's record
 * can sit where a compensation goes (to block it, or to be replayed as its outcome).
 */
export const compensationKeyPrefix = "~compensation~";

/**
 * Every near-duplicate marker's key starts with this; a caller's key may not, so no call's record can sit
 * where a marker goes.
 */
export const similarMarkerPrefix = "~similar~";

/**
 * Every key idempotool derives for a call that came without one (`withoutKey`) starts with this; a
 * caller's key may not, so no caller's record can sit where such a call's goes, or take its short window.
 */
export const argumentsKeyPrefix = "~args~";

/**
 * The key of a call made without one: its tool and its arguments. Plaintext in every store, so with
 * fingerprint keys it is made from the keyed fingerprint (a dump cannot test guesses of the arguments).
 */
export function argumentsKey(
  tool: string,
  args: unknown,
  bigint: "reject" | "string",
  fingerprintKeys?: ResolvedFingerprintKeys,
): string {
  return derivedKey(argumentsKeyPrefix, tool, args, bigint, fingerprintKeys);
}

// Call options whose key idempotool derives from the arguments. A set, as for compensation calls below.
const keyedByArgumentsCalls = new WeakSet<object>();

/**
 * Mark call options as a call keyed by its tool and arguments (`withoutKey`): `idempotent()` derives its
 * key, and ignores the one given. No entry point exports it, so no caller can make one.
 */
export function keyedByArguments<C extends object>(call: C): C {
  keyedByArgumentsCalls.add(call);
  return call;
}

/** Whether these call options are keyed by their arguments ({@link keyedByArguments}). */
export function isKeyedByArguments(call: object): boolean {
  return keyedByArgumentsCalls.has(call);
}

/**
 * Where the near-duplicate marker for these similar fields lives (similar.ts reads and writes it). Its name
 * is a record key, plaintext in every store: with fingerprint keys it is made from the keyed fingerprint, so
 * a dump cannot test guesses of the fields (after a key rotation, markers made under the old key are simply
 * not found: a lost hint).
 */
export function similarMarkerKey(
  tool: string,
  args: unknown,
  bigint: "reject" | "string",
  fingerprintKeys?: ResolvedFingerprintKeys,
): string {
  return derivedKey(similarMarkerPrefix, tool, args, bigint, fingerprintKeys);
}

/** A key of idempotool's own: its prefix, then a hash of the tool and the (keyed) fingerprint of `args`. */
function derivedKey(
  prefix: string,
  tool: string,
  args: unknown,
  bigint: "reject" | "string",
  fingerprintKeys: ResolvedFingerprintKeys | undefined,
): string {
  const print = fingerprintWith(fingerprintKeys, args, { bigint });
  return `${prefix}${sha256Hex(`${tool}\u0000${print}`)}`;
}

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
  if (key.startsWith(argumentsKeyPrefix))
    throw reserved(tool, argumentsKeyPrefix, "calls made without a key");
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

/**
 * Reuse the key kept in agent state for `toolName`, or make one and write it into the state (OP-6).
 *
 * The key lives in `state[`${toolName}_idempotency_key`]`, so every repeat that sees the same state uses
 * the same key. A field that is absent, `undefined` or `null` means "no key yet": one is created (with
 * `crypto.randomUUID()` unless `create` is given), written into `state` and returned.
 *
 * Pitfall: the key is only as durable as the state. Persist (checkpoint) the state *before* the
 * side effect; a crash or a resume from a checkpoint taken earlier finds no key, mints a new one and
 * runs the effect again. In LangGraph, create the key in a node that runs (and is checkpointed)
 * before the node that calls the tool, and never inside the tool itself.
 *
 * @throws IdempotencyError `idempotency_key_invalid` if the field holds anything but a non-empty string
 *   of at most 255 characters (or `create` returns one), `invalid_arguments` for an empty `toolName`.
 * @example
 * import { keys } from "idempotool";
 *
 * const state: Record<string, unknown> = { thread: "t-42" };
 * const key = keys.fromState(state, "send_email"); // creates and stores state.send_email_idempotency_key
 * // ... checkpoint `state` here, then call the tool with `key` ...
 * keys.fromState(state, "send_email") === key; // true: a repeat reuses it
 */
function fromState(
  state: Record<string, unknown>,
  toolName: string,
  create: () => string = () => crypto.randomUUID(),
): string {
  if (typeof state !== "object" || state === null) {
    throw new IdempotencyError("invalid_arguments", "keys.fromState needs the agent state object.");
  }
  requireText(toolName, "keys.fromState", "toolName");
  const field = `${toolName}_idempotency_key`;
  const stored = state[field];
  if (stored !== undefined && stored !== null) return requireKey(stored, `state.${field}`);
  const key = requireKey(create(), "The key returned by keys.fromState's create()");
  state[field] = key;
  return key;
}

/**
 * A key from several identifying parts, such as thread id, node id and the call's arguments: the same
 * parts give the same key (`composite_` and 64 hex characters, SHA-256 of their canonical JSON).
 *
 * Meant for framework nodes whose body re-runs (LangGraph re-runs a node from the top on every resume).
 * Include the arguments: `(thread, node, run)` alone does not survive a thread resume that re-enters the
 * node under a new run, and a key that does not change with the arguments makes a corrected call a
 * conflict (Case 3 in docs/operation-models.md). Never include a time (`Date.now()`): time-based keys
 * guarantee duplicates.
 *
 * @throws IdempotencyError `invalid_arguments` for zero parts or a part that is not JSON data.
 * @example
 * import { keys } from "idempotool";
 *
 * const args = { to: "alice@example.com", subject: "Summary" };
 * const key = keys.composite("thread-42", "send_summary", args);
 */
function composite(...parts: unknown[]): string {
  if (parts.length === 0) {
    throw new IdempotencyError(
      "invalid_arguments",
      "keys.composite needs at least one part (e.g. thread id, node id and the arguments).",
    );
  }
  return `composite_${fingerprint(parts, { path: "parts" })}`;
}

/**
 * A key per intent, not per content (Case 2 in docs/operation-models.md): the same turn and intent fields
 * (say recipient and subject) give the same key (`intent_` and 64 hex characters).
 *
 * A duplicate emission within one turn collides and becomes a replay; the user asking again in a new
 * turn is a new intent, a new key and a new send. Pick the fields that name *what* is intended, not the
 * wording: too fine (the body) lets a rephrased duplicate through; too coarse (user, intent and day) blocks
 * a legitimate second send. Name the action in the fields when two tools could share them
 * (`{ action: "send_email", to }`), since one key in one scope names one operation.
 *
 * @throws IdempotencyError `invalid_arguments` for an empty `turnId` or `fields` that are not a plain object of JSON data.
 * @example
 * import { keys } from "idempotool";
 *
 * const key = keys.intent("turn-7", { action: "send_email", to: "alice@example.com", subject: "Summary" });
 */
function intent(turnId: string, fields: Record<string, unknown>): string {
  requireText(turnId, "keys.intent", "turnId");
  if (typeof fields !== "object" || fields === null || Array.isArray(fields)) {
    throw new IdempotencyError(
      "invalid_arguments",
      "keys.intent needs its intent fields as an object, e.g. { to, subject }.",
    );
  }
  // The canonical JSON of [turnId, fields], written in two parts so an error names `fields.to`, not `[1].to`.
  const text = `[${canonicalJson(turnId, { path: "turnId" })},${canonicalJson(fields, { path: "fields" })}]`;
  return `intent_${sha256Hex(text)}`;
}

/**
 * A key from the content itself (`content_` and 64 hex characters, SHA-256 of its canonical JSON), for
 * content-addressed writes (OP-3): storing the same artifact twice is the same write.
 *
 * Pitfall: equal content is not the same intent. Keyed by content, "send the same message again
 * tomorrow" is blocked as a repeat; for messages and other effects a user may want twice, use
 * {@link intent}.
 *
 * @throws IdempotencyError `invalid_arguments` if the content is not JSON data (see `canonicalJson`).
 * @example
 * import { keys } from "idempotool";
 *
 * const key = keys.content({ path: "reports/q3.md", body: "# Q3\n..." });
 */
function content(value: unknown): string {
  return `content_${fingerprint(value, { path: "content" })}`;
}

/**
 * Helpers that make one key per logical operation, deterministic across every repeat of it.
 *
 * - {@link fromState}: a random key kept in agent state (the default for one-shot operations);
 * - {@link composite}: a hash of identifying parts, for framework nodes that re-run;
 * - {@link intent}: a hash of the turn and the intent's fields, for effects a user may want twice;
 * - {@link content}: a hash of the content, for content-addressed writes.
 *
 * Two rules hold for all of them. Never derive a key from time (`Date.now()`, "today"): a repeat a
 * second later gets a new key, so time-based keys guarantee duplicates. Never make the key inside the
 * tool: a retry calls the tool again and would mint a new key; the caller makes it, before the call.
 * @example
 * import { keys } from "idempotool";
 *
 * const key = keys.intent("turn-7", { action: "send_email", to: "alice@example.com" });
 */
export const keys = { fromState, composite, intent, content } as const;

function requireText(value: unknown, helper: string, name: string): void {
  if (typeof value !== "string" || value.length === 0) {
    throw new IdempotencyError(
      "invalid_arguments",
      `${helper} needs ${name} as a non-empty string, got ${describe(value)}.`,
    );
  }
}

function requireKey(value: unknown, where: string): string {
  if (typeof value === "string" && value.length > 0 && value.length <= maxKeyLength) return value;
  // A string refused here is empty or too long.
  const problem =
    typeof value === "string" && value !== ""
      ? `${value.length} characters long, over the ${maxKeyLength}-character limit`
      : describe(value);
  throw new IdempotencyError(
    "idempotency_key_invalid",
    `${where} must be a non-empty string of at most ${maxKeyLength} characters, but is ${problem}.`,
  );
}

/** What a refused value is, in words; the one string that reaches here is the empty one. */
function describe(value: unknown): string {
  if (value === "") return "an empty string";
  if (value === null || value === undefined) return String(value);
  const kind = Array.isArray(value) ? "array" : typeof value;
  return kind === "array" || kind === "object" ? `an ${kind}` : `a ${kind}`;
}
