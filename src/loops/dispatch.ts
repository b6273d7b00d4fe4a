/**
 * The provider-neutral dispatcher: a model's tool calls in, one outcome per call out, identical
 * intents run once.
 */
import { IdempotencyError } from "../core/errors.js";
import { ToolCallError, ToolCallErrorCode } from "../tool-calls/tool-call-error.js";
import {
  checkTurn,
  type LoopTool,
  prepareCall,
  type ToolCallOutcome,
  type ToolCallRequest,
  type TurnOptions,
} from "./loop-tool.js";

/** Options of {@link dispatchToolCalls} and the provider loops: the turn, and a hook per outcome. */
export interface DispatchOptions extends TurnOptions {
  /** Called once per tool call, in the order the model emitted them, after all of them settled. */
  readonly onOutcome?: ((outcome: ToolCallOutcome) => void) | undefined;
}

/**
 * Run a model's tool calls under the per-turn key policy and return one outcome per call, in order.
 *
 * Calls with the same key (the same intent in the same turn, whatever their call ids) form one group:
 * the first runs, the others follow it one by one and get its recorded outcome as a replay (or its
 * failure, without running). Different groups run concurrently, as the model meant by emitting them
 * together. Nothing a call does makes this reject: failures are outcomes the model reads. It rejects
 * only for a missing `turnId`, a tool list with two tools of one name, or an aborted `signal`.
 * @example
 * import { memoryStore } from "idempotool";
 * import { dispatchToolCalls, loopTool } from "idempotool/loops";
 *
 * const store = memoryStore();
 * const sendEmail = loopTool(async (args: { to: string }) => ({ messageId: `m-${args.to}` }), { name: "send_email", store });
 * const outcomes = await dispatchToolCalls(
 *   [
 *     { id: "call_1", name: "send_email", input: { to: "alice@example.com" } },
 *     { id: "call_2", name: "send_email", input: { to: "alice@example.com" } },
 *   ],
 *   [sendEmail],
 *   { turnId: "msg_42" },
 * );
 * // One email; outcomes[1] is a replay of outcomes[0].
 */
export async function dispatchToolCalls(
  calls: readonly ToolCallRequest[],
  tools: readonly LoopTool[],
  options: DispatchOptions,
): Promise<ToolCallOutcome[]> {
  const turn = checkTurn(options);
  const byName = toolsByName(tools);
  const outcomes: (ToolCallOutcome | undefined)[] = new Array(calls.length);
  const groups = new Map<string, { index: number; run: () => Promise<ToolCallOutcome> }[]>();

  calls.forEach((request, index) => {
    const tool = byName.get(request.name);
    if (!tool) {
      outcomes[index] = unknownTool(request, byName);
      return;
    }
    const prepared = prepareCall(tool, request, turn);
    if (!prepared.ready) {
      outcomes[index] = prepared.outcome;
      return;
    }
    const group = groups.get(prepared.key) ?? [];
    group.push({ index, run: () => prepared.run() });
    groups.set(prepared.key, group);
  });

  await Promise.all(
    [...groups.values()].map(async ([first, ...repeats]) => {
      if (!first) return;
      const leader = await first.run();
      outcomes[first.index] = leader;
      for (const repeat of repeats) {
        // A repeat of a call that succeeded reads its record (a replay through the store). A repeat of
        // one that failed gets the same failure: the model emitted one intent twice, not two attempts.
        outcomes[repeat.index] = leader.ok
          ? await repeat.run()
          : { ...leader, callId: calls[repeat.index]!.id };
      }
    }),
  );

  const settled = outcomes as ToolCallOutcome[];
  if (options.onOutcome) for (const outcome of settled) options.onOutcome(outcome);
  return settled;
}

function toolsByName(tools: readonly LoopTool[]): Map<string, LoopTool> {
  if (!Array.isArray(tools)) {
    throw new IdempotencyError("invalid_options", "The tools must be an array of loopTool(…) tools.");
  }
  const byName = new Map<string, LoopTool>();
  for (const tool of tools) {
    const name = tool?.toolName;
    if (byName.has(name)) {
      throw new IdempotencyError(
        "invalid_options",
        `Two tools are named "${name}"; a model calls tools by name.`,
      );
    }
    byName.set(name, tool);
  }
  return byName;
}

function unknownTool(request: ToolCallRequest, byName: Map<string, LoopTool>): ToolCallOutcome {
  const known = [...byName.keys()].join(", ");
  return {
    ok: false,
    callId: request.id,
    tool: request.name,
    error: new ToolCallError(
      request.name,
      ToolCallErrorCode.unknownTool,
      `There is no tool named "${request.name}"; nothing was run. The tools are: ${known || "(none)"}.`,
    ),
  };
}
