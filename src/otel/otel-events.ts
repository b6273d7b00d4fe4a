/**
 * `otelEvents()`: OpenTelemetry spans and metrics fed from the core's `onEvent` hook, through
 * `@opentelemetry/api` only; the application's SDK decides where they go.
 */
import type { Attributes, Counter, Histogram, Meter, Span, Tracer } from "@opentelemetry/api";
import type { EventType, IdempotencyEvent } from "../core/events.js";
import { sha256Hex } from "../core/fingerprint.js";
import { durationOption, invalidOption, maxTtlMs, sizeOption } from "../core/option-checks.js";
import { type OpenCall, openCalls } from "./open-calls.js";
import { loadOtelApi } from "./otel-api.js";

const { metrics, SpanKind, SpanStatusCode, trace } = loadOtelApi();

const owner = "otelEvents()";

/** The instrumentation scope name of the tracer and meter. */
export const instrumentationName = "idempotool";

/** Attribute names on spans and metrics. */
export const OtelAttribute = {
  /** Spans only: the call's id, the `callId` of every event of that call. */
  callId: "idempotool.call_id",
  tool: "idempotool.tool",
  effect: "idempotool.effect",
  /** Spans only, unless `scope: false`. */
  scope: "idempotool.scope",
  /** Spans only, with `key: "hash"` (the default): the first 16 hex digits of SHA-256 of the key. */
  keyHash: "idempotool.key_hash",
  /** Spans only, with `key: "raw"`. */
  key: "idempotool.key",
  /**
   * How the call ended: completed, failed, released, replay, conflict, in_flight_gave_up, outcome_unknown,
   * lease_lost, store_error, abandoned.
   */
  outcome: "idempotool.outcome",
  wasReplay: "idempotool.was_replay",
  attempt: "idempotool.attempt",
  /** The call waited for another one holding the key. */
  waited: "idempotool.waited",
  /** The call took over a stale or unknown record. */
  tookOver: "idempotool.took_over",
  /** False when a completed call's result was too large or unserializable to keep. */
  resultStored: "idempotool.result_stored",
  /** The error's code (`idempotency_key_conflict`, `store_unavailable` …) or class name. */
  errorType: "error.type",
} as const;

/** Metric names. Counters count events; the histogram times calls from start to their last event. */
export const OtelMetric = {
  runs: "idempotool.runs",
  replays: "idempotool.replays",
  conflicts: "idempotool.conflicts",
  inFlightWaits: "idempotool.in_flight_waits",
  inFlightGiveUps: "idempotool.in_flight_give_ups",
  unknownOutcomes: "idempotool.unknown_outcomes",
  storeErrors: "idempotool.store_errors",
  takeovers: "idempotool.takeovers",
  leasesLost: "idempotool.leases_lost",
  duration: "idempotool.call.duration",
} as const;

export interface OtelEventsOptions {
  /** Default: `trace.getTracer("idempotool")` from the global provider. */
  readonly tracer?: Tracer | undefined;
  /** Default: `metrics.getMeter("idempotool")` from the global provider. */
  readonly meter?: Meter | undefined;
  /**
   * The idempotency key on spans. `"hash"` (default) puts the first 16 hex digits of its SHA-256, so a
   * call and its replays share a value without the key itself (which may hold an email address or an
   * order number) leaving the process; a key that can be guessed can be guessed from its hash too, so
   * choose `"none"` then. `"raw"` puts the key itself. Never on metrics.
   */
  readonly key?: "hash" | "none" | "raw" | undefined;
  /** Put the scope (a tenant or user id) on spans. Default true. Never on metrics, where it is unbounded. */
  readonly scope?: boolean | undefined;
  /** Your own hook, called after ours with every event; what it throws is ignored. */
  readonly onEvent?: ((event: IdempotencyEvent) => void) | undefined;
  /**
   * A call with no event for this long (ms, by the events' clock) has its span ended as `abandoned`:
   * a call can stop with no last event of its own (when the store refuses a release). Whole ms from 1
   * to ten years; default 10 minutes.
   */
  readonly abandonAfterMs?: number | undefined;
  /**
   * At most this many calls followed at once (a whole number ≥ 1); the oldest are ended as abandoned
   * beyond it. Default 10 000.
   */
  readonly maxOpenCalls?: number | undefined;
}

/** The hook to give `idempotent({ onEvent })`, plus a way to end what is still open. */
export interface OtelEventHook {
  (event: IdempotencyEvent): void;
  /** End every span still open, as abandoned (call it at shutdown, before the SDK flushes). */
  endOpenSpans(): void;
  /** How many calls have a span open. */
  readonly openSpans: number;
}

