/**
 * A tool of a hand-written agent loop (OpenAI, Anthropic, any provider): an idempotent tool plus what the
 * loop needs to call it from a model's tool call: how to check its arguments and which of them name the intent.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { IdempotencyError } from "../core/errors.js";
import type { FieldList } from "../core/field-list.js";
import { type Envelope, idempotent, type Tool, type ToolContext } from "../core/idempotent.js";
import { invalidOption } from "../core/option-checks.js";
import type { Effect, IdempotentOptions } from "../core/options.js";
import { intentFieldsOf, intentKey } from "../tool-calls/intent-key.js";
import { modelOutputOf, type OutputMode, outputModeOf } from "../tool-calls/model-output.js";
import {
  type ThrownKind,
  ToolCallError,
  ToolCallErrorCode,
  thrownKindOf,
  toolCallErrorOf,
} from "../tool-calls/tool-call-error.js";

/** Options of {@link loopTool}: those of `idempotent()` (the key comes from the turn), and how the loop calls it. */
export interface LoopToolOptions<A, R> extends Omit<IdempotentOptions<A, R>, "key"> {
  /**
   * Checks the model's arguments and gives them their type; throw to reject them (nothing runs, and the
   * model is told why). Default: the parsed JSON as it came. A zod schema fits as `(input) => Schema.parse(input)`.
   */
  readonly parse?: ((input: unknown) => A) | undefined;
  /**
   * The top-level arguments that say *what* is intended (the recipient and subject, not the wording), so
   * a reworded duplicate in the same turn is still the same intent. Default: all arguments. A call with
   * none of them is rejected as invalid arguments.
   */
  readonly intentFields?: FieldList<A> | undefined;
  /** What the model reads: `"envelope"` (default) or `"merge"` (see {@link OutputMode}). */
  readonly output?: OutputMode | undefined;
}

/** A tool a loop dispatches to. Make one with {@link loopTool}. */
export interface LoopTool {
  /** The name the model calls it by. */
  readonly toolName: string;
  readonly effect: Effect;
  /**
   * Run one tool call under the key of its intent in `turn`. Never rejects for the call's own failures:
   * they come back as an outcome with a {@link ToolCallError}. Rejects only when `turn.signal` aborts.
   */
  call(request: ToolCallRequest, turn: TurnOptions): Promise<ToolCallOutcome>;
}

/** The turn a batch of tool calls belongs to: the per-turn key policy's input. */
export interface TurnOptions {
  /**
   * The id of the user turn these calls answer: the same for every model round of one user message
   * (so re-emissions are replays), new for every new user message (so a request made again runs again).
   * Use your message id; never a time or a random value made per round.
   */
  readonly turnId: string;
  /** A namespace for the keys (user, conversation, tenant). Default "default". */
  readonly scope?: string | undefined;
  /** Aborts waiting for calls in flight, and is passed to the tools. */
  readonly signal?: AbortSignal | undefined;
}

/** One tool call as the model emitted it: parsed arguments as `input`, or the raw JSON text as `argumentsJson`. */
export type ToolCallRequest =
  | { readonly id: string; readonly name: string; readonly input: unknown }
  | { readonly id: string; readonly name: string; readonly argumentsJson: string };

/** What became of one tool call. `output` is what the model reads; on failure, `error.message` is. */
export type ToolCallOutcome =
  | {
      readonly ok: true;
      readonly callId: string;
      readonly tool: string;
      readonly key: string;
      readonly envelope: Envelope<unknown>;
      /** What the model reads: the envelope, or the merged result (see the `output` option). */
      readonly output: unknown;
    }
  | {
      readonly ok: false;
      readonly callId: string;
      readonly tool: string;
      /** Absent when the call failed before it had a key (unknown tool, invalid arguments). */
      readonly key?: string;
      readonly error: ToolCallError;
    };

/** A call checked and keyed, ready to run; or its outcome already, when it cannot run. */
export type PreparedCall =
  | { readonly ready: true; readonly key: string; run(): Promise<ToolCallOutcome> }
  | { readonly ready: false; readonly outcome: ToolCallOutcome };

const preparers = new WeakMap<LoopTool, (request: ToolCallRequest, turn: TurnOptions) => PreparedCall>();

/** One call on its way through idempotent(): how the tool's own throw ended, if the tool ran and threw. */
interface CallState {
  thrown?: ThrownKind;
}

/** The state of the call whose tool body is running: the tool runs in the async context of its caller. */
const currentCall = new AsyncLocalStorage<CallState>();

/**
 * Make a tool for an agent loop: `idempotent()` under the per-turn key policy. The key of a call is
 * `intentKey(turnId, name, intent fields)`, never the tool-call id, which is new on every emission.
 * @example
 * import { memoryStore } from "idempotool";
 * import { loopTool } from "idempotool/loops";
 *
 * const sendEmail = loopTool(
 *   async (args: { to: string; subject: string; body: string }) => ({ messageId: `m-${args.to}` }),
 *   {
 *     name: "send_email",
 *     store: memoryStore(),
 *     parse: (input) => input as { to: string; subject: string; body: string },
 *     intentFields: ["to", "subject"],
 *   },
 * );
 */
