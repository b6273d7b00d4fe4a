/**
 * RFC 8785 (JCS) canonical JSON: one text for one value, whatever the key order, so a hash of it
 * can tell "the same arguments" from "different arguments".
 *
 * Where `JSON.stringify` would quietly lose information (a `Map` becomes `{}`, `NaN` becomes `null`,
 * a function disappears), two different values would get one fingerprint; those are rejected instead.
 * @module
 */
import { IdempotencyError } from "./errors.js";
import { loneSurrogateIndex, maxArgumentDepth } from "./option-checks.js";

/** How {@link canonicalJson} treats values JSON has no exact form for. */
export type CanonicalJsonOptions = {
  /**
   * `"reject"` (default) refuses BigInts; `"string"` writes them as their decimal string, so `12n` and
   * `"12"` become the same text: choose it only where a field is always one or always the other.
   */
  readonly bigint?: "reject" | "string";
  /** How error messages name the value's root, as in `args.items[2].when`; `"args"` by default. */
  readonly path?: string;
};

/**
 * The RFC 8785 canonical JSON text of `value`: keys sorted by UTF-16 code units, no whitespace,
 * numbers as ECMAScript writes them (`-0` as `0`), strings escaped as `JSON.stringify` does.
 *
 * Like `JSON.stringify`, it calls `toJSON` (a `Date` becomes its ISO string), unwraps boxed primitives,
 * omits object properties that are `undefined` and ignores symbol keys. Unlike it, it throws an
 * `invalid_arguments` {@link IdempotencyError} naming the path (`args.items[2].when`) for anything JSON
 * would change or drop silently: cycles, functions, symbols, BigInts (unless `bigint: "string"`), `NaN`
 * and ±`Infinity`, `undefined` at the top level or in an array, strings or keys with a lone surrogate,
 * and objects that serialize as `{}` whatever they hold (`Map`, `Set`, `WeakMap`, `WeakSet`, `Promise`,
 * `WeakRef`, `RegExp`, `Error`, `ArrayBuffer`, `SharedArrayBuffer`, `DataView`). Objects and arrays
 * nested more than {@link maxArgumentDepth} (256) levels deep are rejected the same way, before they
 * could overflow the stack.
 * @example
 * import { canonicalJson } from "idempotool";
 *
 * canonicalJson({ to: "alice@example.com", cc: [], subject: "Hi", when: new Date(0) });
 * // '{"cc":[],"subject":"Hi","to":"alice@example.com","when":"1970-01-01T00:00:00.000Z"}'
 */
export function canonicalJson(value: unknown, options?: CanonicalJsonOptions): string {
  const bigint = options?.bigint ?? "reject";
  if (bigint !== "reject" && bigint !== "string") {
    throw new IdempotencyError(
      "invalid_options",
      `Option "bigint" must be "reject" or "string", got ${String(bigint)}.`,
    );
  }
  const context: Context = { ancestors: [], bigintAsString: bigint === "string" };
  try {
    const text = serialize(value, "", context);
    if (text === undefined) throw new Rejection("is undefined, which has no JSON form");
    return text;
  } catch (error) {
    if (error instanceof Rejection) {
      throw new IdempotencyError("invalid_arguments", error.describe(options?.path ?? "args"));
    }
    throw error;
  }
}

interface Context {
  /** The objects and arrays being serialized, outermost first: a value found here again is a cycle. */
  readonly ancestors: object[];
  readonly bigintAsString: boolean;
}

/**
 * A rejected value on its way out. Each container it passes adds its own step, so the happy path
 * pays nothing for paths (no key stack, no string building) and a failure still names its place.
 */
class Rejection {
  /** Path steps, innermost first. */
  readonly steps: string[] = [];

  constructor(
    readonly problem: string,
    /** For a cycle: the index in the ancestors of the object the value refers back to. */
    readonly cycleTo = -1,
  ) {}

