/**
 * Failures of an idempotent tool call, told to the model: what happened and what to do next.
 * Shared by the tool-call loops (as error results) and the AI SDK wrapper (as thrown tool errors).
 */

import {
  ErrorCode,
  isIdempotencyError,
  KeyConflictError,
  KeyInUseError,
  OutcomeUnknownError,
} from "../core/errors.js";
import { Effect } from "../core/options.js";
import { DefinitiveFailure, NotExecuted, ReplayedFailureError } from "../core/outcomes.js";
import { aboutDuration, iso } from "../core/time.js";

/** Why a tool call did not give a result. The idempotool codes, plus what only a tool-call loop can meet. */
export const ToolCallErrorCode = {
  ...ErrorCode,
  /** A failure recorded by an earlier call of the same request, handed back (`ReplayedFailureError`). */
  replayedFailure: "replayed_failure",
  /** The model called a tool the loop does not have. */
  unknownTool: "unknown_tool",
  /**
   * The tool itself threw (its own error is the `cause`) and the throw's outcome is known: it declared
   * `notExecuted` or `definitiveFailure`, or its effect class (`native-key`, `owned-store`) makes a retry
   * safe. Under `irreversible` and `compensatable`, an unexplained throw is `outcome_unknown` instead.
   */
  toolError: "tool_error",
} as const;
export type ToolCallErrorCode = (typeof ToolCallErrorCode)[keyof typeof ToolCallErrorCode];

/**
 * A tool call that gave no result, with a message written for the model: what happened and what to do.
 * The error idempotool (or the tool) raised is the `cause`; branch on it with `isIdempotencyError(error.cause)`.
 *
 * Not an `IdempotencyError` itself: it wraps one, and the code-narrowing guard must not mistake the
 * wrapper for the typed error it carries.
 * @example
 * import { isIdempotencyError } from "idempotool";
 * import { ToolCallError } from "idempotool/loops";
 *
 * function report(error: unknown): void {
 *   if (error instanceof ToolCallError && isIdempotencyError(error.cause, "idempotency_key_conflict")) {
 *     console.error(`${error.tool}: conflicting repeat`, error.cause.originalFingerprint);
 *   }
 * }
 */
export class ToolCallError extends Error {
  override name = "ToolCallError";
  /** The tool's name. */
  readonly tool: string;
  readonly code: ToolCallErrorCode;

  constructor(tool: string, code: ToolCallErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.tool = tool;
    this.code = code;
  }
}

/** How a tool's own throw ended, judged by what it threw before the core handed it back. */
export type ThrownKind = "definitive" | "not_executed" | "error";

/** What the tool threw: a declared definitive failure, a declared "nothing happened", or anything else. */
export function thrownKindOf(error: unknown): ThrownKind {
  if (error instanceof DefinitiveFailure) return "definitive";
  if (error instanceof NotExecuted) return "not_executed";
  return "error";
}

/**
 * What the loop saw of a call whose tool threw: how the throw ended (undefined when the tool never ran)
 * and the tool's effect class, which says whether a retry is safe.
 */
export interface ToolThrow {
  readonly thrown: ThrownKind | undefined;
  readonly effect: Effect;
}

/**
 * Turn whatever a wrapped call threw into a {@link ToolCallError} with a message for the model. With
 * `how`, a tool's own error tells the model whether retrying the identical call is safe.
 */