interface CallSpan {
  readonly span: Span;
  waited: boolean;
  tookOver: boolean;
}

const errorOutcomes = new Set<string>([
  "failed",
  "released",
  "conflict",
  "in_flight_gave_up",
  "outcome_unknown",
  "lease_lost",
  "store_error",
]);

/**
 * OpenTelemetry for idempotent tools: a span per call (from its first event to its last, joined by the
 * events' call id), counters for runs, replays, conflicts, in-flight waits and give-ups, unknown
 * outcomes, store errors, takeovers and lost leases, and a histogram of call duration. Arguments and
 * results are never recorded.
 * @example
 * import { idempotent, memoryStore } from "idempotool";
 * import { otelEvents } from "idempotool/otel";
 *
 * const onEvent = otelEvents({ onEvent: (event) => console.debug(event.type) });
 * const sendEmail = idempotent(async (args: { to: string }) => ({ sent: args.to }), {
 *   name: "send_email",
 *   store: memoryStore(),
 *   onEvent,
 * });
 */
export function otelEvents(options: OtelEventsOptions = {}): OtelEventHook {
  const o = resolveOtelOptions(options);
  const tracer = o.tracer ?? trace.getTracer(instrumentationName);
  const meter = o.meter ?? metrics.getMeter(instrumentationName);
  const counter = (name: string, description: string) =>
    meter.createCounter(name, { description, unit: "{event}" });
  const counters: Partial<Record<EventType, Counter>> = {
    run: counter(OtelMetric.runs, "Calls that ran the tool"),
    replay: counter(OtelMetric.replays, "Repeats that got the recorded outcome instead of running the tool"),
    conflict: counter(OtelMetric.conflicts, "Calls reusing a key with different arguments"),
    in_flight_wait: counter(OtelMetric.inFlightWaits, "Calls that waited for another call holding the key"),
    in_flight_gave_up: counter(
      OtelMetric.inFlightGiveUps,
      "Calls that stopped waiting for another call holding the key (wait over or aborted)",
    ),
    outcome_unknown: counter(OtelMetric.unknownOutcomes, "Calls that failed closed on an unknown outcome"),
    store_error: counter(OtelMetric.storeErrors, "Store operations that failed"),
    takeover: counter(OtelMetric.takeovers, "Stale or unknown records taken over"),
    lease_lost: counter(OtelMetric.leasesLost, "Calls whose claim was taken over while they ran"),
  };
  const duration: Histogram = meter.createHistogram(OtelMetric.duration, {
    description: "Time from the start of a call to its last event",
    unit: "s",
    advice: { explicitBucketBoundaries: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60] },
  });
  const calls = openCalls<CallSpan>();
  let lastSweepAt = Number.NEGATIVE_INFINITY;

  const end = (call: OpenCall<CallSpan>, outcome: string, at: number, event?: IdempotencyEvent) => {
    calls.close(call);
    const { span } = call.data;
    span.setAttributes({
      [OtelAttribute.outcome]: outcome,
      [OtelAttribute.wasReplay]: outcome === "replay",
      [OtelAttribute.waited]: call.data.waited,
      [OtelAttribute.tookOver]: call.data.tookOver,
    });
    if (errorOutcomes.has(outcome)) {
      const type = event ? errorType(event.error) : undefined;
      if (type) span.setAttribute(OtelAttribute.errorType, type);
      // The code only: an error's message may quote the key.
      span.setStatus({ code: SpanStatusCode.ERROR, message: type ?? outcome });
    }
    span.end(new Date(at));
  };

  const sweep = (now: number) => {
    if (now - lastSweepAt < o.abandonAfterMs / 10 && calls.size <= o.maxOpenCalls) return;
    lastSweepAt = now;
    for (const call of calls.stale(now - o.abandonAfterMs)) end(call, "abandoned", call.lastAt);
    const excess = calls.size - o.maxOpenCalls;
    if (excess > 0) for (const call of calls.all().slice(0, excess)) end(call, "abandoned", call.lastAt);
  };

  const record = (event: IdempotencyEvent) => {
    const base: Attributes = { [OtelAttribute.tool]: event.tool, [OtelAttribute.effect]: event.effect };
    const type = event.type === "store_error" ? errorType(event.error) : undefined;
    counters[event.type]?.add(1, type ? { ...base, [OtelAttribute.errorType]: type } : base);

    const routed = calls.route(event, () => ({
      span: tracer.startSpan(`idempotool ${event.tool}`, {
        kind: SpanKind.INTERNAL,
        // A Date, since OpenTelemetry reads a number below the process start as performance.now() time.
        startTime: new Date(event.at - (event.durationMs ?? 0)),
        attributes: { ...base, [OtelAttribute.callId]: event.callId, ...identityAttributes(event, o) },
      }),
      waited: false,
      tookOver: false,
    }));
    const call = routed.call;
    if (event.type === "in_flight_wait") call.data.waited = true;
    if (event.type === "takeover") call.data.tookOver = true;
    const eventAttributes: Attributes = {};
    if (event.attempt !== undefined) {
      eventAttributes[OtelAttribute.attempt] = event.attempt;
      call.data.span.setAttribute(OtelAttribute.attempt, event.attempt);
    }
    const eventError = errorType(event.error);
    if (eventError) eventAttributes[OtelAttribute.errorType] = eventError;
    call.data.span.addEvent(`idempotool.${event.type}`, eventAttributes, new Date(event.at));
    if (event.type === "completed")
      call.data.span.setAttribute(OtelAttribute.resultStored, event.error === undefined);
    if (routed.ends) {
      end(call, event.type, event.at, event);
      duration.record((event.durationMs ?? 0) / 1000, { ...base, [OtelAttribute.outcome]: event.type });
    }
    sweep(event.at);
  };

  const hook = (event: IdempotencyEvent) => {
    try {
      record(event);
    } catch {
      // Telemetry must never change what a call does.
    }
    if (o.onEvent) {
      try {
        o.onEvent(event);
      } catch {
        // The user's hook is isolated from ours, as the core isolates both.
      }
    }
  };
  return Object.defineProperties(hook, {
    endOpenSpans: {
      value: () => {
        for (const call of calls.all()) end(call, "abandoned", call.lastAt);
      },
    },
    openSpans: { get: () => calls.size },
  }) as OtelEventHook;
}

