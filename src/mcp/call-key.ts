import { ErrorCode, IdempotencyError } from "../core/errors.js";
import { keyRequiredMessage } from "./key-description.js";
import { isObject } from "./mcp-types.js";

/** The argument a guarded tool takes its key in (the same name `registerIdempotentTool` adds). */
const argumentField = "idempotency_key";

const maxKeyLength = 255;

/**
 * Where else a client may put the key: in the request's `_meta`, for clients that keep it out of the
 * model's arguments. Both spellings servers use today are read by default.
 */
export const metaKeyFields = ["idempotency_key", "idempotencyKey"] as const;

/** Where a call's key may come from. */
export interface KeySources {
  /** Read the `idempotency_key` argument. */
  readonly argument: boolean;
  /** The `_meta` fields read; none when empty. */
  readonly metaFields: readonly string[];
}

/** The argument and both `_meta` spellings: what the proxy reads, and `registerIdempotentTool` by default. */
export const everyKeySource: KeySources = { argument: true, metaFields: metaKeyFields };

/** A `tools/call` request's key, and its arguments and `_meta` with every copy of the key taken out. */
export interface CallKey {
  /** The key, or undefined when the call gives none. */
  readonly key: string | undefined;
  /** The tool's own arguments: what the tool runs on and what the fingerprint covers. */
  readonly args: Record<string, unknown>;
  /** The request's `_meta` without the key fields; undefined when the request had none. */
  readonly meta: Record<string, unknown> | undefined;
}

/**
 * Read the idempotency key of a `tools/call` request from its `idempotency_key` argument, from its
 * `_meta` (`idempotency_key` / `idempotencyKey` unless `sources` says otherwise), or from the request's
 * own `params.idempotencyKey` (`paramsKey`, the field the MCP spec discussion converged on; pass
 * undefined where the request has none), and take every copy out, so the key never reaches the tool and
 * never counts in the fingerprint. Nothing may run under a
 * key the caller did not mean: copies that disagree are an `invalid_arguments` error, as are arguments
 * that are not an object; a copy that is not a string of 1–255 characters, or holds a control
 * character, is `idempotency_key_invalid`, wherever it came from.
 * @example
 * const { key, args } = callKey({ path: "a.txt", idempotency_key: "k-1" }, undefined);
 * // key === "k-1", args deepEquals { path: "a.txt" }
 */
export function callKey(
  args: unknown,
  meta: unknown,
  sources: KeySources = everyKeySource,
  paramsKey?: unknown,
): CallKey {
  if (args !== undefined && args !== null && !isObject(args)) {
    // Run on no arguments instead, and calls that differ would share a fingerprint and a result.
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      `the tool's arguments must be an object, got ${Array.isArray(args) ? "an array" : typeof args}, so nothing ran.`,
    );
  }
  const given = isObject(args) ? args : {};
  const metaObject = isObject(meta) ? meta : undefined;
  const found: { where: string; value: string }[] = [];
  let rest = given;
  if (paramsKey !== undefined) found.push(checked("params.idempotencyKey", paramsKey));
  if (sources.argument) {
    const { [argumentField]: fromArgs, ...others } = given;
    rest = others;
    if (fromArgs !== undefined) found.push(checked(`the ${argumentField} argument`, fromArgs));
  }
  let keptMeta: Record<string, unknown> | undefined;
  if (metaObject) {
    keptMeta = {};
    for (const [field, value] of Object.entries(metaObject)) {
      if (sources.metaFields.includes(field)) {
        if (value !== undefined) found.push(checked(`_meta.${field}`, value));
      } else {
        keptMeta[field] = value;
      }
    }
  }
  const [first] = found;
  const other = found.find(({ value }) => value !== first?.value);
  if (first && other) {
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      `the idempotency key was given twice with different values (${first.where} is ` +
        `${JSON.stringify(first.value)}, ${other.where} is ${JSON.stringify(other.value)}), so nothing ran. ` +
        "Send one key, in one place.",
    );
  }
  return { key: first?.value, args: rest, meta: keptMeta };
}

// C0 controls, DEL and C1 controls: a key is written to logs, terminals and stores, and none of them
// should be handed a byte that acts instead of showing.
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const controlCharacter = /[\u0000-\u001f\u007f-\u009f]/;

/** One copy of the key, checked the same way wherever it came from. */
function checked(where: string, value: unknown): { where: string; value: string } {
  if (typeof value !== "string" || value.length === 0) {
    const got = typeof value === "string" ? "empty" : value === null ? "null" : `a ${typeof value}`;
    throw new IdempotencyError(ErrorCode.keyInvalid, `${keyRequiredMessage} (${where} is ${got}.)`);
  }
  if (value.length > maxKeyLength) {
    throw new IdempotencyError(
      ErrorCode.keyInvalid,
      `${keyRequiredMessage} (${where} is ${value.length} characters long.)`,
    );
  }
  const control = value.search(controlCharacter);
  if (control !== -1) {
    throw new IdempotencyError(
      ErrorCode.keyInvalid,
      `${keyRequiredMessage} (${where} has a control character at index ${control}; a key may not hold any.)`,
    );
  }
  return { where, value };
}

/** The longest window a call without a key is keyed by its arguments for: longer, genuine repeats are lost. */
export const maxKeylessWindowMs = 60_000;
