/**
 * What the commands that resolve records (`resolve`, `console`) report to OpenTelemetry: each resolution
 * as a span and a count, when `@opentelemetry/api` is installed (where the spans go is up to the SDK the
 * process was started with; with none, nothing is sent).
 */
import type { TrailEntry } from "../review/trail.js";

/** The hook for `resolveRecord({ onResolution })`, or undefined when `@opentelemetry/api` is not installed. */
export async function resolutionTelemetry(): Promise<((entry: TrailEntry) => void) | undefined> {
  try {
    const { otelResolutions } = await import("../otel/index.js");
    return otelResolutions();
  } catch (error) {
    // Only the API's absence is expected here; anything else is a bug worth seeing.
    if (error instanceof Error && error.message.includes("needs @opentelemetry/api")) return undefined;
    throw error;
  }
}
