/**
 * Vercel AI SDK tools made safe to call twice: a `tool()` whose `execute` runs once per intent per turn.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { Tool } from "ai";
import { IdempotencyError, isIdempotencyError } from "../core/errors.js";
import type { FieldList } from "../core/field-list.js";
import { type Envelope, idempotent, type ToolContext } from "../core/idempotent.js";
import type { IdempotentOptions } from "../core/options.js";
import { ReplayedFailureError } from "../core/outcomes.js";
import { intentKey } from "../tool-calls/intent-key.js";
import { splitToolCallOptions } from "../tool-calls/key-policy-options.js";
import {
  type ModelOutput,
  modelOutputOf,
  noteFor,
  OutputMode,
  type ReplayMarker,
  replayMarkerOf,
} from "../tool-calls/model-output.js";
import { toolCallErrorOf } from "../tool-calls/tool-call-error.js";
import type { ToolExecutionOptions } from "./execution-options.js";
import { turnIdFromMessages } from "./turn-id.js";

/** Options of {@link idempotentTool}: those of `idempotent()` (the key is derived), and the key policy. */
export interface IdempotentToolOptions<INPUT, OUTPUT, MODE extends OutputMode = "envelope">
  extends Omit<IdempotentOptions<INPUT, Awaited<OUTPUT>>, "key"> {
  /**
   * The arguments that say *what* is intended (recipient and subject, not the wording): with the turn id
   * and the tool's name they make the key. Default: all arguments. A call with none of them is rejected
   * as invalid arguments.
   */
  readonly intentFields?: FieldList<INPUT> | undefined;
  /**
   * The id of the user turn a call answers: the same for every step of one turn, new for every new user
   * message. Default: {@link turnIdFromMessages} of `options.messages`. Read your own message id from the
   * tool's context when you have one (`options.context` on AI SDK 7, `options.experimental_context` on 6).
   */
  readonly turnId?: ((options: ToolExecutionOptions) => string) | undefined;
  /** The whole key, when the per-turn policy does not fit. Must be the same on every repeat of one intent. */
  readonly key?: ((input: INPUT, options: ToolExecutionOptions) => string) | undefined;
  /**
   * The namespace of the keys: a user, a conversation, a tenant. Default "default". Set it whenever one
   * store serves more than one user: two conversations with identical user messages share turn ids.
   */
  readonly scope?: string | ((options: ToolExecutionOptions) => string) | undefined;
  /** What `execute` returns to the model: `"envelope"` (default) or `"merge"` (see {@link OutputMode}). */
  readonly output?: MODE | undefined;
}

/** The execution options of the call whose tool body is running (the one that claimed the key). */
const currentExecution = new AsyncLocalStorage<ToolExecutionOptions>();
/** The idempotency context of each execution options object handed to a wrapped `execute`. */
const contexts = new WeakMap<ToolExecutionOptions, ToolContext>();

/**
 * The idempotency context of a call inside a wrapped tool's `execute`: its key (pass it downstream as an
 * idempotency key), scope and attempt. Undefined outside a wrapped tool.
 * @example
 * import { tool } from "ai";
 * import { z } from "zod";
 * import { toolContextOf } from "idempotool/ai-sdk";
 *
 * const createInvoice = tool({
 *   inputSchema: z.object({ customer: z.string(), cents: z.number() }),
 *   execute: async (input, options) => {
 *     const key = toolContextOf(options)?.key;
 *     return { invoice: `inv-${input.customer}`, idempotencyKey: key };
 *   },
 * });
 */
export function toolContextOf(options: ToolExecutionOptions): ToolContext | undefined {
  return contexts.get(options);
}

