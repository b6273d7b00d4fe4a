/**
 * An idempotent tool bound to where a LangGraph node finds its key.
 * @module
 */
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import type { Envelope, IdempotentTool } from "../core/idempotent.js";
import { invalidOption } from "../core/option-checks.js";
import { keyFromCheckpoint, type NodeConfig } from "./checkpoint-key.js";
import { keyFromState } from "./state-key.js";

/** Where a node tool finds its key. */
export const KeySource = {
  /**
   * `state[`${tool}_idempotency_key`]`, minted by an upstream node with `mintKey` (OP-6 in
   * docs/operation-models.md).
   */
  state: "state",
  /** The node's `thread_id` and `checkpoint_ns`, with the tool's name (see `keyFromCheckpoint`). */
  checkpoint: "checkpoint",
} as const;
export type KeySource = (typeof KeySource)[keyof typeof KeySource];

/** Options of {@link nodeTool}. */
export interface NodeToolOptions<S extends KeySource> {
  /** Where the key comes from; no default, since each one asks something different of the graph. */
  readonly key: S;
}

/** What a node passes on each call: the state or the config its key comes from, and the usual call options. */
export type NodeCall<S extends KeySource> = (S extends "state"
  ? { readonly state: object; readonly config?: NodeConfig }
  : { readonly config: NodeConfig; readonly state?: object }) & {
  /** A namespace (tenant, user). Default "default". */
  readonly scope?: string;
  /** Aborts waiting for a call in flight (pass `config.signal` to follow the run's cancellation). */
  readonly signal?: AbortSignal;
};

/** An idempotent tool that takes its key from the node that calls it. */
export interface NodeTool<A, R, S extends KeySource> {
  (args: A, node: NodeCall<S>): Promise<Envelope<Awaited<R>>>;
  /** The wrapped tool, to call with a key of your own or to pass to `requestApproval`. */
  readonly tool: IdempotentTool<A, R>;
  readonly keySource: S;
}

/**
 * Bind an idempotent tool to a key source, so every node that calls it derives the key the same way
 * and none can forget to. The tool's name picks the state field (`send_email_idempotency_key`) or is
 * added to the checkpoint key, so two tools in one node never share a key.
 *
 * - `{ key: "state" }`: the key an upstream node returned with `mintKey(tool.toolName)`. Survives
 *   anything the checkpoint survives, even a replay from an earlier checkpoint taken after the mint;
 *   the natural choice for OP-6 (docs/operation-models.md).
 * - `{ key: "checkpoint" }`: `thread_id` + `checkpoint_ns` of the node's config. Needs no state field;
 *   suits `Send` fan-out, where each task has its own namespace. A replay from an earlier checkpoint
 *   (time travel) gets a new key, so the effect runs again. A node that calls the tool several
 *   times for different things needs a part per call: use `keyFromCheckpoint` and the tool directly.
 *
 * Either way the key is stable across every re-run of one node run, and a re-run with different
 * arguments is an `idempotency_key_conflict`, never a second effect.
 *
 * @throws IdempotencyError `invalid_options` when `tool` is not an idempotent tool or `key` is not a key source.
 * @example
 * import { idempotent, memoryStore } from "idempotool";
 * import { nodeTool } from "idempotool/langgraph";
 *
 * const sendEmail = nodeTool(
 *   idempotent(async (args: { to: string; body: string }) => ({ id: `m-${args.to}` }), {
 *     name: "send_email",
 *     store: memoryStore(),
 *   }),
 *   { key: "state" },
 * );
 * // In a node that runs after the one that returned mintKey("send_email"):
 * const sendNode = async (state: { to: string; draft: string; send_email_idempotency_key: string }) => {
 *   const sent = await sendEmail({ to: state.to, body: state.draft }, { state });
 *   return { messageId: sent.result.id };
 * };
 */
export function nodeTool<A, R, S extends KeySource>(
  tool: IdempotentTool<A, R>,
  options: NodeToolOptions<S>,
): NodeTool<A, R, S> {
  if (typeof tool !== "function" || typeof tool.toolName !== "string") {
    throw new IdempotencyError(
      ErrorCode.invalidOptions,
      "nodeTool(): the first argument must be a tool wrapped by idempotent().",
    );
  }
  const source = options?.key;
  if (source !== KeySource.state && source !== KeySource.checkpoint) {
    invalidOption(
      `nodeTool(${tool.toolName})`,
      "key",
      `must be "state" or "checkpoint", got ${String(source)}`,
    );
  }
  // async, so a key that cannot be derived rejects the promise like every other refusal.
  const call = async (args: A, node: NodeCall<S>) => {
    // Derived before the tool is touched: a node that cannot name its key runs nothing.
    const key = keyFor(tool.toolName, source, node);
    return tool(args, {
      key,
      ...(node.scope === undefined ? {} : { scope: node.scope }),
      ...(node.signal === undefined ? {} : { signal: node.signal }),
    });
  };
  return Object.assign(call, { tool, keySource: source });
}

function keyFor(toolName: string, source: KeySource, node: NodeCall<KeySource> | undefined): string {
  if (typeof node !== "object" || node === null) {
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      `${toolName}: pass the node's ${source === "state" ? "{ state }" : "{ config }"} as the second argument.`,
    );
  }
  if (source === KeySource.state) {
    if (node.state === undefined) {
      throw new IdempotencyError(
        ErrorCode.keyMissing,
        `${toolName}: this node tool takes its key from state; pass { state }.`,
      );
    }
    return keyFromState(node.state, toolName);
  }
  if (node.config === undefined) {
    throw new IdempotencyError(
      ErrorCode.keyMissing,
      `${toolName}: this node tool takes its key from the checkpoint; pass the node's { config }.`,
    );
  }
  return keyFromCheckpoint(node.config, toolName);
}
