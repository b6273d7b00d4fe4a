import {
  IdempotencyError,
  KeyConflictError,
  KeyInUseError,
  LeaseLostError,
  OutcomeUnknownError,
  ResultTooLargeError,
  ResultUnserializableError,
} from "../core/errors.js";
import type { Envelope } from "../core/idempotent.js";
import type { Effect } from "../core/options.js";
import {
  DefinitiveFailure,
  NotExecuted,
  type OperatorResolution,
  operatorNote,
  ReplayedFailureError,
} from "../core/outcomes.js";
import type { RecentSimilarCall } from "../core/similar.js";
import { aboutDuration, iso } from "../core/time.js";
import type { ToolResult } from "./mcp-types.js";
import { isObject } from "./mcp-types.js";

/** What every successful result carries, in `structuredContent._idempotency` and `_meta`. */
export interface IdempotencyInfo {
  /** True when the tool did not run for this call and the original result was handed back. */
  readonly was_replay: boolean;
  /** When the original call claimed the key (ISO-8601). */
  readonly original_called_at: string;
  readonly idempotency_key: string;
  /** Until when a repeat is still absorbed (ISO-8601). */
  readonly expires_at: string;
  /**
   * With the `similar` option: a call with similar arguments that completed under another key within
   * the window. This call ran; the model is told, so it can check with the user that both were meant.
   */
  readonly recent_similar_call?: RecentSimilarCall;
  /**
   * `"arguments"` when the call came without a key and was keyed by its tool and arguments (the
   * `withoutKey` option): a repeat is then an identical call within the window, not a retry of one key.
   */
  readonly key_source?: "arguments";
  /** On a replay of an outcome an operator recorded by hand: who, when, and on what evidence. */
  readonly resolved_by_operator?: OperatorResolution;
}

/** What an error result carries in `_meta`, for clients that branch on it rather than read the text. */
export interface IdempotencyErrorInfo {
  /** An idempotool error code, or `tool_failed` when the tool itself failed. */
  readonly code: string;
  readonly idempotency_key: string;
  /** True when this failure was recorded by an earlier call and handed back. */
  readonly was_replay: boolean;
  /**
   * For `idempotency_key_in_use`: when a retry with the same key is worth trying (ms from now), that is
   * when the running call's lease passes unless it renews it.
   */
  readonly retry_after_ms?: number;
}

/** The `_meta` keys of our results (a prefix, then a name, as the MCP spec asks of `_meta` keys). */
export const MetaKey = {
  /** On every successful result: {@link IdempotencyInfo}. */
  envelope: "idempotool/envelope",
  /** On every error result idempotool writes: {@link IdempotencyErrorInfo}. */
  error: "idempotool/error",
} as const;

/** The field of `structuredContent` (and of the output schema) that carries {@link IdempotencyInfo}. */
export const structuredField = "_idempotency";

/** How the tool's own throw ended, as seen before the core turned it into the caller's error. */
export type ThrownKind = "definitive" | "not_executed" | "error";

/** How a tool's throw is meant: a declared outcome (definitiveFailure, notExecuted), or any other error. */
export function thrownKind(error: unknown): ThrownKind {
  return error instanceof DefinitiveFailure
    ? "definitive"
    : error instanceof NotExecuted
      ? "not_executed"
      : "error";
}

/**
 * The tool's result as the client gets it: the original result, plus what happened. The stored result
 * never carries these additions, so a replay is decorated afresh (with `was_replay: true`).
 */
