/**
 * Mastra tools made safe to call twice: the options of a `createTool()` whose `execute` runs once per
 * intent per run.
 * @module
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { ToolExecutionContext } from "@mastra/core/tools";
import { type Clock, systemClock } from "../core/clock.js";
import { ApprovalMismatchError, ErrorCode, IdempotencyError, isIdempotencyError } from "../core/errors.js";
import type { FieldList } from "../core/field-list.js";
import { type Envelope, idempotent, type ToolContext } from "../core/idempotent.js";
import { invalidOption } from "../core/option-checks.js";
import type { RecordOptions } from "../core/options.js";
import { ReplayedFailureError } from "../core/outcomes.js";
import { approvedKeyOf } from "../tool-calls/call-approval.js";
import { intentKey } from "../tool-calls/intent-key.js";
import { scopeOfOption, splitToolCallOptions } from "../tool-calls/key-policy-options.js";
import { modelOutputOf, type OutputMode } from "../tool-calls/model-output.js";
import { toolCallErrorOf } from "../tool-calls/tool-call-error.js";
import { approvalOf } from "./approval-binding.js";

/** The part of a Mastra tool's options (what `createTool()` takes) that the wrapper reads. */
export interface MastraToolOptions {
  readonly id: string;
  // biome-ignore lint/suspicious/noExplicitAny: the input and context types are the tool's own.
  readonly execute?: ((inputData: any, context: any) => Promise<unknown>) | undefined;
}

/** The input type of a tool's `execute`. */
export type InputOf<T extends MastraToolOptions> = Parameters<NonNullable<T["execute"]>>[0];

/** Options of {@link idempotentTool}: the {@link RecordOptions} of `idempotent()`, and the key policy. */
export interface IdempotentToolOptions<INPUT, MODE extends OutputMode = "envelope">
  extends RecordOptions<INPUT, unknown> {
  /** The name in the keys and records. Default: the tool's `id`. */
  readonly name?: string | undefined;
  /**
   * The arguments that say *what* is intended (recipient and subject, not the wording): with the turn id
   * and the tool's name they make the key. Default: all arguments.
   */
  readonly intentFields?: FieldList<INPUT> | undefined;
  /**
   * The id of the turn a call answers: the same for every repeat of one intent, new for a new request.
   * Default: the id of the run the call belongs to (the agent's `runId`, or the workflow run's when the
   * tool runs as a workflow step), which Mastra keeps across a suspend and a resume. Read your own id
   * (the user's message id) from the request context when a user may run the same request again in a new
   * run: `(context) => context.requestContext.get("messageId")`.
   */
  readonly turnId?: ((context: ToolExecutionContext) => string) | undefined;
  /** The whole key, when the per-turn policy does not fit. Must be the same on every repeat of one intent. */
  readonly key?: ((input: INPUT, context: ToolExecutionContext) => string) | undefined;
  /**
   * The namespace of the keys: a user, a conversation, a tenant. Default "default". Set it whenever one
   * store serves more than one user.
   */
  readonly scope?: string | ((context: ToolExecutionContext) => string) | undefined;
  /** What `execute` returns to the model: `"envelope"` (default) or `"merge"` (see {@link OutputMode}). */
  readonly output?: MODE | undefined;
}

/** How a wrapped tool keys a call: kept per wrapped options object, for the approval helpers. */
export interface KeyPolicy {
  /** The name in the keys and records. */
  readonly tool: string;
  /** The tool's id: the name the model calls it by. */
  readonly id: string;
  readonly clock: Clock;
  keyOf(input: unknown, context: ToolExecutionContext): string;
  scopeOf(context: ToolExecutionContext): string;
}

const policies = new WeakMap<object, KeyPolicy>();

/** The key policy of options made by {@link idempotentTool}, or undefined for anything else. */
export function keyPolicyOf(toolOptions: object): KeyPolicy | undefined {
  return policies.get(toolOptions);
}

/** The run a call belongs to: the workflow run when the tool runs as a step, else the agent's run. */
export function runIdOf(context: ToolExecutionContext | undefined): string | undefined {
  const id = context?.workflow?.runId ?? (context as { runId?: unknown } | undefined)?.runId;
  return typeof id === "string" && id.length > 0 ? id : undefined;
}

