/**
 * The OP-5 reconciler: finds records nobody will finish (an in-progress claim whose lease has passed, or
 * an outcome recorded as unknown), asks the tool's hook what happened downstream, and settles, releases,
 * compensates or flags each one. It works over any store, through the store contract alone.
 */
import { randomUUID } from "node:crypto";
import { type Clock, monotonicNow, systemClock } from "../core/clock.js";
import { type Compensation, compensation } from "../core/compensation.js";
import { IdempotencyError, StoreUnavailableError } from "../core/errors.js";
import { lateClaim, startLease } from "../core/lease.js";
import {
  durationOption,
  invalidOption,
  invalidOptionFor,
  maxTtlMs,
  sizeOption,
} from "../core/option-checks.js";
import { defaults } from "../core/options.js";
import { type ResultCodec, resolveCodec } from "../core/result-codec.js";
import { type IdempotencyRecord, type IdempotencyStore, RecordStatus } from "../core/store.js";
import { isTrailRecord } from "../review/trail.js";
import { count, Decision, emptySummary, type ReconcileDecision, type ReconcileSummary } from "./decision.js";
import type { ReconcileTool } from "./hooks.js";
import { apply, ask, plan } from "./settle-record.js";

const owner = "reconcile()";

export interface ReconcileOptions {
  readonly store: IdempotencyStore;
  /** The hook of each tool, by the name given to `idempotent({ name })`. Other tools' records are flagged, never touched. */
  readonly tools: Readonly<Record<string, ReconcileTool>>;
  /**
   * The reconciler's clock. It only picks candidates: the takeover itself is judged by the store's clock
   * where it has one (PostgreSQL, Redis), so a clock running ahead cannot take over a live lease.
   */
  readonly clock?: Clock | undefined;
  /** Ask the hooks and report, but change nothing and never compensate. Default false. */
  readonly dryRun?: boolean | undefined;
  /** Examine at most this many records in one pass (a whole number ≥ 1). Default: all of them. */
  readonly limit?: number | undefined;
  /** Records read per `list` call (a whole number ≥ 1; above 1000 reads 1000). Default 100. */
  readonly pageSize?: number | undefined;
  /** Only this tool's records. */
  readonly tool?: string | undefined;
  /** Only this scope's records. */
  readonly scope?: string | undefined;
  /** The reconciler's lease on a record while its hook runs; renewed meanwhile. Whole ms from 1 to 2^31 − 1; default 60 s. */
  readonly leaseMs?: number | undefined;
  readonly signal?: AbortSignal | undefined;
  /** Called for every decision as it is made; a callback that throws is ignored. */
  readonly onDecision?: ((decision: ReconcileDecision) => void) | undefined;
}

/**
 * One pass over the store. Returns every decision, counted.
 * @example
 * import { memoryStore } from "idempotool";
 * import { reconcileOnce } from "idempotool/reconcile";
 *
 * const summary = await reconcileOnce({
 *   store: memoryStore(),
 *   tools: { send_email: { verify: async () => ({ status: "unknown", reason: "no lookup yet" }) } },
 * });
 * console.log(summary.examined, summary.needsReview);
 */
export async function reconcileOnce(options: ReconcileOptions): Promise<ReconcileSummary> {
  const o = resolve(options);
  const summary = emptySummary(o.dryRun);
  const decide = (decision: Omit<ReconcileDecision, "dryRun" | "scope" | "key" | "tool">) => {
    const full: ReconcileDecision = {
      scope: decision.record.scope,
      key: decision.record.key,
      tool: decision.record.tool,
      dryRun: o.dryRun,
      ...decision,
    };
    count(summary, full);
    try {
      o.onDecision?.(full);
    } catch {
      // A logging callback must never change what the reconciler does.
    }
  };
  // A record is examined once per pass, even if a store's cursor (Redis SCAN) hands it back twice.
  const seen = new Set<string>();
  // Unknown records first: they already fail every caller closed.
  for (const status of [RecordStatus.unknown, RecordStatus.inProgress]) {
    let cursor: string | undefined;
    do {
      o.signal?.throwIfAborted();
      const page = await listPage(o, status, cursor);
      cursor = page.nextCursor;
      for (const record of page.records) {
        if (summary.examined >= o.limit) return summary;
        o.signal?.throwIfAborted();
        if (status === RecordStatus.inProgress && record.leaseExpiresAt > o.clock.now()) continue;
        // Operators' trail entries are not calls: an interrupted one is for a person to read.
        if (isTrailRecord(record)) continue;
        const id = `${record.scope}\u0000${record.key}`;
        if (seen.has(id)) continue;
        seen.add(id);
        await reconcileRecord(o, record, decide);
      }
    } while (cursor !== undefined);
  }
  return summary;
}

/** The same as {@link reconcileOnce}. */
export const reconcile = reconcileOnce;

/** Present and defined: an option given as `undefined` was resolved to its default. */
type Defined<T> = { readonly [K in keyof T]-?: Exclude<T[K], undefined> };

export type Resolved = Defined<Pick<ReconcileOptions, "store" | "tools" | "clock" | "dryRun" | "leaseMs">> &
  Omit<ReconcileOptions, "limit" | "pageSize"> & {
    readonly limit: number;
    readonly pageSize: number;
    /** How each tool's outcomes are stored (its `redact` and `encryption`), by tool name. */
    readonly codecs: ReadonlyMap<string, ResultCodec | undefined>;
    /** A tool's `compensate`, undoing a record at most once (undefined when the tool has none). */
    readonly undo: (tool: string) => Compensation<unknown> | undefined;
  };