export function loopTool<A, R>(execute: Tool<A, R>, options: LoopToolOptions<A, Awaited<R>>): LoopTool {
  if (typeof execute !== "function") {
    throw new IdempotencyError(
      "invalid_options",
      "loopTool(): the first argument must be the tool function.",
    );
  }
  // idempotent() validates the name, the store and the rest, naming the option at fault.
  const wrapped = idempotent(async (args: A, context: ToolContext): Promise<Awaited<R>> => {
    try {
      return await execute(args, context);
    } catch (error) {
      // The core hands back a declared outcome's own error: what was declared is seen only here.
      const call = currentCall.getStore();
      if (call) call.thrown = thrownKindOf(error);
      throw error;
    }
  }, options);
  const name = wrapped.toolName;
  const where = `loopTool(${name})`;
  const parse = options.parse;
  if (parse !== undefined && typeof parse !== "function") {
    invalidOption(where, "parse", "must be a function");
  }
  const fields = intentFieldsOf(options.intentFields, where);
  const mode = outputModeOf(options.output, where);

  const prepare = (request: ToolCallRequest, turn: TurnOptions): PreparedCall => {
    const callId = request.id;
    const failure = (error: ToolCallError, key?: string): ToolCallOutcome => ({
      ok: false,
      callId,
      tool: name,
      ...(key === undefined ? {} : { key }),
      error,
    });
    const failed = (error: ToolCallError): PreparedCall => ({ ready: false, outcome: failure(error) });
    let input: unknown;
    if ("argumentsJson" in request) {
      try {
        input = JSON.parse(request.argumentsJson);
      } catch (error) {
        return failed(
          new ToolCallError(
            name,
            ToolCallErrorCode.invalidArguments,
            `${name} was not run: its arguments are not valid JSON (${errorMessage(error)}). ` +
              "Call it again with a JSON object as arguments.",
            { cause: error },
          ),
        );
      }
    } else {
      input = request.input;
    }
    let args: A;
    try {
      args = parse ? parse(input) : (input as A);
    } catch (error) {
      return failed(
        new ToolCallError(
          name,
          ToolCallErrorCode.invalidArguments,
          `${name} was not run: its arguments are invalid (${errorMessage(error)}). Fix them and call it again.`,
          { cause: error },
        ),
      );
    }
    let key: string;
    try {
      key = intentKey<unknown>(turn.turnId, name, args, fields);
    } catch (error) {
      return failed(toolCallErrorOf(error, name));
    }
    return {
      ready: true,
      key,
      run: async () => {
        const call: CallState = {};
        try {
          const envelope = await currentCall.run(call, () =>
            wrapped(args, {
              key,
              ...(turn.scope === undefined ? {} : { scope: turn.scope }),
              ...(turn.signal === undefined ? {} : { signal: turn.signal }),
            }),
          );
          return {
            ok: true,
            callId,
            tool: name,
            key,
            envelope,
            output: modelOutputOf(envelope, mode, name),
          } satisfies ToolCallOutcome;
        } catch (error) {
          // The caller gave up on the whole batch: that is theirs to see, not a result for the model.
          if (turn.signal?.aborted) throw error;
          return failure(toolCallErrorOf(error, name, { thrown: call.thrown, effect: wrapped.effect }), key);
        }
      },
    };
  };

  const tool: LoopTool = {
    toolName: name,
    effect: wrapped.effect,
    async call(request, turn) {
      const prepared = prepare(request, checkTurn(turn));
      return prepared.ready ? prepared.run() : prepared.outcome;
    },
  };
  preparers.set(tool, prepare);
  return tool;
}

/** The dispatcher's access to a tool's two halves: keying a call, then running it. */
export function prepareCall(tool: LoopTool, request: ToolCallRequest, turn: TurnOptions): PreparedCall {
  const prepare = preparers.get(tool);
  if (!prepare) {
    throw new IdempotencyError(
      "invalid_options",
      `${String(tool?.toolName)} is not a loop tool: make it with loopTool(fn, options).`,
    );
  }
  return prepare(request, turn);
}

/** Check the turn once per batch; a missing turn id is a programming error, not a result for the model. */
export function checkTurn(turn: TurnOptions): TurnOptions {
  if (typeof turn !== "object" || turn === null || typeof turn.turnId !== "string" || turn.turnId === "") {
    throw new IdempotencyError(
      "idempotency_key_missing",
      "Tool calls need { turnId }: the id of the user turn they answer, the same for every model round of " +
        "that turn (your user message id). It keys each call per intent; idempotool never makes one up.",
    );
  }
  const scope: unknown = turn.scope;
  if (scope !== undefined && (typeof scope !== "string" || scope.length === 0 || scope.length > 255)) {
    throw new IdempotencyError("invalid_arguments", "The scope must be a string of 1–255 characters.");
  }
  return turn;
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