  describe(root: string): string {
    const steps = this.steps.reverse();
    const problem =
      this.cycleTo === -1
        ? this.problem
        : `${this.problem} ${root}${steps.slice(0, this.cycleTo).join("")}, a cycle JSON cannot represent`;
    return `${root}${pathText(steps)} ${problem}.`;
  }
}

/** A path as written after its root; a very deep one keeps its ends, so a message stays readable. */
function pathText(steps: readonly string[]): string {
  if (steps.length <= 12) return steps.join("");
  return `${steps.slice(0, 6).join("")}…(${steps.length - 9} more)…${steps.slice(-3).join("")}`;
}

function withStep(error: unknown, step: string): unknown {
  if (error instanceof Rejection) error.steps.push(step);
  return error;
}

/** The JSON text of `value`, or `undefined` where JSON has none (the caller decides whether to omit it). */
function serialize(value: unknown, key: string | number, context: Context): string | undefined {
  if ((typeof value === "object" && value !== null) || typeof value === "function") {
    const toJSON = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === "function") {
      value = toJSON.call(value, String(key));
    }
  }
  switch (typeof value) {
    case "string":
      return quote(value);
    case "number":
      return numberText(value);
    case "boolean":
      return value ? "true" : "false";
    case "object":
      return value === null ? "null" : serializeObjectLike(value, key, context);
    case "undefined":
      return undefined;
    case "bigint":
      if (context.bigintAsString) return `"${value}"`;
      throw new Rejection(
        `is a BigInt (${value}n), which JSON cannot represent; pass { bigint: "string" } to write it as a decimal string`,
      );
    case "symbol":
      throw new Rejection("is a symbol, which has no JSON form (JSON.stringify would drop it silently)");
    default:
      throw new Rejection("is a function, which has no JSON form (JSON.stringify would drop it silently)");
  }
}

function serializeObjectLike(value: object, key: string | number, context: Context): string | undefined {
  if (Array.isArray(value)) return serializeArray(value, context);
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype) {
    // Boxed primitives serialize as what they box, as in JSON.stringify; nothing else can be boxed.
    if (value instanceof Number) return serialize(Number(value), key, context);
    if (value instanceof String) return serialize(String(value), key, context);
    if (value instanceof Boolean || value instanceof BigInt) return serialize(value.valueOf(), key, context);
    rejectIfOpaque(value);
  }
  return serializeObject(value, context);
}

function enter(value: object, context: Context): void {
  // The ancestors are the enclosing levels, so the depth check costs no counter of its own.
  if (context.ancestors.length >= maxArgumentDepth) {
    throw new Rejection(
      `nests deeper than ${maxArgumentDepth} levels of objects and arrays, the limit for arguments; flatten it or pass it as a string`,
    );
  }
  const ancestor = context.ancestors.indexOf(value);
  // Only an ancestor is a cycle: the same object twice side by side serializes fine, twice.
  if (ancestor !== -1) throw new Rejection("refers back to", ancestor);
  context.ancestors.push(value);
}

function serializeArray(array: readonly unknown[], context: Context): string {
  enter(array, context);
  let index = 0;
  try {
    let text = "[";
    for (; index < array.length; index++) {
      const element = serialize(array[index], index, context);
      if (element === undefined) {
        throw new Rejection(
          "is undefined (or an empty slot), which JSON would turn into null; use null or leave the element out",
        );
      }
      text += index === 0 ? element : `,${element}`;
    }
    context.ancestors.pop();
    return `${text}]`;
  } catch (error) {
    throw withStep(error, `[${index}]`);
  }
}

function serializeObject(object: object, context: Context): string {
  enter(object, context);
  const names = sortedNames(Object.keys(object));
  let name: string | undefined;
  try {
    let text = "{";
    for (let i = 0; i < names.length; i++) {
      name = undefined; // a bad key is a problem of this object, not of its property
      const member = names[i]!;
      const label = labelOf(member);
      name = member;
      const memberText = serialize((object as Record<string, unknown>)[member], member, context);
      if (memberText === undefined) continue;
      text += text.length === 1 ? label + memberText : `,${label}${memberText}`;
    }
    context.ancestors.pop();
    return `${text}}`;
  } catch (error) {
    throw name === undefined ? error : withStep(error, propertyStep(name));
  }
}

