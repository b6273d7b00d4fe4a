import { systemClock } from "../core/clock.js";
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import { type Envelope, idempotent, type ToolContext } from "../core/idempotent.js";
import { keyedByArguments } from "../core/keys.js";
import { invalidOption } from "../core/option-checks.js";
import type { IdempotentOptions } from "../core/options.js";
import { notExecuted } from "../core/outcomes.js";
import { type CallKey, callKey, type KeySources, maxKeylessWindowMs, metaKeyFields } from "./call-key.js";
import { defaultScope } from "./default-scope.js";
import { keyDescription, keyRequiredMessage } from "./key-description.js";
import {
  type InputRequiredResult,
  isInputRequired,
  type McpServerLike,
  type RegisteredToolOf,
  type RequestContextFields,
  requestMeta,
  type ToolExtraOf,
  type ToolResult,
} from "./mcp-types.js";
import { paramsKeyMetaField } from "./params-key.js";
import {
  bindingOf,
  openQuestion,
  type QuestionBinding,
  type QuestionSeal,
  type SealedQuestion,
} from "./question-seal.js";
import { envelopeResult, errorResult, structuredField, type ThrownKind, thrownKind } from "./tool-results.js";
import {
  type AnySchema,
  type ArgsOf,
  flavourOf,
  type ObjectSchema,
  type RawShape,
  type ToolSchema,
  type ZodFlavour,
  type ZodNamespace,
  zodNamespace,
} from "./zod-namespace.js";

const owner = "registerIdempotentTool()";

/** The name of the input field every idempotent MCP tool requires. */
export const keyField = "idempotency_key";

const maxKeyLength = 255;

/** MCP's tool annotations; `idempotentHint` is set to true on every idempotent tool. */
export interface ToolAnnotations {
  readonly title?: string | undefined;
  readonly readOnlyHint?: boolean | undefined;
  readonly destructiveHint?: boolean | undefined;
  readonly idempotentHint?: boolean | undefined;
  readonly openWorldHint?: boolean | undefined;
  readonly [hint: string]: unknown;
}

/**
 * The tool's definition, as `McpServer.registerTool` takes it. Schemas are raw zod shapes
 * (`{ to: z.string() }`) or zod objects (`z.object({ to: z.string() })`).
 */
export interface IdempotentToolConfig<Input extends ToolSchema, Output extends ToolSchema = RawShape> {
  readonly title?: string;
  readonly description?: string;
  /** The tool's own arguments, without `idempotency_key` (it is added). Zod 3 or zod 4, not both. */
  readonly inputSchema: Input;
  /** The shape of `structuredContent`, if the tool returns one. `_idempotency` is added to it. */
  readonly outputSchema?: Output;
  /** Kept as given, except `idempotentHint`, which is true: repeats of one key do not run again. */
  readonly annotations?: ToolAnnotations;
  readonly _meta?: Record<string, unknown>;
}

/**
 * The tool's body. It gets its arguments without `idempotency_key`, what the SDK hands a tool beside them
 * (SDK 1.x: `extra`; SDK 2.x: `ctx`), and the idempotency context (`context.key` to pass downstream,
 * `context.attempt`, `context.signal`). What it returns is the outcome: recorded, and replayed to every
 * repeat of the key, `isError` or not. An input-required answer (SDK 2.x `inputRequired(…)`) is a question,
 * not an outcome: it goes to the client unrecorded, and the client's continuation runs the tool again.
 * Throw `notExecuted(error)` when nothing happened (a retry may run), `definitiveFailure(error)` for a
 * failure every repeat should get again; any other throw is judged by the effect class.
 */
export type IdempotentToolHandler<Args, Extra = RequestContextFields> = (
  args: Args,
  extra: Extra,
  context: ToolContext,
) => ToolResult | InputRequiredResult | Promise<ToolResult | InputRequiredResult>;

/**
 * How the tool advertises its `idempotency_key` argument: `"required"` (listed, and the SDK refuses a call
 * without it), `"optional"` (listed, and a call may leave it out when its `_meta` carries the key) or
 * `"hidden"` (not listed and not read: the key comes from `_meta` only, put there by the client).
 */
