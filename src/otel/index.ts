/**
 * `idempotool/otel`: OpenTelemetry spans and metrics for idempotent tools, fed from the core's
 * `onEvent` hook. It imports `@opentelemetry/api` only (an optional peer dependency); your SDK setup
 * decides where spans and metrics go. Arguments, results and (unless you ask) keys are never recorded.
 *
 * @example
 * import { idempotent } from "idempotool";
 * import { sqliteStore } from "idempotool/sqlite";
 * import { otelEvents } from "idempotool/otel";
 *
 * const sendEmail = idempotent(async (args: { to: string }) => ({ sent: args.to }), {
 *   name: "send_email",
 *   store: sqliteStore({ path: "idempotool.db" }),
 *   onEvent: otelEvents(),
 * });
 *
 * @module
 */
export type { OtelEventHook, OtelEventsOptions } from "./otel-events.js";
export {
  composeEventHooks,
  instrumentationName,
  OtelAttribute,
  OtelMetric,
  otelEvents,
} from "./otel-events.js";
export { type OtelResolutionsOptions, otelResolutionMetric, otelResolutions } from "./otel-resolutions.js";
export {
  type OtelReviewGauges,
  type OtelReviewGaugesOptions,
  OtelReviewMetric,
  otelReviewGauges,
} from "./review-gauges.js";