/**
 * Property names in RFC 8785's order: by UTF-16 code units, which is what `<` on strings and the default
 * `sort()` compare. A tool's objects are small, and for them an insertion sort in place allocates nothing
 * where `sort()` allocates a work array.
 */
function sortedNames(names: string[]): string[] {
  if (names.length > 16) return names.sort();
  for (let i = 1; i < names.length; i++) {
    const name = names[i]!;
    let j = i - 1;
    while (j >= 0 && names[j]! > name) {
      names[j + 1] = names[j]!;
      j--;
    }
    names[j + 1] = name;
  }
  return names;
}

const identifier = /^[A-Za-z_$][\w$]*$/;

function propertyStep(name: string): string {
  return identifier.test(name) ? `.${name}` : `[${JSON.stringify(name)}]`;
}

function numberText(value: number): string {
  // Number-to-String is RFC 8785's number format, and String(-0) is already "0".
  if (Number.isFinite(value)) return String(value);
  throw new Rejection(`is ${value}, which JSON would turn into null (and so make it equal to null)`);
}

// A string with nothing JSON escapes and no surrogate quotes as itself: no JSON.stringify call, no scan for
// lone surrogates, on the path every replay takes. Keys repeat from call to call, so their quoted form and
// its colon are kept, bounded.
// biome-ignore lint/suspicious/noControlCharactersInRegex: these are exactly the characters JSON escapes.
const plainString = /^[^"\\\u0000-\u001f\ud800-\udfff]*$/;
const labels = new Map<string, string>();

/** A member's name as it opens the member: quoted, then the colon. */
function labelOf(name: string): string {
  let label = labels.get(name);
  if (label === undefined) {
    label = `${quote(name, "has a key with")}:`;
    if (labels.size < 4096) labels.set(name, label);
  }
  return label;
}

function quote(text: string, subject = "contains"): string {
  if (text.length < 256 && plainString.test(text)) return `"${text}"`;
  const quoted = JSON.stringify(text);
  // JSON.stringify writes a lone surrogate as a "\udxxx" escape and a paired one as itself, so the
  // escape's absence proves the string well formed; its presence may also be an escaped backslash.
  if (quoted.includes("\\ud")) {
    const at = loneSurrogateIndex(text);
    if (at !== -1) {
      const unit = text.charCodeAt(at).toString(16).toUpperCase();
      throw new Rejection(
        `${subject} a lone surrogate (U+${unit} at index ${at}${subject === "contains" ? "" : ` of ${quoted}`}), ` +
          "which RFC 8785 forbids: strings must be well-formed Unicode",
      );
    }
  }
  return quoted;
}

type Constructor = abstract new (...args: never[]) => unknown;

/** Objects whose content JSON.stringify loses entirely (they all become `{}`), with what to pass instead. */
const opaque: ReadonlyArray<readonly [Constructor, string, string]> = [
  [Map, "a Map", "Object.fromEntries(map) or [...map]"],
  [Set, "a Set", "[...set]"],
  [WeakMap, "a WeakMap", "the data it holds"],
  [WeakSet, "a WeakSet", "the data it holds"],
  [Promise, "a Promise", "its awaited value"],
  [WeakRef, "a WeakRef", "the data it refers to"],
  [RegExp, "a RegExp", "its source string"],
  [Error, "an Error", "{ name, message }"],
  [ArrayBuffer, "an ArrayBuffer", "its bytes as a string (e.g. base64) or an array"],
  [SharedArrayBuffer, "a SharedArrayBuffer", "its bytes as a string (e.g. base64) or an array"],
  [DataView, "a DataView", "its bytes as a string (e.g. base64) or an array"],
];

function rejectIfOpaque(value: object): void {
  for (const [type, article, instead] of opaque) {
    if (value instanceof type) {
      throw new Rejection(
        `is ${article}, which JSON would serialize as {} (so different values would look equal); pass ${instead} instead`,
      );
    }
  }
}