function resolve(options: ReconcileOptions): Resolved {
  if (typeof options?.store?.list !== "function")
    invalidOption(owner, "store", "must be an idempotency store");
  if (typeof options.tools !== "object" || options.tools === null)
    invalidOption(owner, "tools", "must be an object");
  const codecs = new Map<string, ResultCodec | undefined>();
  for (const [name, tool] of Object.entries(options.tools)) {
    if (typeof tool?.verify !== "function")
      invalidOption(owner, `tools.${name}.verify`, "must be a function");
    if (tool.compensate !== undefined && typeof tool.compensate !== "function") {
      invalidOption(owner, `tools.${name}.compensate`, "must be a function");
    }
    durationOption(owner, `tools.${name}.ttlMs`, tool.ttlMs, undefined, { max: maxTtlMs });
    sizeOption(owner, `tools.${name}.maxResultBytes`, tool.maxResultBytes);
    codecs.set(name, resolveCodec(tool.redact, tool.encryption, invalidOptionFor(owner, `tools.${name}.`)));
  }
  const leaseMs = durationOption(owner, "leaseMs", options.leaseMs, defaults.leaseMs);
  // Made on the first compensate answer of a pass only: most passes undo nothing.
  const undos = new Map<string, Compensation<unknown>>();
  const undo = (name: string) => {
    const compensate = options.tools[name]?.compensate;
    if (compensate === undefined) return undefined;
    let made = undos.get(name);
    if (made === undefined) {
      const tool = options.tools[name]!;
      made = compensation(compensate, {
        tool: name,
        store: options.store,
        ttlMs: tool.ttlMs,
        leaseMs,
        // An undo already running elsewhere (saga.compensate()) is left to finish: the next pass asks again.
        waitMs: 0,
        redact: tool.redact,
        encryption: tool.encryption,
        clock: options.clock,
      });
      undos.set(name, made);
    }
    return made;
  };
  return {
    ...options,
    clock: options.clock ?? systemClock,
    dryRun: options.dryRun ?? false,
    leaseMs,
    limit: sizeOption(owner, "limit", options.limit, Number.MAX_SAFE_INTEGER),
    pageSize: Math.min(sizeOption(owner, "pageSize", options.pageSize, 100), 1000),
    codecs,
    undo,
  };
}

async function listPage(o: Resolved, status: RecordStatus, cursor: string | undefined) {
  try {
    return await o.store.list({
      status,
      limit: o.pageSize,
      ...(o.tool !== undefined ? { tool: o.tool } : {}),
      ...(o.scope !== undefined ? { scope: o.scope } : {}),
      ...(cursor !== undefined ? { cursor } : {}),
    });
  } catch (error) {
    if (error instanceof IdempotencyError) throw error;
    const consequence = "The pass stopped here; records not yet examined are left for the next one.";
    throw new StoreUnavailableError("list", { cause: error, consequence });
  }
}

type Decide = (decision: Omit<ReconcileDecision, "dryRun" | "scope" | "key" | "tool">) => void;

async function reconcileRecord(o: Resolved, record: IdempotencyRecord, decide: Decide): Promise<void> {
  const tool = o.tools[record.tool] as ReconcileTool | undefined;
  const found = record.status === RecordStatus.unknown ? "recorded as unknown" : "stale (its lease passed)";
  if (!tool) {
    decide({ decision: Decision.needsReview, record, reason: `${found}; no hook for tool ${record.tool}` });
    return;
  }
  if (o.dryRun) {
    const answer = await ask(tool, record, new AbortController().signal);
    const planned = plan(answer, tool);
    decide({ ...planned, record, reason: `${found}; would: ${planned.reason}` });
    return;
  }

  let taken: IdempotencyRecord | null;
  const sentAt = monotonicNow(o.clock);
  try {
    taken = await o.store.takeover({
      scope: record.scope,
      key: record.key,
      fromToken: record.token,
      token: randomUUID(),
      leaseMs: o.leaseMs,
      ttlMs: tool.ttlMs ?? defaults.ttlMs,
      now: o.clock.now(),
    });
  } catch (error) {
    decide({ decision: Decision.error, record, reason: `${found}; the takeover failed`, error });
    return;
  }
  if (!taken) {
    const reason = `${found}; another worker moved it first, or the store's clock says its lease is still live`;
    decide({ decision: Decision.skipped, record, reason });
    return;
  }

  // Held while the hook (and a compensation) runs, renewed as `idempotent()` renews its own, so a slow hook's
  // record never looks stale to another reconciler or caller. A failed renewal is retried on the next beat:
  // the settle's fencing decides whether the claim held.
  const late = lateClaim(o, sentAt);
  if (late !== undefined) {
    // Nothing ran under it: its lease passes, and the next run finds the record stale again.
    decide({
      decision: Decision.error,
      record,
      reason: `${found}; the takeover was answered too late`,
      error: late,
    });
    return;
  }
  const lease = startLease({ ...o, ttlMs: tool.ttlMs ?? defaults.ttlMs }, taken, o.signal, () => {}, {
    claimSentAt: sentAt,
  });
  try {
    const answer = await ask(tool, taken, lease.signal);
    const planned = plan(answer, tool);
    const applied = await apply(o, tool, taken, answer, lease);
    decide({ ...planned, ...applied, record, reason: `${found}; ${applied.reason ?? planned.reason}` });
  } finally {
    await lease.stop();
  }
}
