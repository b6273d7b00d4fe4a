/**
 * What the proxy answers a `tools/call` on a guarded tool with: the key read from the request (and
 * taken out of it), the call run through `idempotent()` on the store, and the outcome in the words an
 * `idempotool/mcp` tool uses (replay note, conflict, in flight, outcome unknown, near-duplicate hint).
 */
import { ErrorCode, IdempotencyError, isIdempotencyError } from "../core/errors.js";
import { idempotent } from "../core/idempotent.js";
import { keyedByArguments } from "../core/keys.js";
import type { Effect, RecordOptions } from "../core/options.js";
import { NotExecuted, notExecuted } from "../core/outcomes.js";
import { callKey, everyKeySource } from "../mcp/call-key.js";
import { keyRequiredMessage } from "../mcp/key-description.js";
import { type InputRequiredResult, isInputRequired, type ToolResult } from "../mcp/mcp-types.js";
import { keyRefusal } from "../mcp/params-key.js";
import { envelopeResult, errorResult, type ThrownKind } from "../mcp/tool-results.js";

/** A JSON-RPC error the server answered a request with. */
export class UpstreamError extends Error {
  override name = "UpstreamError";
  constructor(readonly error: { code: number; message: string; data?: unknown }) {
    super(error.message);
  }
}

/**
 * JSON-RPC errors that mean the server refused the call before running it (bad JSON, a bad request, no
 * such method, bad arguments): the key is released and a retry may run. Any other error may have come
 * after the effect, so the effect class judges it.
 */
const refusedCodes = new Set([-32700, -32600, -32601, -32602]);
/**
 * On a multi-round-trip call (2026-07-28), the client lacks a capability the tool's question needs: the
 * question could not be asked, which is an input-required answer that did not get through.
 */
const missingCapabilityCode = -32021;

export interface GuardedCallOptions
  extends Pick<RecordOptions<unknown, unknown>, "store" | "ttlMs" | "leaseMs" | "waitMs"> {
  /** The near-duplicate hint's window (ms): the same arguments under a new key. Default: off. */
  readonly similarWindowMs?: number | undefined;
  /**
   * A call without a key is keyed by its tool and arguments, and an identical one within this window
   * (ms) is its duplicate (`--without-key`). Default: off, and a call without a key is refused.
   */
  readonly withoutKeyWindowMs?: number | undefined;
  /**
   * Send the call to the server and resolve with its result; reject with an {@link UpstreamError} when
   * it answers with an error, a `NotExecuted` when the call was never sent, with anything else when no
   * answer came.
   */
  readonly forward: (params: Record<string, unknown>) => Promise<unknown>;
}

/**
 * The body of a JSON-RPC answer: a result (the server's question, on a multi-round-trip call), or the
 * server's own error passed on as it was.
 */
export type CallAnswer =
  | { readonly result: ToolResult | InputRequiredResult }
  | { readonly error: UpstreamError["error"] };

/** Answers guarded calls; it keeps one `idempotent()` per tool and effect class. */
export type GuardedCalls = (
  name: string,
  effect: Effect,
  params: Record<string, unknown>,
  scope: string,
  /** The call comes from a client, and goes to a server, on the 2026-07-28 revision. */
  multiRoundTrip?: boolean,
) => Promise<CallAnswer>;

/**
 * One request on its way through idempotent(): its `_meta`, the answers of a multi-round-trip call's
 * continuation (`inputResponses`, `requestState`), how the forward ended if it threw, and the server's
 * question if it asked one.
 */
interface CallState {
  readonly meta: Record<string, unknown> | undefined;
  readonly continuation: Record<string, unknown>;
  /** Client and server speak the 2026-07-28 revision, where a tool may answer with a question. */
  readonly multiRoundTrip: boolean;
  thrown?: ThrownKind;
  inputRequired?: InputRequiredResult;
}

/** The params of a continuation (2026-07-28) that carry its answers: forwarded, never compared. */
const continuationFields = ["inputResponses", "requestState"] as const;

/**
 * Make the function that answers guarded calls. It never throws: every failure is an answer.
 * @example
 * const answer = guardedCalls({ store, forward: (params) => sendToServer("tools/call", params) });
 * const { result } = await answer("send_email", "irreversible", { arguments: { to: "a", idempotency_key: "k" } }, "default");
 */
