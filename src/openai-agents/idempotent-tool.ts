/**
 * OpenAI Agents SDK tools made safe to call twice: the options of a `tool()` whose `execute` runs once
 * per intent per run.
 * @module
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { RunContext, ToolExecuteArgument, ToolInputParameters, ToolOptions } from "@openai/agents";
import { type Clock, systemClock } from "../core/clock.js";
import { ApprovalMismatchError, IdempotencyError, isIdempotencyError } from "../core/errors.js";
import type { FieldList } from "../core/field-list.js";
import { type Envelope, idempotent, type ToolContext } from "../core/idempotent.js";
import { invalidOption } from "../core/option-checks.js";
import type { RecordOptions } from "../core/options.js";
import { ReplayedFailureError } from "../core/outcomes.js";
import { approvedKeyOf } from "../tool-calls/call-approval.js";
import { intentKey } from "../tool-calls/intent-key.js";
import { scopeOfOption, splitToolCallOptions } from "../tool-calls/key-policy-options.js";
import { modelOutputOf, type OutputMode } from "../tool-calls/model-output.js";
import { ToolCallError, toolCallErrorOf } from "../tool-calls/tool-call-error.js";
import { approvalOf, argumentsOfCall, forgetApproval } from "./approval-binding.js";

/** The call the SDK hands to `execute` beside the run context: the model's function call item. */
export interface AgentToolCall {
  readonly callId: string;
  readonly name: string;
  /** The arguments as the model wrote them: a JSON string. */
  readonly arguments: string;
}

/** What the SDK passes as `execute`'s third argument; the part of it we read. */
interface CallDetails {
  readonly toolCall?: AgentToolCall | undefined;
  readonly signal?: AbortSignal | undefined;
}

/** Options of {@link idempotentTool}: the {@link RecordOptions} of `idempotent()`, and the key policy. */
export interface IdempotentToolOptions<INPUT, CONTEXT = unknown, MODE extends OutputMode = "envelope">
  extends RecordOptions<INPUT, unknown> {
  /** The name in the keys. Default: the tool's own `name`. */
  readonly name?: string | undefined;
  /**
   * The arguments that say *what* is intended (recipient and subject, not the wording): with the turn id
   * and the tool's name they make the key. Default: all arguments.
   */
  readonly intentFields?: FieldList<INPUT> | undefined;
  /**
   * The id of the user turn a call answers: the same for every tool call of one run, new for every new
   * user message. Default: an id minted once per run (per `RunContext`), which lives only in this process
   * (see "How a call is keyed" in docs/integrations/openai-agents.md). Read your own message id from your
   * context when runs are resumed from a saved `RunState`: `(runContext) => runContext.context.messageId`.
   */
  readonly turnId?:
    | ((runContext: RunContext<CONTEXT>, call: AgentToolCall | undefined) => string)
    | undefined;
  /** The whole key, when the per-turn policy does not fit. Must be the same on every repeat of one intent. */
  readonly key?: ((input: INPUT, runContext: RunContext<CONTEXT>) => string) | undefined;
  /**
   * The namespace of the keys: a user, a conversation, a tenant. Default "default". Set it whenever one
   * store serves more than one user.
   */
  readonly scope?: string | ((runContext: RunContext<CONTEXT>) => string) | undefined;
  /** What `execute` returns to the model: `"envelope"` (default) or `"merge"` (see {@link OutputMode}). */
  readonly output?: MODE | undefined;
}

/** How a wrapped tool keys a call: kept per wrapped options object, for the approval helpers. */
export interface KeyPolicy {
  /** The name in the keys and records. */
  readonly tool: string;
  /** The name the model calls the tool by. */
  readonly callName: string;
  readonly clock: Clock;
  keyOf(input: unknown, runContext: RunContext<unknown>, call: AgentToolCall | undefined): string;
  scopeOf(runContext: RunContext<unknown>): string;
}

const policies = new WeakMap<object, KeyPolicy>();

/** The key policy of options made by {@link idempotentTool}, or undefined for anything else. */
export function keyPolicyOf(toolOptions: object): KeyPolicy | undefined {
  return policies.get(toolOptions);
}

/**
 * The default turn id of each run: minted the first time a call of the run needs it. Every step of one
 * run shares one `RunContext` object (resuming the same `RunState` object in this process keeps it); a
 * `RunState` read back from a string has a new one, hence a new id.
 */
const runTurnIds = new WeakMap<object, string>();