/**
 * Call several `onEvent` hooks in order; one that throws does not stop the others.
 * @example
 * const onEvent = composeEventHooks(otelEvents(), (event) => log.debug(event));
 */
export function composeEventHooks(
  ...hooks: readonly ((event: IdempotencyEvent) => void)[]
): (event: IdempotencyEvent) => void {
  return (event) => {
    for (const hook of hooks) {
      try {
        hook(event);
      } catch {
        // Each hook is on its own.
      }
    }
  };
}

function identityAttributes(event: IdempotencyEvent, o: ResolvedOtelOptions): Attributes {
  const attributes: Attributes = {};
  if (o.scope) attributes[OtelAttribute.scope] = event.scope;
  if (o.key === "hash") attributes[OtelAttribute.keyHash] = sha256Hex(event.key).slice(0, 16);
  if (o.key === "raw") attributes[OtelAttribute.key] = event.key;
  return attributes;
}

function errorType(error: unknown): string | undefined {
  if (error === undefined || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string") return code;
  return error instanceof Error ? error.name : typeof error;
}

interface ResolvedOtelOptions {
  readonly tracer: Tracer | undefined;
  readonly meter: Meter | undefined;
  readonly key: "hash" | "none" | "raw";
  readonly scope: boolean;
  readonly onEvent: ((event: IdempotencyEvent) => void) | undefined;
  readonly abandonAfterMs: number;
  readonly maxOpenCalls: number;
}

function resolveOtelOptions(options: OtelEventsOptions): ResolvedOtelOptions {
  if (typeof options !== "object" || options === null) invalidOption(owner, "options", "must be an object");
  const key = options.key ?? "hash";
  if (key !== "hash" && key !== "none" && key !== "raw")
    invalidOption(owner, "key", 'must be "hash", "none" or "raw"');
  if (options.onEvent !== undefined && typeof options.onEvent !== "function")
    invalidOption(owner, "onEvent", "must be a function");
  const abandonAfterMs = durationOption(owner, "abandonAfterMs", options.abandonAfterMs, 10 * 60 * 1000, {
    max: maxTtlMs,
  });
  const maxOpenCalls = sizeOption(owner, "maxOpenCalls", options.maxOpenCalls, 10_000);
  return {
    tracer: options.tracer,
    meter: options.meter,
    key,
    scope: options.scope ?? true,
    onEvent: options.onEvent,
    abandonAfterMs,
    maxOpenCalls,
  };
}