export function envelopeResult(envelope: Envelope<ToolResult>, keySource?: "arguments"): ToolResult {
  const similar = envelope.recent_similar_call;
  const info: IdempotencyInfo = {
    was_replay: envelope.was_replay,
    original_called_at: envelope.original_called_at,
    idempotency_key: envelope.idempotency_key,
    expires_at: envelope.expires_at,
    ...(similar === undefined ? {} : { recent_similar_call: { ...similar } }),
    ...(keySource === undefined ? {} : { key_source: keySource }),
    ...(envelope.resolved_by_operator === undefined
      ? {}
      : { resolved_by_operator: { ...envelope.resolved_by_operator } }),
  };
  const original: ToolResult = isObject(envelope.result) ? envelope.result : { content: [] };
  const content = Array.isArray(original.content) ? [...original.content] : [];
  if (info.was_replay) content.push({ type: "text", text: replayNote(info) });
  else if (similar !== undefined) content.push({ type: "text", text: similarNote(info, similar) });
  const result: ToolResult = {
    ...original,
    content,
    _meta: { ...(isObject(original._meta) ? original._meta : {}), [MetaKey.envelope]: info },
  };
  // Only a result that already has structured content gets the field: a client that shows the model
  // structuredContent in place of content would otherwise lose a text-only tool's text.
  if (isObject(original.structuredContent)) {
    result.structuredContent = { ...original.structuredContent, [structuredField]: info };
  }
  return result;
}

/** The text appended to a replayed result, so a model reading only `content` knows nothing ran again. */
export function replayNote(info: IdempotencyInfo): string {
  if (info.key_source === "arguments") {
    return (
      `This is a replay: an identical call (the same tool and arguments, sent without an idempotency_key) ran ` +
      `at ${info.original_called_at}, so this one was taken for a duplicate and not run. The content above is ` +
      "its result. If the user really wants it done again, call again with a new idempotency_key."
    );
  }
  return (
    `This is a replay: this action already ran at ${info.original_called_at} under idempotency_key ` +
    `"${info.idempotency_key}" and was not repeated. The content above is the original result.` +
    (info.resolved_by_operator === undefined ? "" : ` ${operatorNote(info.resolved_by_operator).trimEnd()}`)
  );
}

/**
 * The text appended to a result that ran while a similar call had just completed, so a model reading only
 * `content` can tell the user the action was done twice if that was not meant.
 */
export function similarNote(info: IdempotencyInfo, similar: RecentSimilarCall): string {
  return (
    `Note: this action ran now as a new request under idempotency_key ${JSON.stringify(info.idempotency_key)}, but a ` +
    `similar call already completed at ${similar.called_at} under idempotency_key ` +
    `${JSON.stringify(similar.idempotency_key)}. If the user may not have meant to repeat it, tell them it ` +
    "was done twice."
  );
}

/**
 * Turn whatever stopped a call into an `isError` result whose text tells the model what to do next.
 * Nothing here throws: an MCP tool answers with a result the model can read.
 */
export function errorResult(
  error: unknown,
  key: string,
  thrown: ThrownKind | undefined,
  effect: Effect,
): ToolResult {
  const { code, text, wasReplay, retryAfterMs } = explain(error, key, thrown, effect);
  const info: IdempotencyErrorInfo = {
    code,
    idempotency_key: key,
    was_replay: wasReplay,
    ...(retryAfterMs === undefined ? {} : { retry_after_ms: retryAfterMs }),
  };
  return { content: [{ type: "text", text }], isError: true, _meta: { [MetaKey.error]: info } };
}

interface Explanation {
  readonly code: string;
  readonly text: string;
  readonly wasReplay: boolean;
  readonly retryAfterMs?: number;
}

