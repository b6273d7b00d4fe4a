import { ErrorCode, IdempotencyError } from "../core/errors.js";
import { keyRequiredMessage } from "./key-description.js";

/** The argument a guarded tool takes its key in (the same name `registerIdempotentTool` adds). */
const argumentField = "idempotency_key";

/**
 * Where else a client may put the key: in the request's `_meta`, for clients that keep it out of the
 * model's arguments. Both spellings are read.
 */
export const metaKeyFields = ["idempotency_key", "idempotencyKey"] as const;

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
 * Read the idempotency key of a `tools/call` request from its `idempotency_key` argument or from
 * `_meta.idempotency_key` / `_meta.idempotencyKey`, and take every copy out, so the key never reaches
 * the tool and never counts in the fingerprint. Copies that disagree are a caller bug: nothing may run
 * under a key the caller did not mean, so that is an `invalid_arguments` error, as are arguments that
 * are not an object.
 * @example
 * const { key, args } = callKey({ path: "a.txt", idempotency_key: "k-1" }, undefined);
 * // key === "k-1", args deepEquals { path: "a.txt" }
 */
export function callKey(args: unknown, meta: unknown): CallKey {
  if (args !== undefined && args !== null && !isObject(args)) {
    // Run on no arguments instead, and calls that differ would share a fingerprint and a result.
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      `the tool's arguments must be an object, got ${Array.isArray(args) ? "an array" : typeof args}, so nothing ran.`,
    );
  }
  const given = isObject(args) ? args : {};
  const metaObject = isObject(meta) ? meta : undefined;
  const { [argumentField]: fromArgs, ...rest } = given;
  const found: { where: string; value: unknown }[] = [];
  if (fromArgs !== undefined) found.push({ where: `the ${argumentField} argument`, value: fromArgs });
  let keptMeta: Record<string, unknown> | undefined;
  if (metaObject) {
    keptMeta = {};
    for (const [field, value] of Object.entries(metaObject)) {
      if ((metaKeyFields as readonly string[]).includes(field)) {
        if (value !== undefined) found.push({ where: `_meta.${field}`, value });
      } else {
        keptMeta[field] = value;
      }
    }
  }
  for (const { value } of found) {
    if (typeof value !== "string") throw new IdempotencyError(ErrorCode.keyInvalid, keyRequiredMessage);
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
  return { key: first?.value as string | undefined, args: rest, meta: keptMeta };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