/** The id of the agent's tool call, when an agent made the call. */
export function toolCallIdOf(context: ToolExecutionContext | undefined): string | undefined {
  const id = context?.agent?.toolCallId ?? (context as { toolCallId?: unknown } | undefined)?.toolCallId;
  return typeof id === "string" && id.length > 0 ? id : undefined;
}

/** What Mastra passed for the call that claimed the key, carried through `idempotent()` to the tool body. */
const currentCall = new AsyncLocalStorage<ToolExecutionContext>();

/** The idempotency context of the call whose tool body is running, by the context object it was handed. */
const contexts = new WeakMap<object, ToolContext>();

/**
 * The idempotency context of a call inside a wrapped tool's `execute`: its key (pass it downstream as an
 * idempotency key), scope and attempt. Pass `execute`'s second argument. Undefined outside a wrapped tool.
 * @example
 * import { createTool } from "@mastra/core/tools";
 * import { z } from "zod";
 * import { memoryStore } from "idempotool";
 * import { idempotentTool, toolContextOf } from "idempotool/mastra";
 *
 * const createInvoice = createTool(
 *   idempotentTool(
 *     {
 *       id: "create_invoice",
 *       description: "Create an invoice",
 *       inputSchema: z.object({ customer: z.string(), cents: z.number() }),
 *       execute: async (input, context) => ({ invoice: `inv-${input.customer}`, key: toolContextOf(context)?.key }),
 *     },
 *     { store: memoryStore() },
 *   ),
 * );
 */
export function toolContextOf(context: object): ToolContext | undefined {
  return contexts.get(context);
}

/**
 * Make the options of a Mastra `createTool()` safe to call twice: pass them through this, then to
 * `createTool()`. Every repeat of one intended call runs `execute` once.
 *
 * A model repeats itself: the same call twice in one response (Mastra runs both, each with its own
 * `toolCallId`), or again in a later step of the same run. The key is the intent, not the call id:
 * `intentKey(turnId, id, intent fields)`, where the turn id is the run's id by default. The first call
 * runs; the repeats wait for it and get its outcome as a replay. A new run (the user's next message) has
 * a new run id, a new key, and runs again. A run that suspends (for an approval, say) keeps its id, so a
 * call after the resume is keyed as before it.
 *
 * `execute` returns the envelope `{ result, was_replay, original_called_at, idempotency_key, expires_at }`
 * (plus a `note` on a replay), or with `output: "merge"` the tool's own object result with `was_replay`
 * and `original_called_at` merged in. A call that cannot be answered (a conflict, a call still running,
 * an unknown outcome, a store failure) throws a `ToolCallError` whose message tells the model what to do.
 * A call approved with {@link bindToolApproval} runs only with the arguments the human saw.
 * @throws IdempotencyError `invalid_options` for options that cannot work: no `execute`, an
 *   `outputSchema` (the envelope has another shape) or a tool that suspends itself (`suspendSchema`,
 *   `resumeSchema`: a suspended call would be recorded as done).
 * @example
 * import { createTool } from "@mastra/core/tools";
 * import { z } from "zod";
 * import { memoryStore } from "idempotool";
 * import { idempotentTool } from "idempotool/mastra";
 *
 * const sendEmail = createTool(
 *   idempotentTool(
 *     {
 *       id: "send_email",
 *       description: "Send an email",
 *       inputSchema: z.object({ to: z.string(), subject: z.string(), body: z.string() }),
 *       execute: async ({ to }) => ({ messageId: `m-${to}` }),
 *     },
 *     { store: memoryStore(), intentFields: ["to", "subject"] },
 *   ),
 * );
 */