export type KeyArgument = "required" | "optional" | "hidden";

/** Where a tool reads its key: the argument, and which fields of the request's `_meta`. */
export interface KeyFrom {
  /** Default `"required"`. */
  readonly argument?: KeyArgument | undefined;
  /**
   * The `_meta` fields that may carry the key. Default `["idempotency_key", "idempotencyKey"]`, the
   * names servers use today; `[]` reads none.
   */
  readonly meta?: readonly string[] | undefined;
}

/** Options of {@link registerIdempotentTool}: those of `idempotent()`, the tool name aside, plus the scope. */
export interface IdempotentToolOptions<A, Extra = RequestContextFields>
  extends Omit<IdempotentOptions<A, ToolResult>, "name" | "key"> {
  /**
   * The namespace a key lives in, from the request. Default: `client:` and the authenticated OAuth client
   * id (SDK 1.x `extra.authInfo?.clientId`, SDK 2.x `ctx.http?.authInfo?.clientId`), else `"default"`, so
   * one client can never read another's results, nor those of callers without authentication.
   */
  readonly scope?: ((extra: Extra) => string) | undefined;
  /**
   * The zod namespace the tool's schemas are built with (`import { z } from "zod"`). Default: the
   * matching entry (`zod/v3` or `zod/v4`) of the zod installed beside the MCP SDK.
   */
  readonly z?: ZodNamespace | undefined;
  /**
   * Where the key may come from, and whether the model sees the argument. Default: the required
   * `idempotency_key` argument, and `_meta.idempotency_key` / `_meta.idempotencyKey` (which must then
   * hold the same key). With `{ argument: "optional" }` or `{ argument: "hidden" }`, a client can
   * supply the key in `_meta` without the model. Copies that differ are refused, and nothing runs.
   */
  readonly keyFrom?: KeyFrom | undefined;
  /**
   * What a repeat gets while the first call with its key still runs. `"wait"` (the default): it waits up
   * to `waitMs` for that call's outcome and hands it back, so each request gets the answer itself. `"reject"`:
   * it is answered at once with `idempotency_key_in_use` and when to retry (`waitMs` must then be left
   * out); choose it when the client retries on its own schedule, or when a request held open per duplicate
   * costs more than a retry.
   */
  readonly inProgress?: "wait" | "reject" | undefined;
  /**
   * SDK 2.x, multi-round-trip calls: seals each question the tool asks (its input-required answer's
   * `requestState`) to the call that asked it, its scope, key and arguments, so that answers given for
   * one call (an approval, a choice) cannot be carried to another. A continuation whose `requestState`
   * does not open, or was sealed for another call, or that brings answers without one, is refused
   * (`invalid_arguments`) before anything runs. Pass the SDK's `createRequestStateCodec({ key })`; give the
   * server the same codec's `verify` (`requestState: { verify: codec.verify }`) or none. The tool reads its
   * own `requestState`, if it gave one, as before.
   */
  readonly requestState?: QuestionSeal<Extra> | undefined;
  /**
   * For hosts that send one tool call twice, a few milliseconds apart, under two request ids and without a
   * key: a call that comes without one is keyed by its tool and arguments, and an identical call while it
   * runs, or within `windowMs` after it, gets its outcome instead of running again (the model is told it
   * was taken for a duplicate). Off by default; `keyFrom.argument` must then be `"optional"` or
   * `"hidden"`. It cannot tell a genuine second request with the same arguments inside the window from a
   * duplicate: keep the window short (at most a minute), and let calls that may be meant twice carry keys.
   */
  readonly withoutKey?: { readonly windowMs: number } | undefined;
}