export function guardedCalls(options: GuardedCallOptions): GuardedCalls {
  const tools = new Map<string, ReturnType<typeof wrap>>();
  // idempotent() hands the tool the very arguments object it was called with, so the tool finds its
  // request's `_meta` here.
  const calls = new WeakMap<object, CallState>();

  const wrap = (name: string, effect: Effect, ttlMs = options.ttlMs) =>
    idempotent<Record<string, unknown>, ToolResult>(
      async (args) => {
        const call = calls.get(args);
        if (!call) throw new Error("idempotool proxy: a call reached the server without its request");
        const meta = call.meta && Object.keys(call.meta).length > 0 ? { _meta: call.meta } : {};
        let result: unknown;
        try {
          result = await options.forward({ name, arguments: args, ...meta, ...call.continuation });
        } catch (error) {
          if (error instanceof NotExecuted) {
            call.thrown = "not_executed";
            throw error;
          }
          const code = error instanceof UpstreamError ? error.error.code : undefined;
          const refused =
            code !== undefined &&
            (refusedCodes.has(code) || (call.multiRoundTrip && code === missingCapabilityCode));
          if (refused) {
            call.thrown = "not_executed";
            throw notExecuted(error as UpstreamError);
          }
          call.thrown = "error";
          throw error;
        }
        // Only a server on the 2026-07-28 revision asks: to a 2025 one the field is part of a result.
        if (call.multiRoundTrip && isInputRequired(result)) {
          // A question for the client, not an outcome: the key is freed for the continuation to claim.
          call.inputRequired = result;
          throw notExecuted(new Error("the MCP server asked the client for input"));
        }
        return result as ToolResult;
      },
      {
        name,
        store: options.store,
        effect,
        ...(ttlMs === undefined ? {} : { ttlMs }),
        ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
        ...(options.waitMs === undefined ? {} : { waitMs: options.waitMs }),
        ...(options.similarWindowMs === undefined
          ? {}
          : {
              similar: { fields: (args: Record<string, unknown>) => args, windowMs: options.similarWindowMs },
            }),
      },
    );

  return async (name, effect, params, scope, multiRoundTrip = false) => {
    let parsed: ReturnType<typeof callKey>;
    try {
      parsed = callKey(params.arguments, params._meta, everyKeySource, params.idempotencyKey);
      if (parsed.key === undefined && options.withoutKeyWindowMs === undefined) {
        throw new IdempotencyError(ErrorCode.keyMissing, keyRequiredMessage);
      }
    } catch (error) {
      return { result: errorResult(error, "", undefined, effect) };
    }
    // Without a key (--without-key), the call is keyed by what it does (idempotent() derives the key from
    // the tool and its arguments), for the window only.
    const byArguments = parsed.key === undefined;
    const key = parsed.key ?? "";
    const id = `${effect}\u0000${name}${byArguments ? "\u0000keyless" : ""}`;
    let tool = tools.get(id);
    if (!tool) {
      tool = byArguments ? wrap(name, effect, options.withoutKeyWindowMs) : wrap(name, effect);
      tools.set(id, tool);
    }
    const continuation: Record<string, unknown> = {};
    for (const field of continuationFields)
      if (params[field] !== undefined) continuation[field] = params[field];
    const call: CallState = { meta: parsed.meta, continuation, multiRoundTrip };
    calls.set(parsed.args, call);
    try {
      const envelope = await tool(
        parsed.args,
        byArguments ? keyedByArguments({ key: "", scope }) : { key, scope },
      );
      return { result: envelopeResult(envelope, byArguments ? "arguments" : undefined) };
    } catch (error) {
      if (call.inputRequired) return { result: call.inputRequired };
      // The server refused the call and nothing is recorded: its error goes to the client as it was.
      if (error instanceof UpstreamError && call.thrown === "not_executed") return { error: error.error };
      // A client that sent the key in params speaks the protocol's own idempotency: a JSON-RPC error.
      const keyError = params.idempotencyKey === undefined ? undefined : keyErrorOf(error, key);
      if (keyError) return { error: keyError };
      return { result: errorResult(error, key, call.thrown, tool.effect) };
    }
  };
}

/** A repeat in flight or a key reused for other arguments, as a JSON-RPC error; undefined otherwise. */
function keyErrorOf(error: unknown, key: string): UpstreamError["error"] | undefined {
  if (!(error instanceof IdempotencyError)) return undefined;
  const retryAfterMs = isIdempotencyError(error, ErrorCode.keyInUse) ? error.retryAfterMs : undefined;
  return keyRefusal(error.code, error.message, key, retryAfterMs);
}
