/**
 * What a model reads back from an idempotent tool: the envelope, or the tool's own result with the replay
 * marker merged in. Shared by the tool-call loops and the AI SDK wrapper.
 */

import type { Envelope } from "../core/idempotent.js";
import { invalidOption } from "../core/option-checks.js";
import { type OperatorResolution, operatorNote } from "../core/outcomes.js";
import type { RecentSimilarCall } from "../core/similar.js";

export type { RecentSimilarCall };

/** How a wrapped tool's result reaches the model. */
export const OutputMode = {
  /** The envelope `{ result, was_replay, original_called_at, idempotency_key, expires_at }` (the default). */
  envelope: "envelope",
  /** The tool's own object result with `was_replay` and `original_called_at` merged in; other results as the envelope. */
  merge: "merge",
} as const;
export type OutputMode = (typeof OutputMode)[keyof typeof OutputMode];

/** The fields a replay adds so the model can tell a repeat that was absorbed from a call that ran. */
export interface ReplayMarker {
  /** True when the tool did not run for this call and the original outcome was handed back. */
  readonly was_replay: boolean;
  /** When the original call was made (ISO-8601). */
  readonly original_called_at: string;
  /** A sentence for the model, present on a replay or when a similar call was made recently. */
  readonly note?: string;
  readonly recent_similar_call?: RecentSimilarCall;
  /** On a replay of an outcome an operator recorded by hand: who, when, and on what evidence. */
  readonly resolved_by_operator?: OperatorResolution;
}

/** What the model reads in `"envelope"` mode: the core envelope, plus a note when there is something to say. */
export type EnvelopeOutput<R> = Envelope<R> & { readonly note?: string };

/**
 * What the model reads in `"merge"` mode: an object result keeps its own fields and gains the
 * {@link ReplayMarker}; anything else (an array, a string, a number) cannot, and comes as the envelope.
 */
export type MergedOutput<R> = R extends readonly unknown[]
  ? EnvelopeOutput<R>
  : R extends object
    ? R & ReplayMarker
    : EnvelopeOutput<R>;

/** The output type of a wrapped tool whose result type is `R`, in output mode `M`. */
export type ModelOutput<R, M extends OutputMode = "envelope"> = M extends "merge"
  ? MergedOutput<R>
  : EnvelopeOutput<R>;

/** Check an `output` option at configuration time. */
export function outputModeOf(value: unknown, where: string): OutputMode {
  if (value === undefined) return OutputMode.envelope;
  if (value === OutputMode.envelope || value === OutputMode.merge) return value;
  return invalidOption(
    where,
    "output",
    `must be "envelope" or "merge", got ${JSON.stringify(value) ?? String(value)}`,
  );
}

/** The sentence a model reads beside a replayed or near-duplicate result, if there is anything to say. */
export function noteFor(envelope: Envelope<unknown>, tool: string): string | undefined {
  if (envelope.was_replay) {
    return (
      `${tool} already ran for this same request at ${envelope.original_called_at}; it did not run again, ` +
      "and this is its original result. " +
      operatorNote(envelope.resolved_by_operator) +
      "Do not call it again for this request."
    );
  }
  const similar = envelope.recent_similar_call;
  if (similar) {
    return (
      `${tool} ran now as a new request, but a similar ${tool} call already completed at ${similar.called_at}. ` +
      "If the user may not have meant to repeat it, tell them it was done twice."
    );
  }
  return undefined;
}

/** The marker fields for `envelope`, with the note and hint only when present. */
export function replayMarkerOf(envelope: Envelope<unknown>, tool: string): ReplayMarker {
  const note = noteFor(envelope, tool);
  const similar = envelope.recent_similar_call;
  const resolution = envelope.resolved_by_operator;
  return {
    was_replay: envelope.was_replay,
    original_called_at: envelope.original_called_at,
    ...(note === undefined ? {} : { note }),
    ...(similar === undefined ? {} : { recent_similar_call: similar }),
    ...(resolution === undefined ? {} : { resolved_by_operator: resolution }),
  };
}

/** Shape an envelope for the model, in the given mode. */
export function modelOutputOf<R, M extends OutputMode>(
  envelope: Envelope<R>,
  mode: M,
  tool: string,
): ModelOutput<R, M> {
  const { result } = envelope;
  if (mode === OutputMode.merge && isMergeable(result)) {
    // The marker goes last: a tool result with its own `was_replay` field must not hide a replay.
    return { ...result, ...replayMarkerOf(envelope, tool) } as ModelOutput<R, M>;
  }
  const note = noteFor(envelope, tool);
  return (note === undefined ? envelope : { ...envelope, note }) as ModelOutput<R, M>;
}

function isMergeable(value: unknown): value is object {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