/** The default turn id of the run `runContext` belongs to. */
export function runTurnId(runContext: object): string {
  let id = runTurnIds.get(runContext);
  if (id === undefined) {
    id = `run-${crypto.randomUUID()}`;
    runTurnIds.set(runContext, id);
  }
  return id;
}

/** What the SDK passed for the call that claimed the key, carried through `idempotent()` to the tool body. */
const currentCall = new AsyncLocalStorage<{ readonly runContext: unknown; readonly details: object }>();

/** The idempotency context of the call whose tool body is running. */
const contexts = new WeakMap<object, ToolContext>();

/**
 * The idempotency context of a call inside a wrapped tool's `execute`: its key (pass it downstream as an
 * idempotency key), scope and attempt. Pass `execute`'s third argument. Undefined outside a wrapped tool.
 * @example
 * import { tool } from "@openai/agents";
 * import { z } from "zod";
 * import { memoryStore } from "idempotool";
 * import { idempotentTool, toolContextOf } from "idempotool/openai-agents";
 *
 * const createInvoice = tool(
 *   idempotentTool(
 *     {
 *       name: "create_invoice",
 *       description: "Create an invoice",
 *       parameters: z.object({ customer: z.string(), cents: z.number() }),
 *       execute: async (input, _runContext, details) => {
 *         const key = details === undefined ? undefined : toolContextOf(details)?.key;
 *         return { invoice: `inv-${input.customer}`, idempotencyKey: key };
 *       },
 *     },
 *     { store: memoryStore() },
 *   ),
 * );
 */
export function toolContextOf(details: object): ToolContext | undefined {
  return contexts.get(details);
}

/**
 * Make the options of an OpenAI Agents SDK `tool()` safe to call twice: pass them through this, then to
 * `tool()`. Every repeat of one intended call runs `execute` once.
 *
 * A model repeats itself: the same call twice in one response (the SDK runs both, each with its own
 * `callId`), or again in a later step of the same run. The key is the intent, not the call id:
 * `intentKey(turnId, name, intent fields)`. The first call runs; the repeats wait for it and get its
 * outcome as a replay. A new run (the user's next message) has a new turn id, a new key, and runs again.
 *
 * `execute` returns the envelope `{ result, was_replay, original_called_at, idempotency_key, expires_at }`
 * (plus a `note` on a replay), or with `output: "merge"` the tool's own object result with `was_replay`
 * and `original_called_at` merged in. A call that cannot be answered (a conflict, a call still running, an
 * unknown outcome, a store failure) becomes a tool result whose text tells the model what to do. A call
 * approved with {@link approve} runs only with the arguments the human saw; other arguments fail the run
 * with an `ApprovalMismatchError`, and nothing runs.
 * @example
 * import { tool } from "@openai/agents";
 * import { z } from "zod";
 * import { memoryStore } from "idempotool";
 * import { idempotentTool } from "idempotool/openai-agents";
 *
 * const sendEmail = tool(
 *   idempotentTool(
 *     {
 *       name: "send_email",
 *       description: "Send an email",
 *       parameters: z.object({ to: z.string(), subject: z.string(), body: z.string() }),
 *       execute: async ({ to }) => ({ messageId: `m-${to}` }),
 *     },
 *     { store: memoryStore(), intentFields: ["to", "subject"] },
 *   ),
 * );
 */
export function idempotentTool<
  TParameters extends ToolInputParameters,
  CONTEXT = unknown,
  MODE extends OutputMode = "envelope",