/**
 * Wrap an AI SDK `tool()` so that every repeat of one intended call runs it once.
 *
 * A model repeats itself: the same call twice in one step (executed concurrently, each with its own
 * `toolCallId`), or again in a later step of the same turn. The key is the intent, not the call id:
 * `intentKey(turnId, name, intent fields)`, with the turn id read from the conversation. The first call
 * runs; the repeats wait for it and get its outcome as a replay. A new user message is a new turn, a new
 * key, and runs again (Case 2 in docs/operation-models.md).
 *
 * `execute` returns the envelope `{ result, was_replay, original_called_at, idempotency_key, expires_at }`
 * (plus a `note` on a replay), or with `output: "merge"` the tool's own object result with `was_replay`
 * and `original_called_at` merged in. A call that cannot be answered (a conflict, a call still running,
 * an unknown outcome, a store failure) throws a `ToolCallError` whose message tells the model what to do;
 * the AI SDK turns it into a tool-error part. An error the core hands back as the tool threw it (after a
 * `native-key` release, `notExecuted`, `definitiveFailure`) passes through unchanged; under the default
 * `irreversible` class, an unexplained throw is an unknown outcome, and comes as a `ToolCallError` too.
 * @example
 * import { tool } from "ai";
 * import { z } from "zod";
 * import { memoryStore } from "idempotool";
 * import { idempotentTool } from "idempotool/ai-sdk";
 *
 * const sendEmail = idempotentTool(
 *   tool({
 *     description: "Send an email",
 *     inputSchema: z.object({ to: z.string(), subject: z.string(), body: z.string() }),
 *     execute: async ({ to }) => ({ messageId: `m-${to}` }),
 *   }),
 *   { name: "send_email", store: memoryStore(), intentFields: ["to", "subject"] },
 * );
 */
export function idempotentTool<INPUT, OUTPUT, MODE extends OutputMode = "envelope">(
  tool: Tool<INPUT, OUTPUT>,
  options: IdempotentToolOptions<INPUT, OUTPUT, MODE>,
): Tool<INPUT, ModelOutput<OUTPUT, MODE>> {
  const execute = (tool as { execute?: unknown } | undefined)?.execute;
  const label = `idempotentTool(${typeof options?.name === "string" ? options.name : "?"})`;
  if (typeof options !== "object" || options === null) {
    throw new IdempotencyError("invalid_options", `${label}: options must be an object.`);
  }
  if (typeof execute !== "function") {
    throw new IdempotencyError(
      "invalid_options",
      `${label}: the tool has no execute function, so nothing runs on this side to make idempotent.`,
    );
  }
  // Called as the AI SDK calls it: as a method of the tool.
  const runTool = (execute as (input: INPUT, options: ToolExecutionOptions) => unknown).bind(tool);

  // The key is derived here, per call: the core's own `key` option is not used.
  const split = splitToolCallOptions(options, label);
  const fields = split.fields;
  const mode = split.mode as MODE;
  // idempotent() validates the name, the store and the rest of its options, naming the one at fault.
  const wrapped = idempotent(async (input: INPUT, context: ToolContext): Promise<Awaited<OUTPUT>> => {
    const execution = currentExecution.getStore() ?? { toolCallId: "", messages: [], context: undefined };
    // The tool sees the signal of its claim: it aborts with the caller's signal or when the claim is lost.
    const own: ToolExecutionOptions = { ...execution, abortSignal: context.signal };
    contexts.set(own, context);
    return (await finalValue(runTool(input, own))) as Awaited<OUTPUT>;
  }, split.core);
  const name = wrapped.toolName;
  const scopeOption = options.scope;

  const keyOf = (input: INPUT, execution: ToolExecutionOptions): string => {
    if (options.key) return options.key(input, execution);
    const turnId = options.turnId ? options.turnId(execution) : turnIdFromMessages(execution.messages);
    return intentKey<unknown>(turnId, name, input, fields);
  };

  const wrappedExecute = async (input: INPUT, execution: ToolExecutionOptions) => {
    let envelope: Envelope<Awaited<OUTPUT>>;
    try {
      const key = keyOf(input, execution);
      const scope = typeof scopeOption === "function" ? scopeOption(execution) : scopeOption;
      envelope = await currentExecution.run(execution, () =>
        wrapped(input, {
          key,
          ...(scope === undefined ? {} : { scope }),
          ...(execution.abortSignal === undefined ? {} : { signal: execution.abortSignal }),
        }),
      );
    } catch (error) {
      if (execution.abortSignal?.aborted) throw error;
      if (isIdempotencyError(error) || error instanceof ReplayedFailureError) {
        throw toolCallErrorOf(error, name);
      }
      // The tool's own errors, as the core hands them back, are the tool's contract: they pass as they are.
      throw error;
    }
    return modelOutputOf(envelope, mode, name);
  };

  const { toModelOutput, outputSchema, ...rest } = tool as {
    toModelOutput?: unknown;
    outputSchema?: unknown;
  } & Record<string, unknown>;
  return {
    ...rest,
    execute: wrappedExecute,
    // An envelope does not match the tool's output schema; a merged result still does (extra fields).
    ...(outputSchema !== undefined && mode === OutputMode.merge ? { outputSchema } : {}),
    ...(typeof toModelOutput === "function"
      ? { toModelOutput: markedModelOutput(toModelOutput as UserToModelOutput, mode, name) }
      : {}),
  } as unknown as Tool<INPUT, ModelOutput<OUTPUT, MODE>>;
}

