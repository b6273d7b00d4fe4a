/**
 * Gauges a team can alert on: how many records need a person, by tool, and how old the oldest is. They are
 * read from the store itself (the review queue) on an interval, so they count records left by every
 * process, including ones that crashed.
 */
import type { Meter } from "@opentelemetry/api";
import type { Clock } from "../core/clock.js";
import { durationOption, invalidOption } from "../core/option-checks.js";
import type { IdempotencyStore } from "../core/store.js";
import { type ReviewQueue, reviewQueue } from "../review/queue.js";
import { loadOtelApi } from "./otel-api.js";
import { instrumentationName, OtelAttribute } from "./otel-events.js";

const { metrics } = loadOtelApi();
const owner = "otelReviewGauges()";

/** Gauge names. */
export const OtelReviewMetric = {
  /** Records that need a person (stale in-progress and unknown), by `idempotool.tool`. */
  records: "idempotool.review.records",
  /** The age of the oldest record that needs a person, by `idempotool.tool` (seconds). */
  oldestAge: "idempotool.review.oldest_age",
} as const;

export interface OtelReviewGaugesOptions {
  readonly store: IdempotencyStore;
  /** Default: `metrics.getMeter("idempotool")` from the global provider. */
  readonly meter?: Meter | undefined;
  /** How often the store is read (ms, at least 1 s). Default 60 s. */
  readonly intervalMs?: number | undefined;
  /** Only this scope's records. Default: every scope. */
  readonly scope?: string | undefined;
  readonly clock?: Clock | undefined;
  /** Called when a read fails (the gauges keep their last values); what it throws is ignored. */
  readonly onError?: ((error: unknown) => void) | undefined;
}

export interface OtelReviewGauges {
  /** Read the store now; the next export reports what it found. */
  refresh(): Promise<ReviewQueue>;
  /** Stop reading the store; the gauges stop reporting. */
  stop(): void;
}

/**
 * Report the review queue as gauges: `idempotool.review.records` and `idempotool.review.oldest_age`
 * (seconds), each by tool. A tool whose records were all resolved reports 0, so an alert clears.
 * @example
 * import { memoryStore } from "idempotool";
 * import { otelReviewGauges } from "idempotool/otel";
 *
 * const gauges = otelReviewGauges({ store: memoryStore(), intervalMs: 5 * 60_000 });
 * // at shutdown:
 * gauges.stop();
 */
export function otelReviewGauges(options: OtelReviewGaugesOptions): OtelReviewGauges {
  if (typeof options?.store?.list !== "function")
    invalidOption(owner, "store", "must be an idempotency store");
  const intervalMs = durationOption(owner, "intervalMs", options.intervalMs, 60_000, { min: 1_000 });
  const meter = options.meter ?? metrics.getMeter(instrumentationName);
  const records = meter.createObservableGauge(OtelReviewMetric.records, {
    description: "Records that need a person: in progress past their lease, or with an unknown outcome",
    unit: "{record}",
  });
  const oldestAge = meter.createObservableGauge(OtelReviewMetric.oldestAge, {
    description: "The age of the oldest record that needs a person",
    unit: "s",
  });
  let latest: ReviewQueue | undefined;
  // Tools seen once keep reporting (0 when cleared), so an alert on them resolves.
  const seen = new Set<string>();
  let stopped = false;
  const observeRecords = (result: { observe(value: number, attributes: Record<string, string>): void }) => {
    if (stopped || latest === undefined) return;
    for (const tool of seen) result.observe(latest.byTool[tool] ?? 0, { [OtelAttribute.tool]: tool });
  };
  const observeAge = (result: { observe(value: number, attributes: Record<string, string>): void }) => {
    if (stopped || latest === undefined) return;
    for (const tool of seen) {
      result.observe((latest.oldestAgeMsByTool[tool] ?? 0) / 1000, { [OtelAttribute.tool]: tool });
    }
  };
  records.addCallback(observeRecords);
  oldestAge.addCallback(observeAge);
  const refresh = async () => {
    const queue = await reviewQueue({
      store: options.store,
      limit: 1,
      ...(options.scope !== undefined ? { scope: options.scope } : {}),
      ...(options.clock !== undefined ? { clock: options.clock } : {}),
    });
    for (const tool of Object.keys(queue.byTool)) seen.add(tool);
    latest = queue;
    return queue;
  };
  let running: Promise<unknown> | undefined;
  const tick = () => {
    if (stopped || running) return;
    running = refresh()
      .catch((error: unknown) => {
        try {
          options.onError?.(error);
        } catch {
          // A logging callback must not stop the gauges.
        }
      })
      .finally(() => {
        running = undefined;
      });
  };
  const timer = setInterval(tick, intervalMs);
  (timer as { unref?: () => void }).unref?.();
  tick();
  return {
    refresh,
    stop() {
      stopped = true;
      clearInterval(timer);
      records.removeCallback(observeRecords);
      oldestAge.removeCallback(observeAge);
    },
  };
}