/**
 * Register a side-effectful tool on an MCP server so that every repeat of one intended call (a
 * transport retry, a client re-sending `tools/call` with a new request id, the model calling twice)
 * runs it once and hands back the original result (OP-7 in docs/operation-models.md).
 *
 * The tool gains a required `idempotency_key` input whose description states the dedup window, and
 * `idempotentHint: true`. A replay says so in `content` (an appended note), in `structuredContent._idempotency`
 * (when the result has structured content) and in `_meta["idempotool/envelope"]`; so does a near-duplicate
 * under a new key (`recent_similar_call`, with the `similar` option). Conflicts, calls in
 * flight, unknown outcomes and an unavailable store come back as `isError` results whose text tells the
 * model what to do next.
 *
 * @example
 * import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
 * import { z } from "zod";
 * import { registerIdempotentTool } from "idempotool/mcp";
 * import { sqliteStore } from "idempotool/sqlite";
 *
 * const server = new McpServer({ name: "slack", version: "1.0.0" });
 * registerIdempotentTool(
 *   server,
 *   "send_slack_message",
 *   {
 *     description: "Post a message to a Slack channel.",
 *     inputSchema: { channel: z.string(), text: z.string() },
 *     annotations: { destructiveHint: false, openWorldHint: true },
 *   },
 *   async ({ channel, text }) => {
 *     const ts = `${Date.now() / 1000}`; // post to Slack here
 *     return { content: [{ type: "text", text: `Posted to ${channel} at ${ts}: ${text}` }] };
 *   },
 *   { store: sqliteStore({ path: "idempotency.db" }), effect: "irreversible" },
 * );
 */
export function registerIdempotentTool<
  Server extends McpServerLike,
  Input extends ToolSchema,
  Output extends ToolSchema = RawShape,
