/**
 * Counts over time, from what the store itself knows: how long the records that need a person have
 * waited, how many are unknown and how many were left in progress, how many keys were taken over (a
 * second attempt, or an operator's resolution), and how many resolutions the trail keeps per day. Replays and conflicts leave nothing
 * in the store to count: the OpenTelemetry integration counts those.
 */
import { type Clock, systemClock } from "../core/clock.js";
import { IdempotencyError, StoreUnavailableError } from "../core/errors.js";
import { invalidOption } from "../core/option-checks.js";
import type { IdempotencyStore } from "../core/store.js";
import { needsReview } from "./queue.js";
import { isTrailRecord, type ResolveAs, trailEntryOf } from "./trail.js";

const owner = "reviewCounts()";
const hourMs = 60 * 60 * 1000;
const dayMs = 24 * hourMs;

/** The age buckets of the records that need a person, by time since their first attempt. */
export const ageBuckets = [
  { name: "under_1h", label: "< 1 h", maxMs: hourMs },
  { name: "1h_to_24h", label: "1–24 h", maxMs: dayMs },
  { name: "1d_to_7d", label: "1–7 d", maxMs: 7 * dayMs },
  { name: "over_7d", label: "> 7 d", maxMs: Number.POSITIVE_INFINITY },
] as const;
export type AgeBucket = (typeof ageBuckets)[number]["name"];

export interface ReviewCountsOptions {
  readonly store: IdempotencyStore;
  readonly clock?: Clock | undefined;
  readonly signal?: AbortSignal | undefined;
}

/** One day's resolutions (UTC), by what the operator found. */
export interface ResolutionDay {
  /** `YYYY-MM-DD`, UTC. */
  readonly day: string;
  readonly total: number;
  readonly byAs: Readonly<Record<ResolveAs, number>>;
  /** Resolutions whose resolver stopped between its intent and its act: look at their records. */
  readonly interrupted: number;
}

export interface ReviewCounts {
  /** Records that need a person, by age bucket. */
  readonly needingReviewByAge: Readonly<Record<AgeBucket, number>>;
  /** Of those: outcome unknown. */
  readonly unknown: number;
  /** Of those: left in progress with their lease passed (their worker stopped). */
  readonly stale: number;
  /**
   * Live records whose key was claimed more than once (attempts > 1): a later attempt took over a lease
   * that passed, or an operator's resolution took the record over to settle it.
   */
  readonly takeovers: number;
  /** Resolutions per day, oldest day first, for the days the trail keeps. */
  readonly resolutionsPerDay: readonly ResolutionDay[];
  /** How many records were looked at. */
  readonly scanned: number;
}

/**
 * Count what needs a person and what was resolved, reading every record once.
 * @example
 * import { memoryStore } from "idempotool";
 * import { reviewCounts } from "idempotool/review";
 *
 * const counts = await reviewCounts({ store: memoryStore() });
 * console.log(counts.needingReviewByAge.over_7d, counts.unknown, counts.resolutionsPerDay.at(-1));
 */
export async function reviewCounts(options: ReviewCountsOptions): Promise<ReviewCounts> {
  if (typeof options?.store?.list !== "function")
    invalidOption(owner, "store", "must be an idempotency store");
  const now = (options.clock ?? systemClock).now();
  const byAge: Record<AgeBucket, number> = { under_1h: 0, "1h_to_24h": 0, "1d_to_7d": 0, over_7d: 0 };
  const days = new Map<string, { byAs: Record<ResolveAs, number>; interrupted: number }>();
  // A store's cursor (Redis SCAN) may hand a record back twice: each is counted once.
  const seen = new Set<string>();
  let unknown = 0;
  let stale = 0;
  let takeovers = 0;
  let scanned = 0;
  let cursor: string | undefined;
  do {
    options.signal?.throwIfAborted();
    let page: Awaited<ReturnType<IdempotencyStore["list"]>>;
    try {
      page = await options.store.list({ limit: 1000, ...(cursor !== undefined ? { cursor } : {}) });
    } catch (error) {
      if (error instanceof IdempotencyError) throw error;
      throw new StoreUnavailableError("list", { cause: error, consequence: "The counts could not be read." });
    }
    cursor = page.nextCursor;
    scanned += page.records.length;
    for (const record of page.records) {
      const id = `${record.scope.length}:${record.scope}${record.key}`;
      if (seen.has(id)) continue;
      seen.add(id);
      if (isTrailRecord(record)) {
        const entry = trailEntryOf(record);
        if (entry === undefined) continue;
        const day = entry.at.slice(0, 10);
        const counts = days.get(day) ?? {
          byAs: { completed: 0, failed: 0, not_executed: 0 },
          interrupted: 0,
        };
        if (entry.state === "interrupted") counts.interrupted++;
        else counts.byAs[entry.as]++;
        days.set(day, counts);
        continue;
      }
      if (record.attempts > 1) takeovers++;
      if (!needsReview(record, now)) continue;
      if (record.status === "unknown") unknown++;
      else stale++;
      const age = Math.max(0, now - record.createdAt);
      const bucket = ageBuckets.find((b) => age < b.maxMs) ?? ageBuckets[ageBuckets.length - 1]!;
      byAge[bucket.name]++;
    }
  } while (cursor !== undefined);
  const resolutionsPerDay = [...days.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([day, counts]) => ({
      day,
      total: counts.byAs.completed + counts.byAs.failed + counts.byAs.not_executed + counts.interrupted,
      byAs: counts.byAs,
      interrupted: counts.interrupted,
    }));
  return { needingReviewByAge: byAge, unknown, stale, takeovers, resolutionsPerDay, scanned };
}