/** What a `toModelOutput` makes: text, JSON or content parts for the model. */
type ToolResultOutput = Awaited<ReturnType<NonNullable<Tool<unknown, unknown>["toModelOutput"]>>>;

type UserToModelOutput = (options: {
  toolCallId: string;
  input: unknown;
  output: unknown;
}) => ToolResultOutput | PromiseLike<ToolResultOutput>;

/**
 * Keep the tool's own `toModelOutput` working: it gets the tool's result as it always did, and what it
 * makes for the model gains the replay note when there is one.
 */
function markedModelOutput(user: UserToModelOutput, mode: OutputMode, tool: string): UserToModelOutput {
  return async ({ toolCallId, input, output }) => {
    const envelope = envelopeOf(output, mode);
    if (!envelope) return user({ toolCallId, input, output });
    const inner = await user({ toolCallId, input, output: envelope.result });
    const marker = replayMarkerOf(envelope, tool);
    const note = noteFor(envelope, tool);
    if (note === undefined) return inner;
    switch (inner.type) {
      case "text":
        return { ...inner, value: `${inner.value}\n\n${note}` };
      case "json":
        return { ...inner, value: { result: inner.value, ...jsonMarker(marker) } };
      case "content":
        return { ...inner, value: [...inner.value, { type: "text", text: note }] };
      default:
        return inner;
    }
  };
}

/**
 * The envelope fields behind a wrapped tool's output, or undefined for an output we did not make. In
 * "merge" mode an object result carries the marker itself; anything else came as the envelope, which
 * alone has `idempotency_key` and `expires_at` beside `result`.
 */
function envelopeOf(output: unknown, mode: OutputMode): Envelope<unknown> | undefined {
  if (typeof output !== "object" || output === null) return undefined;
  const marked = output as Partial<Envelope<unknown>>;
  if (typeof marked.was_replay !== "boolean" || typeof marked.original_called_at !== "string")
    return undefined;
  if (mode === OutputMode.merge && !isEnvelope(marked))
    return { ...(marked as Envelope<unknown>), result: output };
  return marked as Envelope<unknown>;
}

function isEnvelope(value: Partial<Envelope<unknown>>): boolean {
  return (
    "result" in value && typeof value.idempotency_key === "string" && typeof value.expires_at === "string"
  );
}

function jsonMarker(marker: ReplayMarker): { [key: string]: string | boolean | { [key: string]: string } } {
  return {
    was_replay: marker.was_replay,
    original_called_at: marker.original_called_at,
    ...(marker.note === undefined ? {} : { note: marker.note }),
    ...(marker.recent_similar_call === undefined
      ? {}
      : { recent_similar_call: { ...marker.recent_similar_call } }),
  };
}

/** What `execute` finally gave: its value, or the last value of a streaming (async iterable) tool. */
async function finalValue(value: unknown): Promise<unknown> {
  if (typeof value !== "object" || value === null || !(Symbol.asyncIterator in value)) return value;
  let last: unknown;
  for await (const part of value as AsyncIterable<unknown>) last = part;
  return last;
}
