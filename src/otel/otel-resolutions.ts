/**
 * Operators' resolutions as OpenTelemetry telemetry: a span per resolution and a counter, fed from
 * `resolveRecord({ onResolution })` (the `resolve` command and the console feed it themselves).
 */
import type { Meter, Tracer } from "@opentelemetry/api";
import { sha256Hex } from "../core/fingerprint.js";
import type { TrailEntry } from "../review/trail.js";
import { loadOtelApi } from "./otel-api.js";
import { instrumentationName, OtelAttribute } from "./otel-events.js";

const { metrics, SpanKind, trace } = loadOtelApi();

/** The counter of resolutions, by `idempotool.tool`, `idempotool.resolved_as` and `idempotool.via`. */
export const otelResolutionMetric = "idempotool.resolutions";

export interface OtelResolutionsOptions {
  /** Default: `trace.getTracer("idempotool")` from the global provider. */
  readonly tracer?: Tracer | undefined;
  /** Default: `metrics.getMeter("idempotool")` from the global provider. */
  readonly meter?: Meter | undefined;
}

/**
 * The hook to give `resolveRecord({ onResolution })`: each resolution becomes a span
 * `idempotool.resolve` (the tool, what it was resolved as, where from, the record's key as a hash, the
 * trail entry's id) and counts in `idempotool.resolutions`. Who resolved it and the evidence stay in the
 * trail: they are a person's words, not telemetry.
 * @example
 * import { memoryStore } from "idempotool";
 * import { otelResolutions } from "idempotool/otel";
 * import { resolveRecord } from "idempotool/review";
 *
 * await resolveRecord({
 *   store: memoryStore(),
 *   scope: "default",
 *   key: "welcome-ada",
 *   as: "not_executed",
 *   evidence: "no message for this key in the provider's log",
 *   by: "ops@example.com",
 *   onResolution: otelResolutions(),
 * }).catch(() => undefined);
 */
export function otelResolutions(options: OtelResolutionsOptions = {}): (entry: TrailEntry) => void {
  const tracer = options.tracer ?? trace.getTracer(instrumentationName);
  const meter = options.meter ?? metrics.getMeter(instrumentationName);
  const counter = meter.createCounter(otelResolutionMetric, {
    description: "Records an operator resolved by hand",
    unit: "{resolution}",
  });
  return (entry) => {
    const at = new Date(entry.at);
    const span = tracer.startSpan("idempotool.resolve", {
      kind: SpanKind.INTERNAL,
      startTime: at,
      attributes: {
        [OtelAttribute.tool]: entry.tool,
        [OtelAttribute.keyHash]: sha256Hex(entry.key).slice(0, 16),
        "idempotool.resolved_as": entry.as,
        "idempotool.via": entry.via,
        "idempotool.trail_entry": entry.id,
        "idempotool.previous_status": entry.before.status,
        [OtelAttribute.attempt]: entry.before.attempts,
      },
    });
    span.end(at);
    counter.add(1, {
      [OtelAttribute.tool]: entry.tool,
      "idempotool.resolved_as": entry.as,
      "idempotool.via": entry.via,
    });
  };
}
