/**
 * Keys kept in checkpointed LangGraph state (OP-6 in docs/operation-models.md): minted by a node that runs
 * before the node that calls `interrupt()`, read by the node that runs the tool.
 * @module
 */
import { randomUUID } from "node:crypto";
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import { validateKey } from "../core/keys.js";

/** The state field that holds a tool's key, named `<tool>_idempotency_key`. */
export type KeyField<T extends string> = `${T}_idempotency_key`;

/**
 * A state update holding a new key for `toolName`: return it (or spread it into the update) from a node
 * that runs **before** the node with `interrupt()` and the side effect.
 *
 * LangGraph checkpoints a node's update only when the node returns, and re-runs an interrupted node from
 * the top. So a key minted inside the node that interrupts is a new key on every re-run, while a key
 * returned by an earlier node is saved once and read back by every re-run.
 *
 * Every call mints a fresh key, on purpose: the minting node runs once per logical operation (a second
 * pass through it, in a loop or a new turn, is a new email), and its update is checkpointed before the
 * effect. Reusing a key already in state, as `keys.fromState` does, would make the second email of a
 * loop a replay of the first.
 *
 * @throws IdempotencyError `invalid_arguments` for an empty `toolName`; `idempotency_key_invalid` if
 *   `create` returns anything but a string of 1–255 characters.
 * @example
 * import { mintKey } from "idempotool/langgraph";
 *
 * // In the node that drafts the email, before the review node interrupts:
 * const proposeNode = (state: { customer: string }) => ({
 *   draft: `Dear ${state.customer}, ...`,
 *   ...mintKey("send_email"), // { send_email_idempotency_key: "<uuid>" }
 * });
 */
export function mintKey<T extends string>(
  toolName: T,
  create: () => string = randomUUID,
): Record<KeyField<T>, string> {
  requireToolName(toolName, "mintKey");
  const key = validateKey(create(), toolName);
  return { [`${toolName}_idempotency_key`]: key } as Record<KeyField<T>, string>;
}

/**
 * Read the key an upstream node minted with {@link mintKey} from `state[`${toolName}_idempotency_key`]`.
 * It never makes one up: a missing key is an error, since a key made here would change on every re-run.
 *
 * @throws IdempotencyError `idempotency_key_missing` when the field is absent, `idempotency_key_invalid`
 *   when it holds anything but a string of 1–255 characters.
 * @example
 * import { keyFromState } from "idempotool/langgraph";
 *
 * const state = { draft: "Dear Ann, ...", send_email_idempotency_key: "0b6c2f2e-..." };
 * const key = keyFromState(state, "send_email"); // "0b6c2f2e-..."
 */
export function keyFromState(state: object, toolName: string): string {
  requireToolName(toolName, "keyFromState");
  if (typeof state !== "object" || state === null) {
    throw new IdempotencyError(ErrorCode.invalidArguments, "keyFromState needs the node's state object.");
  }
  const field = `${toolName}_idempotency_key`;
  const stored = (state as Record<string, unknown>)[field];
  if (stored === undefined || stored === null) {
    throw new IdempotencyError(
      ErrorCode.keyMissing,
      `${toolName}: the state has no ${field}. Return mintKey("${toolName}") from a node that runs before ` +
        "this one, so the checkpointer saves the key before the side effect; a key minted in the node that " +
        "interrupts is new on every re-run. Declare the field in the state schema too, or LangGraph drops it.",
    );
  }
  return validateKey(stored, toolName);
}

function requireToolName(toolName: unknown, helper: string): void {
  if (typeof toolName !== "string" || toolName.length === 0) {
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      `${helper} needs the tool's name as a non-empty string, got ${typeof toolName === "string" ? "an empty string" : typeof toolName}.`,
    );
  }
}
