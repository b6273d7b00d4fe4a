/**
 * Lists of top-level argument names: `significant`, `similar.fields` and the agent loops' `intentFields`
 * each name the fields of a call that count. A wrong name must not quietly count nothing, so the names
 * are typed by the tool's arguments, checked when the tool is made, and checked again on every call.
 */
import { IdempotencyError } from "./errors.js";

/**
 * A top-level argument name of a tool whose arguments are `A`. Any string when `A` is not an object
 * type (`unknown`, `any`), or has an index signature (`Record<string, unknown>`); for a union, a name
 * of any of its members.
 * @example
 * import type { ArgumentField } from "idempotool";
 *
 * const field: ArgumentField<{ to: string; subject: string }> = "to"; // "too" does not compile
 */
export type ArgumentField<A> = [A] extends [never]
  ? string
  : A extends object
    ? Extract<keyof A, string>
    : string;

/**
 * The names of the arguments that count, typed so a misspelt name does not compile. The list never
 * decides what the arguments are: they come from the tool (its function or schema), so an untyped tool
 * takes any names.
 * @example
 * import type { FieldList } from "idempotool";
 *
 * const significant: FieldList<{ to: string; subject: string; body: string }> = ["to", "subject"];
 */
// NoInfer: `["to"]` alone would otherwise make an untyped tool's arguments `{ to: any }`, and a call with
// more fields than that would not compile.
export type FieldList<A> = readonly NoInfer<ArgumentField<A>>[];

/**
 * Check a field list when the tool is made: a non-empty array of non-empty strings. Returns a copy, so
 * changing the caller's array later cannot change what a call counts.
 */
export function fieldListOf(value: unknown, invalid: (problem: string) => never): readonly string[] {
  if (!Array.isArray(value) || value.some((field) => typeof field !== "string" || field === "")) {
    invalid("must be an array of top-level argument names");
  }
  // An empty list counts nothing: every call would look the same.
  if (value.length === 0) invalid("must name at least one top-level argument");
  return Object.freeze([...new Set(value as string[])]);
}

/**
 * The listed fields of one call's arguments; a field that is absent (or `undefined`, which JSON leaves
 * out) is left out, so an optional field counts as absent, not as a wildcard.
 *
 * Throws `invalid_arguments` when the arguments are not an object, or when none of the fields is
 * present: that is a misspelt list (or arguments without a single one of the fields), and picking
 * nothing would make every such call look the same.
 */
export function pickFields(
  args: unknown,
  fields: readonly string[],
  tool: string,
  option: string,
): Record<string, unknown> {
  if (typeof args !== "object" || args === null || Array.isArray(args)) {
    throw new IdempotencyError(
      "invalid_arguments",
      `${tool}: \`${option}\` names fields of the arguments, but the arguments are not an object.`,
    );
  }
  const source = args as Record<string, unknown>;
  const present = fields.filter((field) => Object.hasOwn(source, field) && source[field] !== undefined);
  if (present.length === 0) {
    throw new IdempotencyError(
      "invalid_arguments",
      `${tool}: the arguments have none of the fields \`${option}\` names (${fields.join(", ")}), so ` +
        "this call cannot be told apart from any other. Check the spelling of the option, or pass at least one of them.",
    );
  }
  // fromEntries defines own properties, so a field named `__proto__` is kept as data.
  return Object.fromEntries(present.map((field) => [field, source[field]]));
}
