/**
 * Composite keys from where a LangGraph node runs: its thread and its checkpoint namespace.
 * @module
 */
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import { keys } from "../core/keys.js";

/**
 * The part of a LangGraph node's config we read. `LangGraphRunnableConfig` fits: the node's second
 * parameter, or `getConfig()` inside a Functional API `task`. Typed by shape so this entry never
 * imports LangGraph.
 */
export interface NodeConfig {
  readonly configurable?: { readonly thread_id?: unknown; readonly checkpoint_ns?: unknown } | undefined;
  /** LangGraph ≥ 1 also exposes both here; read when `configurable` lacks them. */
  readonly executionInfo?: { readonly threadId?: unknown; readonly checkpointNs?: unknown } | undefined;
}

/**
 * A key from the node's thread and checkpoint namespace, plus any `parts` you add (such as the tool's
 * name): `composite_` and 64 hex characters.
 *
 * LangGraph names each node run `node:<task id>`, where the task id is derived from the checkpoint the
 * step started from. Re-runs of the same node run (resumed after `interrupt()`, re-run after a crash, a
 * second process resuming the same thread) see the same thread and namespace, so they get the same key;
 * another thread, another node, or the same node in a later step (a loop, a new turn) gets another.
 * So does a replay from an earlier checkpoint (time travel): LangGraph forks a new checkpoint first, so
 * the effect runs again. A key minted into state (`mintKey`) is kept by such a replay instead.
 *
 * The arguments are deliberately not required as a part. If a re-run computes different arguments
 * (the model rewrote the draft), the same key with new arguments is a loud `idempotency_key_conflict`
 * instead of a second, different email. Add a part when one node run calls the tool several times
 * for different things (`keyFromCheckpoint(config, "send_email", recipient)`).
 *
 * @throws IdempotencyError `idempotency_key_missing` when the config has no `thread_id` (no
 *   checkpointer or no thread: nothing could recognise a re-run) or no `checkpoint_ns` (the config given
 *   to `invoke()`, not the one the node received); `invalid_arguments` for parts that are not JSON data.
 * @example
 * import { keyFromCheckpoint } from "idempotool/langgraph";
 *
 * // (state, config) => { ... } inside a node:
 * const config = { configurable: { thread_id: "ticket-81", checkpoint_ns: "send:1f0c…" } };
 * const key = keyFromCheckpoint(config, "send_email");
 */
export function keyFromCheckpoint(config: NodeConfig, ...parts: unknown[]): string {
  if (typeof config !== "object" || config === null) {
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      "keyFromCheckpoint needs the config the node receives as its second parameter.",
    );
  }
  const threadId = config.configurable?.thread_id ?? config.executionInfo?.threadId;
  if (!(typeof threadId === "string" && threadId.length > 0) && !Number.isFinite(threadId)) {
    throw new IdempotencyError(
      ErrorCode.keyMissing,
      "keyFromCheckpoint: the config has no thread_id. Compile the graph with a checkpointer and invoke it " +
        "with { configurable: { thread_id } }; without a thread, nothing can tell a re-run from a new run.",
    );
  }
  const namespace = config.configurable?.checkpoint_ns ?? config.executionInfo?.checkpointNs;
  if (typeof namespace !== "string" || namespace.length === 0) {
    throw new IdempotencyError(
      ErrorCode.keyMissing,
      "keyFromCheckpoint: the config has no checkpoint_ns. Pass the config the node receives as its second " +
        "parameter (or getConfig() inside a task), not the one given to invoke(): that one names the thread, " +
        "not the node run.",
    );
  }
  return keys.composite(threadId, namespace, ...parts);
}