export function idempotentTool<T extends MastraToolOptions, MODE extends OutputMode = "envelope">(
  toolOptions: T,
  options: IdempotentToolOptions<InputOf<T>, MODE>,
): T {
  type INPUT = InputOf<T>;
  const given = toolOptions as unknown as Partial<Record<string, unknown>> | undefined;
  const toolName = typeof options?.name === "string" ? options.name : given?.id;
  const label = `idempotentTool(${typeof toolName === "string" ? toolName : "?"})`;
  if (typeof options !== "object" || options === null) {
    throw new IdempotencyError(ErrorCode.invalidOptions, `${label}: options must be an object.`);
  }
  if (typeof given !== "object" || given === null || typeof given.execute !== "function") {
    throw new IdempotencyError(
      ErrorCode.invalidOptions,
      `${label}: the first argument must be the options of createTool(), with an execute function.`,
    );
  }
  if (given.outputSchema !== undefined) {
    // Mastra validates execute's result against it, and the envelope has another shape.
    invalidOption(
      label,
      "outputSchema",
      "is not supported on an idempotent tool; describe the result instead",
    );
  }
  for (const schema of ["suspendSchema", "resumeSchema"] as const) {
    if (given[schema] !== undefined) {
      // A tool that suspends returns before its work is done, and that return would be recorded as the outcome.
      invalidOption(
        label,
        schema,
        "is not supported: a tool that suspends itself would have its suspended call recorded as done; " +
          "ask for approval with requireApproval, or put the effect in a tool of its own",
      );
    }
  }
  if (given.toModelOutput !== undefined) {
    invalidOption(
      label,
      "toModelOutput",
      "is not supported on an idempotent tool: the model reads the envelope",
    );
  }
  const execute = given.execute as (input: INPUT, context: unknown) => Promise<unknown>;

  const split = splitToolCallOptions(options, label);
  const fields = split.fields;
  const mode = split.mode as MODE;
  // idempotent() validates the name, the store and the rest of its options, naming the one at fault.
  const wrapped = idempotent(
    async (input: INPUT, context: ToolContext) => {
      const mastra = currentCall.getStore() ?? ({} as ToolExecutionContext);
      // The tool sees the signal of its claim: it aborts with the caller's signal or when the claim is lost.
      const own = { ...mastra, abortSignal: context.signal };
      contexts.set(own, context);
      return execute(input, own);
    },
    { ...split.core, name: toolName as string },
  );
  const name = wrapped.toolName;

  const policy: KeyPolicy = {
    tool: name,
    id: given.id as string,
    clock: options.clock ?? systemClock,
    keyOf: (input, context) => {
      if (options.key) return options.key(input as INPUT, context);
      const turnId = options.turnId ? options.turnId(context) : runIdOf(context);
      if (turnId === undefined) {
        throw new IdempotencyError(
          ErrorCode.keyMissing,
          `${name}: the call belongs to no run (no runId in its context), so there is no turn to key it by. ` +
            "Call it through an agent or a workflow, or give the `turnId` or `key` option.",
        );
      }
      return intentKey<unknown>(turnId, name, input, fields);
    },
    scopeOf: scopeOfOption(options.scope),
  };

  const wrappedExecute = async (input: INPUT, mastra?: ToolExecutionContext) => {
    const context = mastra ?? ({} as ToolExecutionContext);
    let envelope: Envelope<unknown>;
    try {
      const scope = policy.scopeOf(context);
      const key = approvedKey(name, scope, input, context) ?? policy.keyOf(input, context);
      envelope = await currentCall.run(context, () =>
        wrapped(input, {
          key,
          scope,
          ...(context.abortSignal === undefined ? {} : { signal: context.abortSignal }),
        }),
      );
    } catch (error) {
      if (context.abortSignal?.aborted) throw error;
      // Its own message says what happened (nothing ran) and what to do; the application finds it by class.
      if (error instanceof ApprovalMismatchError) throw error;
      if (isIdempotencyError(error) || error instanceof ReplayedFailureError) {
        throw toolCallErrorOf(error, name);
      }
      // The tool's own errors, as the core hands them back, are the tool's contract: they pass as they are.
      throw error;
    }
    return modelOutputOf(envelope, mode, name);
  };

  const result = { ...given, execute: wrappedExecute } as unknown as T;
  policies.set(result, policy);
  return result;
}

/**
 * The key a human approved this call under, after checking that its arguments are the approved ones;
 * undefined when the call was not approved through `bindToolApproval`.
 * @throws ApprovalMismatchError when the arguments differ from the approved ones.
 */
function approvedKey(
  tool: string,
  scope: string,
  input: unknown,
  context: ToolExecutionContext,
): string | undefined {
  const callId = toolCallIdOf(context);
  if (callId === undefined) return undefined;
  return approvedKeyOf(approvalOf(context.requestContext, callId), tool, scope, () => input);
}