>(
  toolOptions: ToolOptions<TParameters, CONTEXT>,
  options: IdempotentToolOptions<ToolExecuteArgument<TParameters>, CONTEXT, MODE>,
): ToolOptions<TParameters, CONTEXT> {
  type INPUT = ToolExecuteArgument<TParameters>;
  const given = toolOptions as Partial<Record<string, unknown>> | undefined;
  const toolName = typeof options?.name === "string" ? options.name : given?.name;
  const label = `idempotentTool(${typeof toolName === "string" ? toolName : "?"})`;
  if (typeof options !== "object" || options === null) {
    throw new IdempotencyError("invalid_options", `${label}: options must be an object.`);
  }
  if (typeof given !== "object" || given === null || typeof given.execute !== "function") {
    throw new IdempotencyError(
      "invalid_options",
      `${label}: the first argument must be the options of tool(), with an execute function.`,
    );
  }
  if (given.outputSchema !== undefined) {
    // The SDK validates execute's result against it, and the envelope has another shape.
    invalidOption(
      label,
      "outputSchema",
      "is not supported on an idempotent tool; describe the result instead",
    );
  }
  const execute = given.execute as (input: INPUT, runContext: unknown, details: unknown) => unknown;
  const userErrorFunction = given.errorFunction;

  const split = splitToolCallOptions(options, label);
  const fields = split.fields;
  const mode = split.mode as MODE;
  // idempotent() validates the name, the store and the rest of its options, naming the one at fault.
  const wrapped = idempotent(
    async (input: INPUT, context: ToolContext) => {
      const { runContext, details } = currentCall.getStore() ?? { runContext: undefined, details: {} };
      // The tool sees the signal of its claim: it aborts with the caller's signal or when the claim is lost.
      const own = { ...details, signal: context.signal };
      contexts.set(own, context);
      return execute(input, runContext, own);
    },
    { ...split.core, name: toolName as string },
  );
  const name = wrapped.toolName;
  const scopeOf = scopeOfOption(options.scope);
  if (
    userErrorFunction !== undefined &&
    userErrorFunction !== null &&
    typeof userErrorFunction !== "function"
  ) {
    invalidOption(label, "errorFunction", "must be a function or null");
  }

  const policy: KeyPolicy = {
    tool: name,
    callName: typeof given.name === "string" ? given.name : name,
    clock: options.clock ?? systemClock,
    keyOf: (input, runContext, call) => {
      const context = runContext as RunContext<CONTEXT>;
      if (options.key) return options.key(input as INPUT, context);
      const turnId = options.turnId ? options.turnId(context, call) : runTurnId(runContext);
      return intentKey<unknown>(turnId, name, input, fields);
    },
    scopeOf: (runContext) => scopeOf(runContext as RunContext<CONTEXT>),
  };

  const wrappedExecute = async (input: INPUT, runContext?: RunContext<CONTEXT>, details?: CallDetails) => {
    const context = runContext ?? ({ context: {} } as RunContext<CONTEXT>);
    const call = details?.toolCall;
    let envelope: Envelope<unknown>;
    let approved: string | undefined;
    try {
      const scope = policy.scopeOf(context as RunContext<unknown>);
      approved = approvedKey(name, scope, context, call);
      const key = approved ?? policy.keyOf(input, context as RunContext<unknown>, call);
      envelope = await currentCall.run({ runContext: context, details: details ?? {} }, () =>
        wrapped(input, {
          key,
          scope,
          ...(details?.signal === undefined ? {} : { signal: details.signal }),
        }),
      );
    } catch (error) {
      if (details?.signal?.aborted) throw error;
      if (error instanceof ApprovalMismatchError) throw error;
      if (isIdempotencyError(error) || error instanceof ReplayedFailureError) {
        throw toolCallErrorOf(error, name);
      }
      throw error;
    } finally {
      // The approval was for this run. A context object used again for the next run must not carry it to
      // a call that happens to reuse the call id; a saved copy of this run keeps it for a retried resume.
      if (approved !== undefined && call !== undefined) forgetApproval(context.context, call.callId);
    }
    return modelOutputOf(envelope, mode, name);
  };

  // What the model reads when a call gives no result. The SDK's own default asks it to try again, which is
  // the wrong advice for a conflict, a call in flight or an unknown outcome: those carry their own text.
  const errorFunction = async (runContext: RunContext<CONTEXT>, error: unknown) => {
    // An approval that does not match fails the run: the application must ask the human again.
    if (error instanceof ApprovalMismatchError) throw error;
    if (error instanceof ToolCallError) return error.message;
    if (typeof userErrorFunction === "function") {
      return (userErrorFunction as (runContext: unknown, error: unknown) => unknown)(runContext, error);
    }
    if (userErrorFunction === null) throw error;
    return toolCallErrorOf(error, name).message;
  };

  // Without a name of its own, tool() would name the tool after the wrapper function.
  const result = {
    ...given,
    name: policy.callName,
    execute: wrappedExecute,
    errorFunction,
  } as unknown as ToolOptions<TParameters, CONTEXT>;
  policies.set(result, policy);
  return result;
}

/**
 * The key a human approved this call under, after checking that the call's arguments are the approved
 * ones; undefined when the call was not approved through {@link approve}.
 * @throws ApprovalMismatchError when the arguments differ from the approved ones.
 */
function approvedKey(
  tool: string,
  scope: string,
  runContext: { readonly context: unknown },
  call: AgentToolCall | undefined,
): string | undefined {
  if (call === undefined) return undefined;
  return approvedKeyOf(approvalOf(runContext.context, call.callId), tool, scope, () =>
    argumentsOfCall(call.arguments, tool),
  );
}