>(
  server: Server,
  name: string,
  config: IdempotentToolConfig<Input, Output>,
  handler: IdempotentToolHandler<ArgsOf<Input>, ToolExtraOf<Server>>,
  options: IdempotentToolOptions<ArgsOf<Input>, ToolExtraOf<Server>>,
): RegisteredToolOf<Server> {
  type Args = ArgsOf<Input>;
  if (typeof server !== "object" || server === null || typeof server.registerTool !== "function") {
    invalidOption(owner, "server", "must be an McpServer");
  }
  if (typeof config !== "object" || config === null) invalidOption(owner, "config", "must be an object");
  if (typeof handler !== "function") invalidOption(owner, "handler", "must be the tool's function");
  if (typeof options !== "object" || options === null) invalidOption(owner, "options", "must be an object");
  const {
    scope: scopeOption,
    z: zOption,
    keyFrom: keyFromOption,
    inProgress,
    requestState: seal,
    withoutKey,
    ...given
  } = options;
  const keyFrom = resolveKeyFrom(keyFromOption);
  if (inProgress !== undefined && inProgress !== "wait" && inProgress !== "reject") {
    invalidOption(owner, "inProgress", 'must be "wait" or "reject"');
  }
  if (inProgress === "reject" && given.waitMs !== undefined) {
    invalidOption(owner, "waitMs", 'must be left out with inProgress: "reject", which answers at once');
  }
  const core = inProgress === "reject" ? { ...given, waitMs: 0 } : given;
  if (scopeOption !== undefined && typeof scopeOption !== "function")
    invalidOption(owner, "scope", "must be a function");
  if (
    seal !== undefined &&
    (typeof seal !== "object" ||
      seal === null ||
      typeof seal.mint !== "function" ||
      typeof seal.verify !== "function")
  ) {
    invalidOption(owner, "requestState", "must be a codec with mint and verify (createRequestStateCodec)");
  }
  const scopeOf: (extra: ToolExtraOf<Server>) => string =
    scopeOption ?? ((extra) => defaultScope("registerIdempotentTool", extra));
  if (withoutKey !== undefined) {
    const windowMs = (withoutKey as { windowMs?: unknown } | null)?.windowMs;
    if (
      typeof windowMs !== "number" ||
      !Number.isInteger(windowMs) ||
      windowMs < 1 ||
      windowMs > maxKeylessWindowMs
    ) {
      invalidOption(
        owner,
        "withoutKey",
        `must be { windowMs } with windowMs a whole number of ms from 1 to ${maxKeylessWindowMs}`,
      );
    }
    if (keyFrom.argument === "required") {
      invalidOption(
        owner,
        "withoutKey",
        'needs keyFrom: { argument: "optional" } or "hidden": a required key is never missing',
      );
    }
  }

  const input = toolSchema(config.inputSchema, "inputSchema");
  if (Object.hasOwn(input.shape, keyField)) {
    invalidOption(
      owner,
      "inputSchema",
      `already has \`${keyField}\`: leave it out, registerIdempotentTool adds it`,
    );
  }
  const output =
    config.outputSchema === undefined ? undefined : toolSchema(config.outputSchema, "outputSchema");
  if (output && Object.hasOwn(output.shape, structuredField)) {
    invalidOption(
      owner,
      "outputSchema",
      `already has \`${structuredField}\`: leave it out, registerIdempotentTool adds it`,
    );
  }

  // The handler needs its request's `extra`, which idempotent() does not carry: each call's arguments
  // are a fresh object, and idempotent() hands that very object to the tool, so it can find its call here.
  const calls = new WeakMap<object, CallState<ToolExtraOf<Server>>>();
  const run = async (args: Args, context: ToolContext): Promise<ToolResult> => {
    const call = calls.get(args as object);
    if (!call) {
      throw new Error("registerIdempotentTool: a call reached the tool without its request context");
    }
    let answer: unknown;
    try {
      // The arguments are the tool's, parsed by the SDK against its schema; the extra is the SDK's own.
      answer = await handler(args, call.extra, context);
    } catch (error) {
      call.thrown = thrownKind(error);
      throw error;
    }
    // Only the 2.x SDK (whose request context has `mcpReq`) speaks multi-round-trip calls; on 1.x such a
    // shape is just a result, recorded like any other.
    if (isInputRequired(answer) && call.multiRoundTrip) {
      // A question to the client, not an outcome: nothing is recorded, the key is free again, and the
      // client's continuation (the same call, with the answers) claims it and runs the tool anew.
      call.inputRequired =
        seal && call.binding
          ? { ...answer, requestState: await seal.mint(sealed(call.binding, answer), call.original) }
          : answer;
      throw notExecuted(new Error("the tool asked the client for input"));
    }
    return answer as ToolResult;
  };
  const tool = idempotent<Args, ToolResult>(run, { ...core, name });
  // Keyless calls' records, kept only for the window: the same store, the same tool.
  const keyless =
    withoutKey === undefined
      ? undefined
      : idempotent<Args, ToolResult>(run, { ...core, name, ttlMs: withoutKey.windowMs });

  const outputFlavour = output?.flavour;
  const inputFlavour = input.flavour ?? outputFlavour;
  const inputZ = zodNamespace(inputFlavour, zOption);
  const keySchema = inputZ
    .string({ message: keyRequiredMessage })
    .min(1, keyRequiredMessage)
    .max(maxKeyLength, `idempotency_key must be at most ${maxKeyLength} characters.`);
  const inputSchema =
    keyFrom.argument === "hidden"
      ? input.schema
      : withFields(input, "inputSchema", {
          [keyField]: (keyFrom.argument === "optional" ? keySchema.optional() : keySchema).describe(
            keyDescription(tool.ttlMs),
          ),
        });
  let outputSchema: ToolSchema | undefined;
  if (output) {
    // Input and output are separate objects to the SDK, so each may have its own flavour.
    const outputZ =
      outputFlavour === undefined || outputFlavour === inputFlavour
        ? inputZ
        : zodNamespace(outputFlavour, undefined);
    outputSchema = withFields(output, "outputSchema", { [structuredField]: infoSchema(outputZ) });
  }

  const definition = {
    ...(config.title === undefined ? {} : { title: config.title }),
    ...(config.description === undefined ? {} : { description: config.description }),
    inputSchema,
    ...(outputSchema === undefined ? {} : { outputSchema }),
    annotations: { ...config.annotations, idempotentHint: true },
    ...(config._meta === undefined ? {} : { _meta: config._meta }),
  };

  const registered = server.registerTool(
    name,
    definition,
    async (input: unknown, extra: ToolExtraOf<Server>) => {
      const fields = (typeof extra === "object" && extra !== null ? extra : {}) as RequestContextFields;
      let parsed: CallKey;
      try {
        // The same reader as the proxy's: the same fields, the same checks, whichever copy carries the key.
        // A key the client sent in params.idempotencyKey, put in _meta by acceptParamsKey's transport.
        const meta = requestMeta(fields);
        const paramsKey =
          typeof meta === "object" && meta !== null
            ? (meta as Record<string, unknown>)[paramsKeyMetaField]
            : undefined;
        parsed = callKey(input, meta, keyFrom.sources, paramsKey);
        if (parsed.key === undefined && keyless === undefined) {
          throw new IdempotencyError(ErrorCode.keyMissing, keyFrom.missing);
        }
      } catch (error) {
        return errorResult(error, "", undefined, tool.effect);
      }
      // The SDK parsed the arguments against the tool's schema before calling us.
      const args = parsed.args as Args;
      // Without a key (withoutKey), the call is keyed by what it does: idempotent() derives the key from the
      // tool and its arguments, for the window only.
      const byArguments = parsed.key === undefined;
      const key = parsed.key ?? "";
      const runner = byArguments && keyless ? keyless : tool;
      const multiRoundTrip = typeof fields.mcpReq === "object" && fields.mcpReq !== null;
      let scope: string;
      let call: CallState<ToolExtraOf<Server>>;
      try {
        scope = scopeOf(extra);
        const now = (core.clock ?? systemClock).now();
        const binding = seal && multiRoundTrip ? bindingOf(name, scope, key, args, now) : undefined;
        // A keyless call's question is good for its window only: after it, the same arguments are a new call.
        const maxAgeMs = byArguments ? withoutKey?.windowMs : undefined;
        call = {
          // A continuation of a sealed question is checked before anything runs.
          extra: seal && binding ? await openQuestion(seal, extra, binding, now, maxAgeMs) : extra,
          original: extra,
          multiRoundTrip,
          binding,
        };
      } catch (error) {
        return errorResult(error, key, undefined, tool.effect);
      }
      calls.set(args as object, call);
      try {
        // The request's abort signal is not passed on: a client that timed out cancels its request and then
        // retries under the same key, and cutting the effect short would turn that retry's replay into an
        // unknown outcome. The handler still gets the SDK's signal, to honour cancellation where that is safe.
        const envelope: Envelope<ToolResult> = await runner(
          args,
          byArguments ? keyedByArguments({ key: "", scope }) : { key, scope },
        );
        return envelopeResult(envelope, byArguments ? "arguments" : undefined);
      } catch (error) {
        if (call.inputRequired) return call.inputRequired;
        return errorResult(error, key, call.thrown, tool.effect);
      }
    },
  );
  return registered as RegisteredToolOf<Server>;
}

