/**
 * `otelReviewGauges`: the review queue as gauges, read through the real OpenTelemetry SDK's in-memory
 * exporter: records needing a person by tool, the oldest one's age, and 0 once a tool's are resolved.
 */
import {
  AggregationTemporality,
  type GaugeMetricData,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type SumMetricData,
} from "@opentelemetry/sdk-metrics";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { describe, expect, it, vi } from "vitest";
import { type IdempotencyStore, memoryStore } from "../src/index.js";
import {
  OtelReviewMetric,
  otelResolutionMetric,
  otelResolutions,
  otelReviewGauges,
} from "../src/otel/index.js";
import { resolveRecord } from "../src/review/index.js";
import { type FakeClock, fakeClock } from "../src/testing/index.js";

async function stale(store: IdempotencyStore, clock: FakeClock, tool: string, key: string) {
  await store.claim({
    scope: "default",
    key,
    tool,
    fingerprint: "f".repeat(64),
    token: `t-${key}`,
    leaseMs: 1_000,
    ttlMs: 86_400_000,
    now: clock.now(),
  });
}

function meter() {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const provider = new MeterProvider({ readers: [reader] });
  const read = async (name: string) => {
    exporter.reset();
    await reader.forceFlush();
    const all = exporter.getMetrics().flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics));
    const gauge = all.find((m) => m.descriptor.name === name) as GaugeMetricData | SumMetricData | undefined;
    return Object.fromEntries(
      (gauge?.dataPoints ?? []).map((p) => [String(p.attributes["idempotool.tool"]), p.value]),
    );
  };
  return { meter: provider.getMeter("idempotool"), read };
}

describe("otelReviewGauges", () => {
  it("reports records needing a person and the oldest one's age, by tool, and 0 once resolved", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    await stale(store, clock, "send_email", "a");
    await clock.advance(30_000);
    await stale(store, clock, "send_email", "b");
    await stale(store, clock, "charge_card", "c");
    await clock.advance(90_000);
    const { meter: m, read } = meter();
    const gauges = otelReviewGauges({ store, meter: m, clock });
    try {
      await gauges.refresh();
      expect(await read(OtelReviewMetric.records)).toEqual({ send_email: 2, charge_card: 1 });
      expect(await read(OtelReviewMetric.oldestAge)).toEqual({ send_email: 120, charge_card: 90 });
      for (const key of ["a", "b"]) {
        await resolveRecord({
          store,
          scope: "default",
          key,
          as: "not_executed",
          evidence: "none sent",
          by: "o",
          clock,
          minStaleMs: 0,
        });
      }
      await gauges.refresh();
      expect(await read(OtelReviewMetric.records)).toEqual({ send_email: 0, charge_card: 1 });
      expect(await read(OtelReviewMetric.oldestAge)).toEqual({ send_email: 0, charge_card: 90 });
    } finally {
      gauges.stop();
    }
  });

  it("keeps its last values when the store fails, and tells onError", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    await stale(store, clock, "send_email", "a");
    await clock.advance(5_000);
    const errors: unknown[] = [];
    let failing = false;
    const flaky: IdempotencyStore = {
      ...store,
      list: (query) => (failing ? Promise.reject(new Error("connection reset")) : store.list(query)),
    };
    for (const name of [
      "claim",
      "settle",
      "get",
      "release",
      "renew",
      "delete",
      "purge",
      "takeover",
    ] as const) {
      (flaky as unknown as Record<string, unknown>)[name] = (
        store[name] as (...a: unknown[]) => unknown
      ).bind(store);
    }
    const { meter: m, read } = meter();
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const gauges = otelReviewGauges({
      store: flaky,
      meter: m,
      clock,
      intervalMs: 1_000,
      onError: (e) => errors.push(e),
    });
    try {
      await gauges.refresh();
      failing = true;
      await vi.advanceTimersByTimeAsync(1_000);
      expect(errors.map(String)).toEqual([
        "StoreUnavailableError: The idempotency store failed during list: connection reset. The queue could not be read.",
      ]);
      expect(await read(OtelReviewMetric.records)).toEqual({ send_email: 1 });
    } finally {
      gauges.stop();
      vi.useRealTimers();
    }
  });

  it("refuses a store that is not one, and an interval under a second", () => {
    expect(() => otelReviewGauges({ store: {} as IdempotencyStore })).toThrow(/store/);
    expect(() => otelReviewGauges({ store: memoryStore(), intervalMs: 10 })).toThrow(/intervalMs/);
  });
});

describe("otelResolutions", () => {
  it("makes a span and counts each resolution, without who resolved it or the evidence", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    await stale(store, clock, "send_email", "k");
    await clock.advance(5_000);
    const spans = new InMemorySpanExporter();
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
    const { meter: m, read } = meter();
    const entry = await resolveRecord({
      store,
      scope: "default",
      key: "k",
      as: "not_executed",
      evidence: "no message in the provider's log",
      by: "ada@example.com",
      clock,
      minStaleMs: 0,
      via: "cli",
      onResolution: otelResolutions({ tracer: tracerProvider.getTracer("idempotool"), meter: m }),
    });
    const [span] = spans.getFinishedSpans();
    expect(span?.name).toBe("idempotool.resolve");
    expect(span?.attributes).toMatchObject({
      "idempotool.tool": "send_email",
      "idempotool.resolved_as": "not_executed",
      "idempotool.via": "cli",
      "idempotool.trail_entry": entry.id,
      "idempotool.previous_status": "in_progress",
    });
    expect(JSON.stringify(span?.attributes)).not.toMatch(/ada@example|provider's log/);
    expect(await read(otelResolutionMetric)).toEqual({ send_email: 1 });
  });
});