export function toolCallErrorOf(error: unknown, tool: string, how?: ToolThrow): ToolCallError {
  if (error instanceof ToolCallError) return error;
  const cause = { cause: error };
  if (error instanceof ReplayedFailureError) {
    return new ToolCallError(
      tool,
      ToolCallErrorCode.replayedFailure,
      `${tool} already ran for this same request at ${error.original_called_at} and failed: ${error.message}. ` +
        "It was not run again; the same call would fail the same way.",
      cause,
    );
  }
  if (!isIdempotencyError(error)) {
    return new ToolCallError(tool, ToolCallErrorCode.toolError, toolErrorText(error, tool, how), cause);
  }
  if (error instanceof KeyConflictError && error.originalTool !== error.tool) {
    return new ToolCallError(
      tool,
      error.code,
      `${tool} was not run: its key was already used by ${error.originalTool} at ${error.originalCalledAt}. ` +
        "Each action needs its own key; this is a bug in how the keys are made, not a repeat to retry.",
      cause,
    );
  }
  if (error instanceof KeyConflictError) {
    return new ToolCallError(
      tool,
      error.code,
      `${tool} was not run: it was already called for this same request at ${error.originalCalledAt} with ` +
        "different arguments. Do not retry it with changed arguments. If the user really wants a second, " +
        "different call, ask them to confirm it in a new message.",
      cause,
    );
  }
  if (error instanceof KeyInUseError) {
    return new ToolCallError(
      tool,
      error.code,
      `${tool} was not run again: the same call is still running. Do not call it again now. If its result ` +
        `is needed, make the identical call again after ${aboutDuration(error.retryAfterMs)}.`,
      cause,
    );
  }
  if (error instanceof OutcomeUnknownError) {
    return new ToolCallError(
      tool,
      error.code,
      `Nobody knows whether ${tool} took effect: an attempt of this same call (started at ` +
        `${iso(error.record.createdAt)}) ended without a known outcome` +
        `${error.cause === undefined ? "" : ` (${messageOf(error.cause)})`}. It will not run again until ` +
        "that is resolved. Do not retry it; tell the user it may or may not have happened and needs checking.",
      cause,
    );
  }
  switch (error.code) {
    case ErrorCode.leaseLost:
      return new ToolCallError(
        tool,
        error.code,
        `${tool} may have taken effect, but its outcome could not be recorded. Do not retry it; tell the user ` +
          "it needs checking.",
        cause,
      );
    case ErrorCode.resultTooLarge:
    case ErrorCode.resultUnserializable:
      return new ToolCallError(
        tool,
        error.code,
        `${tool} already ran for this same request, but its result was not kept. Do not call it again.`,
        cause,
      );
    case ErrorCode.storeUnavailable:
    case ErrorCode.storeFull:
      return new ToolCallError(
        tool,
        error.code,
        `${tool} was not run: its duplicate check is unavailable, so it could not run safely. Nothing ` +
          "happened; the identical call may be tried again later.",
        cause,
      );
    default:
      return new ToolCallError(tool, error.code, `${tool} was not run: ${error.message}`, cause);
  }
}

/** What the model reads when the tool's own error comes back: what failed, and whether a retry is safe. */
function toolErrorText(error: unknown, tool: string, how: ToolThrow | undefined): string {
  const message = sentence(messageOf(error));
  const failed = `${tool} failed: ${message}`;
  if (how === undefined) return failed;
  switch (how.thrown) {
    case undefined:
      // Thrown before the tool was called (a `significant` or `similar` picker, say).
      return `${tool} was not run: ${message}`;
    case "not_executed":
      return (
        `${tool} failed and did not take effect: ${message} Nothing was recorded, so retrying the ` +
        "identical call is safe once the problem is fixed."
      );
    case "definitive":
      return (
        `${failed} This failure is recorded for this request: the identical call gets the same failure ` +
        "without running again. Tell the user; it runs again only if they ask for it in a new message."
      );
    case "error":
      // Only native-key and owned-store tools hand a plain throw back: the key was released, and a retry
      // under it resumes the same operation (the downstream dedupes on the key, or the transaction rolled back).
      if (how.effect === Effect.nativeKey) {
        return `${failed} Retrying the identical call is safe: the service it calls dedupes on its idempotency key.`;
      }
      if (how.effect === Effect.ownedStore) {
        return `${failed} Retrying the identical call is safe: nothing was committed.`;
      }
      return (
        `${failed} It may or may not have taken effect. Do not retry it; tell the user it may or may not ` +
        "have happened and needs checking."
      );
  }
}

/** A message as a sentence of its own: it ends with a full stop unless it already ends a sentence. */
function sentence(message: string): string {
  return /[.!?]$/.test(message) ? message : `${message}.`;
}

function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  if (typeof error === "string") return error;
  try {
    return JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}
