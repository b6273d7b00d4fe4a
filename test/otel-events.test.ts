/**
 * `idempotool/otel`: spans and metrics from the core's events, read back through the real OpenTelemetry
 * SDK's in-memory exporters. A span per call, from its first event to its last; counters and a duration
 * histogram; never the arguments, and the key only as a hash unless asked.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { metrics, SpanStatusCode, trace } from "@opentelemetry/api";
import {
  AggregationTemporality,
  type HistogramMetricData,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type SumMetricData,
} from "@opentelemetry/sdk-metrics";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { describe, expect, it } from "vitest";
import {
  definitiveFailure,
  type Effect,
  fingerprint,
  type IdempotencyEvent,
  type IdempotencyStore,
  idempotent,
  memoryStore,
  notExecuted,
  sha256Hex,
} from "../src/index.js";
import { composeEventHooks, type OtelEventsOptions, otelEvents } from "../src/otel/index.js";
import { fakeClock } from "../src/testing/index.js";

const alice = { to: "alice@example.com", subject: "Minutes" };

function telemetry(options: Omit<OtelEventsOptions, "tracer" | "meter"> = {}) {
  const spans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const onEvent = otelEvents({
    ...options,
    tracer: tracerProvider.getTracer("idempotool"),
    meter: meterProvider.getMeter("idempotool"),
  });
  const finished = () => spans.getFinishedSpans();
  const collect = async () => {
    await reader.forceFlush();
    const all = exporter.getMetrics().flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics));
    return (name: string) => all.filter((m) => m.descriptor.name === name).at(-1);
  };
  return { onEvent, finished, collect };
}

function tool(
  onEvent: (event: IdempotencyEvent) => void,
  options: { store?: IdempotencyStore; effect?: Effect; waitMs?: number; run?: () => Promise<unknown> } = {},
) {
  const clock = fakeClock();
  const store = options.store ?? memoryStore();
  const send = idempotent(
    async (email: typeof alice) => {
      await (options.run?.() ?? Promise.resolve());
      return { messageId: `msg-${email.to}` };
    },
    {
      name: "send_email",
      store,
      clock,
      onEvent,
      effect: options.effect ?? "irreversible",
      waitMs: options.waitMs ?? 10_000,
    },
  );
  return { send, clock, store };
}

const outcome = (span: ReadableSpan) => span.attributes["idempotool.outcome"];
const eventNames = (span: ReadableSpan) => span.events.map((e) => e.name);
const sum = (metric: unknown) =>
  ((metric as SumMetricData | undefined)?.dataPoints ?? []).reduce((n, p) => n + (p.value as number), 0);

describe("spans", () => {
  it("opens a span per call and ends it at its last event: a run, then its replay", async () => {
    const t = telemetry();
    const { send } = tool(t.onEvent);
    await send(alice, { key: "turn-7-alice", scope: "tenant-1" });
    await send(alice, { key: "turn-7-alice", scope: "tenant-1" });

    const [first, replay] = t.finished();
    expect(first?.name).toBe("idempotool send_email");
    expect(first?.attributes).toMatchObject({
      "idempotool.tool": "send_email",
      "idempotool.effect": "irreversible",
      "idempotool.scope": "tenant-1",
      "idempotool.outcome": "completed",
      "idempotool.was_replay": false,
      "idempotool.attempt": 1,
      "idempotool.result_stored": true,
    });
    expect(eventNames(first!)).toEqual(["idempotool.run", "idempotool.completed"]);
    expect(replay?.attributes).toMatchObject({
      "idempotool.outcome": "replay",
      "idempotool.was_replay": true,
    });
    expect(first?.status.code).not.toBe(SpanStatusCode.ERROR);
    expect(t.onEvent.openSpans).toBe(0);
  });

  it("times the span by the core's clock, from the call's start to its last event", async () => {
    const t = telemetry();
    const { send, clock } = tool(t.onEvent);
    const started = clock.now();
    await send(alice, { key: "k1" });
    const span = t.finished()[0]!;
    const ms = (time: [number, number]) => time[0] * 1000 + time[1] / 1e6;
    expect(ms(span.startTime)).toBe(started);
    expect(ms(span.endTime)).toBe(started);
  });

  it("puts a hash of the key on spans, never the key, the arguments or the result", async () => {
    const t = telemetry();
    const { send } = tool(t.onEvent);
    await send(alice, { key: "turn-7-alice@example.com" });
    await send(alice, { key: "turn-7-alice@example.com" });
    const spans = t.finished();
    const hash = sha256Hex("turn-7-alice@example.com").slice(0, 16);
    for (const span of spans) {
      expect(span.attributes["idempotool.key_hash"]).toBe(hash);
      expect(JSON.stringify({ a: span.attributes, e: span.events, s: span.status })).not.toContain(
        "alice@example.com",
      );
    }
  });

  it("puts the raw key, or none, or no scope, when told to", async () => {
    for (const [options, expected] of [
      [{ key: "raw" }, { "idempotool.key": "k-raw" }],
      [{ key: "none", scope: false }, {}],
    ] as const) {
      const t = telemetry(options);
      await tool(t.onEvent).send(alice, { key: "k-raw" });
      const attributes = t.finished()[0]!.attributes;
      const identity = Object.fromEntries(
        Object.entries(attributes).filter(([name]) =>
          ["idempotool.key", "idempotool.key_hash", "idempotool.scope"].includes(name),
        ),
      );
      expect(identity).toEqual(
        options.scope === false ? expected : { ...expected, "idempotool.scope": "default" },
      );
    }
  });

  it("keeps two concurrent calls on one key apart: the runner and the waiter that replays", async () => {
    const t = telemetry();
    const { send } = tool(t.onEvent, { run: () => new Promise((resolve) => setTimeout(resolve, 20)) });
    await Promise.all([send(alice, { key: "dup" }), send(alice, { key: "dup" })]);
    const spans = t.finished();
    expect(spans).toHaveLength(2);
    const runner = spans.find((s) => outcome(s) === "completed")!;
    const waiter = spans.find((s) => outcome(s) === "replay")!;
    expect(eventNames(runner)).toEqual(["idempotool.run", "idempotool.completed"]);
    expect(eventNames(waiter)).toEqual(["idempotool.in_flight_wait", "idempotool.replay"]);
    expect(waiter.attributes["idempotool.waited"]).toBe(true);
  });

  it("marks a conflict as an error with its code, and does not quote the key in the status", async () => {
    const t = telemetry();
    const { send } = tool(t.onEvent);
    await send(alice, { key: "reused" });
    await send({ ...alice, subject: "Other" }, { key: "reused" }).catch(() => undefined);
    const conflict = t.finished()[1]!;
    expect(outcome(conflict)).toBe("conflict");
    expect(conflict.status).toEqual({ code: SpanStatusCode.ERROR, message: "idempotency_key_conflict" });
    expect(conflict.attributes["error.type"]).toBe("idempotency_key_conflict");
  });

  it("follows a takeover of a stale claim to its run (native-key)", async () => {
    const t = telemetry();
    const { send, clock, store } = tool(t.onEvent, { effect: "native-key" });
    // A worker claimed the key and died: its lease passes.
    await store.claim({
      scope: "default",
      key: "crashed",
      tool: "send_email",
      fingerprint: fingerprint(alice),
      token: "dead-worker",
      leaseMs: 1_000,
      ttlMs: 86_400_000,
      now: clock.now(),
    });
    await clock.advance(2_000);
    await send(alice, { key: "crashed" });
    const span = t.finished()[0]!;
    expect(eventNames(span)).toEqual(["idempotool.takeover", "idempotool.run", "idempotool.completed"]);
    expect(span.attributes).toMatchObject({
      "idempotool.took_over": true,
      "idempotool.attempt": 2,
      "idempotool.outcome": "completed",
    });
  });

  it("ends a call that fails closed on an unknown outcome, or fails definitively, as an error", async () => {
    const t = telemetry();
    const { send: throwing } = tool(t.onEvent, {
      run: () => Promise.reject(new Error("connection reset after send")),
    });
    await throwing(alice, { key: "unknown" }).catch(() => undefined);
    const { send: declined } = tool(t.onEvent, {
      run: () => Promise.reject(definitiveFailure(new Error("mailbox full"))),
    });
    await declined(alice, { key: "declined" }).catch(() => undefined);
    const [unknown, failed] = t.finished();
    expect(outcome(unknown!)).toBe("outcome_unknown");
    expect(unknown?.attributes["error.type"]).toBe("outcome_unknown");
    expect(outcome(failed!)).toBe("failed");
    for (const span of [unknown!, failed!]) expect(span.status.code).toBe(SpanStatusCode.ERROR);
  });

  it("ends a call whose claim the store refused as a store error", async () => {
    const t = telemetry();
    const broken = { ...memoryStore(), claim: () => Promise.reject(new Error("connection refused")) };
    await tool(t.onEvent, { store: broken })
      .send(alice, { key: "k" })
      .catch(() => undefined);
    const span = t.finished()[0]!;
    expect(outcome(span)).toBe("store_error");
    expect(span.attributes["error.type"]).toBe("store_unavailable");
    expect(span.status.code).toBe(SpanStatusCode.ERROR);
  });

  it("ends the span of a waiter that gave up as in_flight_gave_up, an error with its code, and counts it", async () => {
    const t = telemetry();
    let finish!: () => void;
    const { send } = tool(t.onEvent, {
      waitMs: 0,
      run: () => new Promise<void>((resolve) => (finish = resolve)),
    });
    const running = send(alice, { key: "slow" });
    await new Promise((resolve) => setTimeout(resolve, 5));
    await expect(send(alice, { key: "slow" })).rejects.toMatchObject({ code: "idempotency_key_in_use" });
    const [waiter] = t.finished();
    expect(outcome(waiter!)).toBe("in_flight_gave_up");
    expect(eventNames(waiter!)).toEqual(["idempotool.in_flight_wait", "idempotool.in_flight_gave_up"]);
    expect(waiter?.status).toEqual({ code: SpanStatusCode.ERROR, message: "idempotency_key_in_use" });
    expect(waiter?.attributes).toMatchObject({
      "idempotool.waited": true,
      "error.type": "idempotency_key_in_use",
    });
    finish();
    await running;
    expect(t.onEvent.openSpans).toBe(0);
    expect(t.finished().map(outcome).sort()).toEqual(["completed", "in_flight_gave_up"]);
    const metric = await t.collect();
    expect(sum(metric("idempotool.in_flight_give_ups"))).toBe(1);
  });

  it("puts the call id on each span: the same as its events', another for each call", async () => {
    const callIds: string[] = [];
    const t = telemetry({ onEvent: (event) => callIds.push(event.callId) });
    const { send } = tool(t.onEvent, { run: () => new Promise((resolve) => setTimeout(resolve, 20)) });
    await Promise.all([send(alice, { key: "dup" }), send(alice, { key: "dup" })]);
    const spanIds = t.finished().map((span) => span.attributes["idempotool.call_id"]);
    expect(new Set(spanIds).size).toBe(2);
    expect(new Set(spanIds)).toEqual(new Set(callIds));
  });

  it("ends a call that stops with no last event of its own as abandoned, on request", async () => {
    const t = telemetry();
    const store = { ...memoryStore() };
    const { send } = tool(t.onEvent, {
      store,
      run: () => Promise.reject(notExecuted(new Error("the mail server refused the connection"))),
    });
    store.release = () => Promise.reject(new Error("connection reset"));
    await expect(send(alice, { key: "k" })).rejects.toThrow("refused the connection");
    expect(t.onEvent.openSpans).toBe(1);
    t.onEvent.endOpenSpans();
    expect(t.onEvent.openSpans).toBe(0);
    expect(t.finished().map(outcome)).toEqual(["abandoned"]);
  });
});

describe("metrics", () => {
  it("counts runs, replays, waits, conflicts, unknown outcomes and store errors by tool and effect", async () => {
    const t = telemetry();
    const { send } = tool(t.onEvent, { run: () => new Promise((resolve) => setTimeout(resolve, 10)) });
    await Promise.all([send(alice, { key: "a" }), send(alice, { key: "a" })]);
    await send({ ...alice, subject: "Other" }, { key: "a" }).catch(() => undefined);
    await tool(t.onEvent, { run: () => Promise.reject(new Error("reset")) })
      .send(alice, { key: "b" })
      .catch(() => undefined);
    const broken = { ...memoryStore(), claim: () => Promise.reject(new Error("down")) };
    await tool(t.onEvent, { store: broken })
      .send(alice, { key: "c" })
      .catch(() => undefined);

    const metric = await t.collect();
    expect(sum(metric("idempotool.runs"))).toBe(2);
    expect(sum(metric("idempotool.replays"))).toBe(1);
    expect(sum(metric("idempotool.in_flight_waits"))).toBe(1);
    expect(sum(metric("idempotool.conflicts"))).toBe(1);
    expect(sum(metric("idempotool.unknown_outcomes"))).toBe(1);
    const storeErrors = metric("idempotool.store_errors") as SumMetricData;
    expect(storeErrors.dataPoints[0]?.attributes).toEqual({
      "idempotool.tool": "send_email",
      "idempotool.effect": "irreversible",
      "error.type": "store_unavailable",
    });
    // Neither the scope nor the key (both unbounded) is a metric attribute.
    for (const name of ["idempotool.runs", "idempotool.replays"]) {
      for (const point of (metric(name) as SumMetricData).dataPoints) {
        expect(Object.keys(point.attributes).sort()).toEqual(["idempotool.effect", "idempotool.tool"]);
      }
    }
  });

  it("records every call's duration in seconds, by outcome", async () => {
    const t = telemetry();
    const { send } = tool(t.onEvent);
    await send(alice, { key: "a" });
    await send(alice, { key: "a" });
    const metric = await t.collect();
    const duration = metric("idempotool.call.duration") as HistogramMetricData;
    expect(duration.descriptor.unit).toBe("s");
    const byOutcome = Object.fromEntries(
      duration.dataPoints.map((p) => [p.attributes["idempotool.outcome"], p.value.count]),
    );
    expect(byOutcome).toEqual({ completed: 1, replay: 1 });
  });
});

describe("composing and isolation", () => {
  it("calls the user's own hook with every event, after ours, and survives it throwing", async () => {
    const seen: string[] = [];
    const t = telemetry({
      onEvent: (event) => {
        seen.push(event.type);
        throw new Error("a broken user hook");
      },
    });
    await tool(t.onEvent).send(alice, { key: "k" });
    expect(seen).toEqual(["run", "completed"]);
    expect(t.finished()).toHaveLength(1);
  });

  it("composeEventHooks calls each hook in order, whatever the others throw", () => {
    const seen: string[] = [];
    const hook = composeEventHooks(
      () => {
        throw new Error("first breaks");
      },
      (event) => seen.push(`second ${event.type}`),
    );
    hook({ type: "run", callId: "c-1", tool: "t", effect: "irreversible", scope: "s", key: "k", at: 0 });
    expect(seen).toEqual(["second run"]);
  });

  it("uses the global providers when given no tracer or meter", async () => {
    const spans = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
    trace.setGlobalTracerProvider(provider);
    try {
      await tool(otelEvents()).send(alice, { key: "k" });
      expect(spans.getFinishedSpans()[0]?.instrumentationScope.name).toBe("idempotool");
    } finally {
      trace.disable();
      metrics.disable();
    }
  });

  it("refuses bad options by name", () => {
    expect(() => otelEvents({ key: "plain" as never })).toThrow(/`key`/);
    expect(() => otelEvents({ abandonAfterMs: 0 })).toThrow(/`abandonAfterMs`/);
  });
});

describe("the idempotool/otel entry", () => {
  it("imports @opentelemetry/api and nothing else of OpenTelemetry", () => {
    const dir = join(import.meta.dirname, "..", "src", "otel");
    for (const file of readdirSync(dir).filter((f) => f.endsWith(".ts"))) {
      const imports = [
        ...readFileSync(join(dir, file), "utf8").matchAll(/from "(@opentelemetry\/[^"]+)"/g),
      ].map((m) => m[1]);
      for (const name of imports) expect(name, file).toBe("@opentelemetry/api");
    }
  });
});
