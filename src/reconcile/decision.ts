/** The reconciler's decisions, how they are counted, and the summary a pass returns. */
import type { IdempotencyRecord } from "../core/store.js";

/** What the reconciler did (or, in a dry run, would do) with one record. */
export const Decision = {
  /** The effect happened: settled completed with the hook's result; repeats replay it. */
  completed: "completed",
  /** The attempt failed definitively: settled failed; repeats replay the failure. */
  failed: "failed",
  /** The effect certainly did not happen: the record was removed; the next call runs. */
  released: "released",
  /** The effect was undone by the tool's `compensate`: settled failed ("compensated"); repeats replay that. */
  compensated: "compensated",
  /** Nobody can tell yet, or no hook is configured: left (or put back) as unknown for an operator. */
  needsReview: "needs_review",
  /** Another worker or reconciler moved the record first, or the store's clock says its lease is live. */
  skipped: "skipped",
  /** The hook, `compensate` or the store failed; the record was put back as unknown when possible. */
  error: "error",
} as const;
export type Decision = (typeof Decision)[keyof typeof Decision];

/** One logged decision. */
export interface ReconcileDecision {
  readonly decision: Decision;
  readonly scope: string;
  readonly key: string;
  readonly tool: string;
  /** The record as the pass found it. */
  readonly record: IdempotencyRecord;
  /** Why, in a sentence an operator can act on. */
  readonly reason: string;
  /** True when nothing was changed (a dry run). */
  readonly dryRun: boolean;
  readonly error?: unknown;
}

/** What one pass did, counted. Every examined record has exactly one decision. */
export interface ReconcileSummary {
  readonly dryRun: boolean;
  /** Stale in-progress and unknown records looked at. */
  examined: number;
  completed: number;
  failed: number;
  released: number;
  compensated: number;
  needsReview: number;
  skipped: number;
  errors: number;
  readonly decisions: ReconcileDecision[];
}

const counter = {
  completed: "completed",
  failed: "failed",
  released: "released",
  compensated: "compensated",
  needs_review: "needsReview",
  skipped: "skipped",
  error: "errors",
} as const satisfies Record<Decision, keyof ReconcileSummary>;

export function emptySummary(dryRun: boolean): ReconcileSummary {
  return {
    dryRun,
    examined: 0,
    completed: 0,
    failed: 0,
    released: 0,
    compensated: 0,
    needsReview: 0,
    skipped: 0,
    errors: 0,
    decisions: [],
  };
}

export function count(summary: ReconcileSummary, decision: ReconcileDecision): void {
  summary.examined += 1;
  summary[counter[decision.decision]] += 1;
  summary.decisions.push(decision);
}