/** One request on its way through idempotent(): its SDK context, and how the tool's throw ended if it threw. */
interface CallState<Extra> {
  /** The context the handler gets: the SDK's, with the tool's own requestState once a sealed one opened. */
  readonly extra: Extra;
  /** The SDK's context, as it came. */
  readonly original: Extra;
  /** The call a question the tool asks is sealed to, with the `requestState` option. */
  readonly binding: QuestionBinding | undefined;
  /** The request came through an SDK that speaks multi-round-trip calls (2.x). */
  readonly multiRoundTrip: boolean;
  thrown?: ThrownKind;
  /** Set when the tool answered with a question for the client instead of an outcome. */
  inputRequired?: InputRequiredResult;
}

/** The `keyFrom` option, checked: what `callKey` reads, what the argument looks like, what a missing key is told. */
interface ResolvedKeyFrom {
  readonly argument: KeyArgument;
  readonly sources: KeySources;
  readonly missing: string;
}

const keyArguments: readonly KeyArgument[] = ["required", "optional", "hidden"];

function resolveKeyFrom(option: KeyFrom | undefined): ResolvedKeyFrom {
  if (option !== undefined && (typeof option !== "object" || option === null || Array.isArray(option))) {
    invalidOption(owner, "keyFrom", "must be an object: { argument?, meta? }");
  }
  const argument = option?.argument ?? "required";
  if (!keyArguments.includes(argument)) {
    invalidOption(
      owner,
      "keyFrom.argument",
      `must be one of ${keyArguments.map((a) => `"${a}"`).join(", ")}`,
    );
  }
  const meta = option?.meta ?? metaKeyFields;
  if (!Array.isArray(meta) || meta.some((field) => typeof field !== "string" || field.length === 0)) {
    invalidOption(owner, "keyFrom.meta", "must be an array of _meta field names (non-empty strings)");
  }
  if (argument === "hidden" && meta.length === 0) {
    invalidOption(
      owner,
      "keyFrom",
      'takes the key from nowhere: with argument "hidden", name at least one _meta field in meta',
    );
  }
  const fields = meta.map((field) => `_meta.${field}`).join(" or ");
  const missing =
    argument === "hidden"
      ? `This tool takes its idempotency key from the request's ${fields}, and the request had none, so ` +
        "nothing ran. The client must send one key per intended call, the same on every retry."
      : meta.length === 0
        ? keyRequiredMessage
        : `${keyRequiredMessage} Send it as the ${keyField} argument or in ${fields}.`;
  return { argument, sources: { argument: argument !== "hidden", metaFields: [...meta] }, missing };
}