function explain(error: unknown, key: string, thrown: ThrownKind | undefined, effect: Effect): Explanation {
  const k = JSON.stringify(key);
  if (error instanceof KeyConflictError && error.originalTool !== error.tool) {
    return {
      code: error.code,
      wasReplay: false,
      text:
        `Conflict: idempotency_key ${k} was already used at ${error.originalCalledAt} by the tool ` +
        `${error.originalTool}, so this tool did not run. Each action needs its own key: call this tool again ` +
        "with a new idempotency_key.",
    };
  }
  if (error instanceof KeyConflictError) {
    return {
      code: error.code,
      wasReplay: false,
      text:
        `Conflict: idempotency_key ${k} was already used at ${error.originalCalledAt} for this tool with different ` +
        "arguments, so nothing was run. Do not retry with new arguments under this key. If this is a new intent, " +
        "call again with a new idempotency_key; to retry the earlier call, send its original arguments.",
    };
  }
  if (error instanceof KeyInUseError) {
    return {
      code: error.code,
      wasReplay: false,
      retryAfterMs: error.retryAfterMs,
      text:
        `In progress: an earlier call with idempotency_key ${k} is still running, so this call did not start ` +
        `the action again. Wait ${aboutDuration(error.retryAfterMs)} and retry with the same ` +
        "idempotency_key and the same arguments; do not switch to a new key, or the action may run twice.",
    };
  }
  if (error instanceof OutcomeUnknownError) {
    const reported = error.cause instanceof Error ? ` The tool reported: ${error.cause.message}` : "";
    return {
      code: error.code,
      wasReplay: false,
      text:
        `Outcome unknown: the call with idempotency_key ${k} (first made at ${iso(error.record.createdAt)}) ended ` +
        "without a known outcome, so the action may or may not have happened, and it was not run again. " +
        "Check whether the effect happened before trying again, and tell the user if you cannot; do not retry " +
        `under a new key to get past this.${reported}`,
    };
  }
  if (error instanceof LeaseLostError) {
    return {
      code: error.code,
      wasReplay: false,
      text:
        `Outcome not recorded: this call's claim on idempotency_key ${k} was taken over while it ran, so the action ` +
        "may have happened. Check whether the effect happened before trying again.",
    };
  }
  if (error instanceof ResultTooLargeError || error instanceof ResultUnserializableError) {
    return {
      code: error.code,
      wasReplay: true,
      text:
        `Already done: the call with idempotency_key ${k} already completed and was not repeated, but its result ` +
        `was not kept (${error.message}). Do not run it again.`,
    };
  }
  if (error instanceof ReplayedFailureError) {
    return {
      code: "tool_failed",
      wasReplay: true,
      text:
        `This is a replay: the call with idempotency_key ${k} already failed at ${error.original_called_at}, and ` +
        `it was not repeated. The original error: ${error.message}. ${operatorNote(error.resolved_by_operator)}` +
        "Retrying with this key returns the same failure; trying again is a new intent and needs a new idempotency_key.",
    };
  }
  if (error instanceof IdempotencyError) {
    switch (error.code) {
      case "store_unavailable":
      case "store_full":
        return {
          code: error.code,
          wasReplay: false,
          text: `The tool did not run: ${error.message} Retry later with the same idempotency_key and arguments.`,
        };
      default:
        // Bad key, scope or arguments: rejected before anything ran.
        return { code: error.code, wasReplay: false, text: `The tool did not run: ${error.message}` };
    }
  }
  const message = error instanceof Error ? error.message : String(error);
  switch (thrown) {
    case "definitive":
      return {
        code: "tool_failed",
        wasReplay: false,
        text:
          `The action failed: ${message}. This failure is recorded under idempotency_key ${k}: retrying with the ` +
          "same key returns it again; trying again is a new intent and needs a new idempotency_key.",
      };
    case "not_executed":
      return {
        code: "tool_failed",
        wasReplay: false,
        text:
          `The action failed and did not take effect: ${message}. Nothing was recorded under idempotency_key ${k}, ` +
          "so you may retry with the same key once the problem is fixed.",
      };
    case "error":
      // Only native-key and owned-store tools hand a plain throw back: the key was released, and a retry
      // under it resumes the same operation (the downstream dedupes on the key, or the transaction rolled back).
      return {
        code: "tool_failed",
        wasReplay: false,
        text:
          `The action failed: ${message}. Retrying with the same idempotency_key is safe` +
          (effect === "native-key" ? ": the downstream service dedupes on it." : ": nothing was committed."),
      };
    default:
      // Thrown before the tool was called (the scope hook, say).
      return { code: "tool_failed", wasReplay: false, text: `The tool did not run: ${message}` };
  }
}
