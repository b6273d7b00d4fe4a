/**
 * The checks every factory runs on its options, so a bad option fails at configuration time with
 * `invalid_options` naming it, never later as a raw `RangeError` out of a timer or a `Date`.
 *
 * The limits (see docs/concepts.md, "Limits"): durations are whole milliseconds a timer can hold
 * (at most 2^31 − 1 ms, about 24.8 days; Node fires a longer timer after 1 ms), a record's window
 * at most ten years (so `now + leaseMs + ttlMs` is always a date), and arguments at most
 * {@link maxArgumentDepth} levels deep. And whether a string is well-formed UTF-16, which every name, key
 * and value a store keeps must be.
 * @module
 */
import { ErrorCode, IdempotencyError } from "./errors.js";

/**
 * The longest delay a timer holds: 2^31 − 1 ms (about 24.8 days). Node fires a longer one after 1 ms,
 * so `leaseMs`, `waitMs` and every timeout are bounded by it.
 * @example
 * import { idempotent, maxTimerMs, memoryStore } from "idempotool";
 *
 * const longest = idempotent(async () => "done", { name: "slow_job", store: memoryStore(), leaseMs: maxTimerMs });
 */
export const maxTimerMs = 2 ** 31 - 1;

/**
 * The longest window a record absorbs repeats for (`ttlMs`): ten years, so every expiry is a date.
 * @example
 * import { idempotent, maxTtlMs, memoryStore } from "idempotool";
 *
 * const once = idempotent(async () => "done", { name: "migrate", store: memoryStore(), ttlMs: maxTtlMs });
 */
export const maxTtlMs = 10 * 365 * 24 * 60 * 60 * 1000;

/**
 * How deeply arguments may nest (objects and arrays inside one another): 256 levels. Deeper arguments
 * are `invalid_arguments` before the store is touched; no tool's arguments come near it.
 * @example
 * import { canonicalJson, maxArgumentDepth } from "idempotool";
 *
 * let deep: unknown = 1;
 * for (let i = 0; i <= maxArgumentDepth; i++) deep = [deep];
 * canonicalJson(deep); // throws invalid_arguments: nests deeper than 256 levels
 */
export const maxArgumentDepth = 256;

/** The bounds of a numeric option. */
export interface OptionRange {
  /** The smallest value allowed: 1 unless 0 has a meaning (`waitMs: 0` fails at once). */
  readonly min?: number;
  /** The largest value allowed. Durations: {@link maxTimerMs} unless given; sizes: `Number.MAX_SAFE_INTEGER`. */
  readonly max?: number;
}

/** Throws `invalid_options` naming the option, as in ``idempotent(): option `ttlMs` must be …``. */
export function invalidOption(owner: string, option: string, problem: string): never {
  throw new IdempotencyError(ErrorCode.invalidOptions, `${owner}: option \`${option}\` ${problem}.`);
}

/** How a check shared by several factories (redact, encryption) reports a bad option as its caller's. */
export type InvalidOption = (option: string, problem: string) => never;

/**
 * The {@link InvalidOption} of one factory: `invalidOptionFor("saga()")`; with `prefix`, the option sits
 * inside another, as in ``reconcile(): option `tools.charge.redact` …``.
 */
export function invalidOptionFor(owner: string, prefix = ""): InvalidOption {
  return (option, problem) => invalidOption(owner, `${prefix}${option}`, problem);
}

/**
 * A duration option in whole milliseconds, from `min` (1 by default) to `max` ({@link maxTimerMs} by
 * default); `fallback` when it is not given. Anything else (NaN, ±Infinity, a fraction, a string, a
 * number out of range) throws `invalid_options` naming `owner` and `option`.
 */
export function durationOption(
  owner: string,
  option: string,
  value: unknown,
  fallback: number,
  range?: OptionRange,
): number;
export function durationOption(
  owner: string,
  option: string,
  value: unknown,
  fallback?: undefined,
  range?: OptionRange,
): number | undefined;
export function durationOption(
  owner: string,
  option: string,
  value: unknown,
  fallback?: number,
  range: OptionRange = {},
): number | undefined {
  return wholeNumber(owner, option, value, fallback, range.min ?? 1, range.max ?? maxTimerMs, "milliseconds");
}

// String#isWellFormed is Node 20's, newer than the ES2022 lib this package compiles against.
const isWellFormed = (String.prototype as { isWellFormed?: (this: string) => boolean }).isWellFormed;

/**
 * The index of the first lone surrogate in `text`, or -1 when it has none (it is well-formed UTF-16). A lone
 * surrogate has no UTF-8 form, so databases keep it as U+FFFD: two keys that differ only there would become
 * one record.
 */
export function loneSurrogateIndex(text: string): number {
  // Native, and at once for a one-byte string; the scan below only finds where. Scanning every string costs
  // ~5.8 M instructions on a 100 KB result (the SQLite store checks each one it settles), under 1% of a call.
  if (isWellFormed?.call(text)) return -1;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        i++;
        continue;
      }
      return i;
    }
    if (unit >= 0xdc00 && unit <= 0xdfff) return i;
  }
  return -1;
}

/** The longest tool name: a name is kept in every record, and a saga's undo adds `:compensate` to it. */
export const maxToolNameLength = 200;

/**
 * A tool's name: 1–200 characters of well-formed Unicode, not all white space. A lone surrogate is refused:
 * stores keep it as U+FFFD, so two tools named apart only there would share their records' tool.
 */
export function toolNameOption(owner: string, option: string, name: unknown): string {
  if (typeof name !== "string" || name.trim() === "")
    invalidOption(owner, option, "must be a non-empty string");
  if (name.length > maxToolNameLength) {
    invalidOption(owner, option, `must be at most ${maxToolNameLength} characters, got ${name.length}`);
  }
  const lone = loneSurrogateIndex(name);
  if (lone !== -1) invalidOption(owner, option, `has a lone UTF-16 surrogate at index ${lone}`);
  return name;
}

/**
 * A size or count option (bytes, records, entries, a page size) as a whole number from `min` (1 by
 * default) to `max` (`Number.MAX_SAFE_INTEGER` by default); `fallback` when it is not given. Anything
 * else throws `invalid_options` naming `owner` and `option`.
 */
export function sizeOption(
  owner: string,
  option: string,
  value: unknown,
  fallback: number,
  range?: OptionRange,
): number;
export function sizeOption(
  owner: string,
  option: string,
  value: unknown,
  fallback?: undefined,
  range?: OptionRange,
): number | undefined;
export function sizeOption(
  owner: string,
  option: string,
  value: unknown,
  fallback?: number,
  range: OptionRange = {},
): number | undefined {
  return wholeNumber(owner, option, value, fallback, range.min ?? 1, range.max ?? Number.MAX_SAFE_INTEGER);
}

function wholeNumber(
  owner: string,
  option: string,
  value: unknown,
  fallback: number | undefined,
  min: number,
  max: number,
  unit?: string,
): number | undefined {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    invalidOption(
      owner,
      option,
      `must be a whole number from ${min} to ${max}${unit ? ` (${unit})` : ""}, got ${shown(value)}`,
    );
  }
  return value;
}

/** The value as an error message shows it; never throws (`String()` does on a null-prototype object). */
function shown(value: unknown): string {
  switch (typeof value) {
    case "string":
      return JSON.stringify(value);
    case "number":
    case "bigint":
    case "boolean":
    case "undefined":
      return String(value);
    default:
      return value === null ? "null" : typeof value === "object" ? "an object" : `a ${typeof value}`;
  }
}