/** The `_idempotency` field of `structuredContent`, as the output schema declares it. */
function infoSchema(z: ZodNamespace): AnySchema {
  return z.object({
    was_replay: z.boolean(),
    original_called_at: z.string().describe("When the original call was made (ISO-8601)."),
    idempotency_key: z.string().describe("The key this result is recorded under."),
    expires_at: z.string().describe("Until when a repeat with this key is still deduped (ISO-8601)."),
    recent_similar_call: z
      .object({
        called_at: z.string().describe("When the similar call completed (ISO-8601)."),
        idempotency_key: z.string().describe("The key the similar call ran under."),
      })
      .optional()
      .describe("Present when a call with similar arguments completed recently under another key."),
  });
}

/** A tool's schema as given, and the fields it declares. */
interface GivenSchema {
  readonly schema: ToolSchema;
  readonly shape: RawShape;
  /** True for a zod object, false for a raw shape. */
  readonly isObject: boolean;
  readonly flavour: ZodFlavour | undefined;
}

function toolSchema(schema: ToolSchema, option: string): GivenSchema {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) {
    invalidOption(
      owner,
      option,
      "must be a zod object or a raw shape of zod schemas ({ field: z.string() })",
    );
  }
  if (!("_zod" in schema || "_def" in schema)) {
    return {
      schema,
      shape: schema as RawShape,
      isObject: false,
      flavour: flavourOf(schema as RawShape, option),
    };
  }
  const shape = (schema as { shape?: unknown }).shape;
  if (typeof shape !== "object" || shape === null) {
    invalidOption(
      owner,
      option,
      "must be a zod object (z.object({ … })) or a raw shape ({ field: z.string() })",
    );
  }
  return { schema, shape: shape as RawShape, isObject: true, flavour: "_zod" in schema ? "v4" : "v3" };
}

/**
 * The schema with `fields` added: a raw shape gets them as keys; a zod object is extended by its own
 * zod, so its strictness and catch-all stay as the user built them.
 */
function withFields(given: GivenSchema, option: string, fields: Record<string, AnySchema>): ToolSchema {
  if (!given.isObject) return { ...(given.schema as RawShape), ...fields };
  const object = given.schema as ObjectSchema & {
    safeExtend?: (shape: Record<string, AnySchema>) => ObjectSchema;
    extend?: (shape: Record<string, AnySchema>) => ObjectSchema;
  };
  // zod 4 refuses extend() on an object with refinements and offers safeExtend() for it.
  const extend = object.safeExtend ?? object.extend;
  if (typeof extend !== "function") {
    invalidOption(
      owner,
      option,
      "is a zod object that cannot be extended (zod/mini?): pass a raw shape ({ field: z.string() }) instead",
    );
  }
  return extend.call(object, fields);
}

/** The payload a question's `requestState` is sealed with: the call, and the tool's own state. */
function sealed(binding: QuestionBinding, answer: InputRequiredResult): SealedQuestion {
  return answer.requestState === undefined
    ? { idempotool: binding }
    : { idempotool: binding, state: answer.requestState };
}
