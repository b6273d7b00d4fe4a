/**
 * The per-turn key policy of the agent loops (docs/keys.md): one key per intent per turn.
 *
 * src/tool-calls/ holds what the tool-call integrations (`idempotool/loops`, `/ai-sdk`, `/mastra`,
 * `/openai-agents`, `/langgraph`, `/dbos`, `/vercel-workflow`) share: this key, what the model reads back
 * (model-output.ts), the errors it reads (tool-call-error.ts), their options and approvals. It is no
 * subpath of its own: each entry re-exports the public names it needs, so none loads another.
 */
import { type FieldList, fieldListOf, pickFields } from "../core/field-list.js";
import { keys } from "../core/keys.js";
import { invalidOption } from "../core/option-checks.js";

/**
 * The key of one intent in one turn: `keys.intent(turnId, { tool, args })`, where `args` are the
 * call's intent fields (all of its arguments when `intentFields` is not given).
 *
 * The same tool called with the same intent in the same turn gets the same key, whatever its
 * tool-call id, so a duplicate emission is a replay; a new turn gets a new key, so a user who asks
 * again gets a new call.
 * @throws IdempotencyError `invalid_arguments` when `intentFields` are given and the arguments are not an
 * object, or have none of them: a list that picks nothing would give every call of the turn one key.
 * @example
 * import { intentKey } from "idempotool/loops";
 *
 * const key = intentKey("turn-7", "send_email", { to: "alice@example.com", subject: "Hi", body: "…" }, ["to", "subject"]);
 */
export function intentKey<A>(turnId: string, tool: string, args: A, intentFields?: FieldList<A>): string {
  const fields = intentFields === undefined ? args : pickFields(args, intentFields, tool, "intentFields");
  return keys.intent(turnId, { tool, args: fields });
}

/** Check an `intentFields` option at configuration time. */
export function intentFieldsOf(value: unknown, where: string): readonly string[] | undefined {
  if (value === undefined) return undefined;
  return fieldListOf(value, (problem) => invalidOption(where, "intentFields", problem));
}
