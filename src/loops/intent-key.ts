/**
 * The per-turn key policy of the agent loops (DESIGN §6, seed Case 2): one key per intent per turn.
 */
import { IdempotencyError } from "../core/errors.js";
import { keys } from "../core/keys.js";

/**
 * The key of one intent in one turn: `keys.intent(turnId, { tool, args })`, where `args` are the
 * call's intent fields (all of its arguments when `intentFields` is not given).
 *
 * The same tool called with the same intent in the same turn gets the same key, whatever its
 * tool-call id, so a duplicate emission is a replay; a new turn gets a new key, so a user who asks
 * again gets a new call.
 * @example
 * import { intentKey } from "idempotool/loops";
 *
 * const key = intentKey("turn-7", "send_email", { to: "alice@example.com", subject: "Hi", body: "…" }, ["to", "subject"]);
 */
export function intentKey(
  turnId: string,
  tool: string,
  args: unknown,
  intentFields?: readonly string[],
): string {
  const fields = intentFields === undefined ? args : pickFields(args, intentFields, tool);
  return keys.intent(turnId, { tool, args: fields });
}

/** Check an `intentFields` option at configuration time. */
export function intentFieldsOf(value: unknown, where: string): readonly string[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.some((field) => typeof field !== "string" || field === "")) {
    throw new IdempotencyError(
      "invalid_options",
      `${where}: option \`intentFields\` must be an array of top-level argument names.`,
    );
  }
  return [...(value as string[])].sort();
}

function pickFields(args: unknown, fields: readonly string[], tool: string): Record<string, unknown> {
  if (typeof args !== "object" || args === null || Array.isArray(args)) {
    throw new IdempotencyError(
      "invalid_arguments",
      `${tool}: intentFields name fields of the arguments, but the arguments are not an object.`,
    );
  }
  const source = args as Record<string, unknown>;
  const picked: Record<string, unknown> = {};
  for (const field of fields) if (Object.hasOwn(source, field)) picked[field] = source[field];
  return picked;
}
