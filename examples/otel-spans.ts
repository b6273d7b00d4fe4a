/**
 * OpenTelemetry for an idempotent tool: otelEvents() turns the core's events into a span per call and
 * metrics. Here the SDK exports to memory so the example can check what it got; in an application,
 * register your usual exporters and call otelEvents() with no arguments.
 *
 *   npx tsx examples/otel-spans.ts
 */
import assert from "node:assert/strict";
import {
  AggregationTemporality,
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
import { idempotent, memoryStore } from "idempotool";
import { otelEvents } from "idempotool/otel";

const spans = new InMemorySpanExporter();
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
const metricsOut = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
const reader = new PeriodicExportingMetricReader({ exporter: metricsOut, exportIntervalMillis: 60_000 });
const meterProvider = new MeterProvider({ readers: [reader] });

const sendEmail = idempotent(
  async (email: { to: string; subject: string }) => {
    await new Promise((resolve) => setTimeout(resolve, 10));
    return { messageId: `msg-${email.to}` };
  },
  {
    name: "send_email",
    store: memoryStore(),
    onEvent: otelEvents({
      tracer: tracerProvider.getTracer("idempotool"),
      meter: meterProvider.getMeter("idempotool"),
    }),
  },
);

const email = { to: "alice@example.com", subject: "Minutes" };
// The model emits the call twice in one turn, then the HTTP client retries after a lost reply.
await Promise.all([sendEmail(email, { key: "turn-7-email" }), sendEmail(email, { key: "turn-7-email" })]);
await sendEmail(email, { key: "turn-7-email" });

const finished = spans.getFinishedSpans();
for (const span of finished) {
  console.log(
    `${span.name}: ${span.attributes["idempotool.outcome"]}, was_replay=${span.attributes["idempotool.was_replay"]}, ` +
      `events=${span.events.map((e) => e.name.replace("idempotool.", "")).join(" → ")}`,
  );
}
assert.equal(finished.length, 3);
assert.deepEqual(finished.map((s) => s.attributes["idempotool.outcome"]).sort(), [
  "completed",
  "replay",
  "replay",
]);

await reader.forceFlush();
const metric = (name: string) =>
  metricsOut
    .getMetrics()
    .flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics))
    .filter((m) => m.descriptor.name === name)
    .at(-1) as SumMetricData | undefined;
const count = (name: string) => (metric(name)?.dataPoints ?? []).reduce((n, p) => n + p.value, 0);
console.log(
  `runs=${count("idempotool.runs")} replays=${count("idempotool.replays")} waits=${count("idempotool.in_flight_waits")}`,
);
assert.equal(count("idempotool.runs"), 1);
assert.equal(count("idempotool.replays"), 2);
assert.equal(count("idempotool.in_flight_waits"), 1);

await Promise.all([tracerProvider.shutdown(), meterProvider.shutdown()]);
