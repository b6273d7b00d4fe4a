/**
 * The speed targets, kept as ratios measured within one run (issue 14's; issue 7's came before). A ratio
 * between subjects of one group is the median of the per-repetition ratios (the repetitions ran back to back,
 * so each pair saw the same machine).
 */
import { type BackendName, SqliteDriver, sqliteBackendNames } from "./backends/backend.js";
import { median } from "./measure.js";
import { type Cell, interleaved } from "./runner.js";
import { type SubjectName, Workload } from "./subject.js";

export interface TargetResult {
  readonly id: string;
  readonly text: string;
  readonly need: number;
  /** undefined when a side was not measured (filtered out, skipped or failed). */
  readonly ratio: number | undefined;
  /**
   * The same comparison by median latency (their p50 over ours): a cross-check that a burst of load from
   * other processes moves far less than ops/s. Judged on only where a target names `needP50`.
   */
  readonly p50Ratio: number | undefined;
  readonly status: "PASS" | "MISS" | "n/a";
  readonly detail: string;
}

type Find = (
  backend: BackendName,
  workload: Workload,
  concurrency: number,
  subject: SubjectName,
) => Cell | undefined;

interface Target {
  readonly id: string;
  readonly text: string;
  readonly need: number;
  readonly backend: BackendName;
  readonly workload: Workload;
  readonly concurrency: number;
  /** The other side: one subject, or the best of several (per repetition). */
  readonly against: readonly SubjectName[];
  /** Where the other side lives, when not in the same group. */
  readonly againstBackend?: BackendName;
  /** Also needed: the other side's p50 latency over ours at least this (1 / 1.5: within 1.5× of theirs). */
  readonly needP50?: number;
}

const pt = "powertools" as const;
const ni = "node-idempotency" as const;
const floor = "floor" as const;
const both = [Workload.first, Workload.replay] as const;

export const targets: readonly Target[] = [
  {
    id: "memory.first.vs-best-anchor",
    text: "memory first c1 ≥ 1.5× the best anchor",
    need: 1.5,
    backend: "memory",
    workload: Workload.first,
    concurrency: 1,
    against: [pt, ni],
  },
  {
    id: "memory.first.vs-floor",
    text: "memory first c1 ≥ 0.5 of the floor",
    need: 0.5,
    backend: "memory",
    workload: Workload.first,
    concurrency: 1,
    against: [floor],
  },
  // First calls on the same client library as @node-idempotency's adapter (node-redis 4.7.1).
  ...([1, 32] as const).map(
    (c): Target => ({
      id: `redis.first.c${c}.node-redis.vs-node-idempotency`,
      text: `redis (node-redis 4) first c${c} ≥ 1.2× @node-idempotency`,
      need: 1.2,
      backend: "redis (node-redis 4)",
      workload: Workload.first,
      concurrency: c,
      against: [ni],
    }),
  ),
  ...([1, 32] as const).flatMap((c) =>
    [Workload.replay, Workload.contended].map(
      (w): Target => ({
        id: `redis.${w}.c${c}.vs-best-anchor`,
        text: `redis ${w} c${c} ≥ 1.2× the best anchor`,
        need: 1.2,
        backend: "redis",
        workload: w,
        concurrency: c,
        against: [pt, ni],
      }),
    ),
  ),
  ...[...both, Workload.contended].map(
    (w): Target => ({
      id: `redis.${w}.c1.vs-floor`,
      text: `redis ${w} c1 ≥ 0.8 of the floor`,
      need: 0.8,
      backend: "redis",
      workload: w,
      concurrency: 1,
      against: [floor],
    }),
  ),
  ...([1, 16] as const).flatMap((c): Target[] => [
    ...both.map(
      (w): Target => ({
        id: `postgres.${w}.c${c}.vs-floor`,
        text: `postgres ${w} c${c} ≥ 0.85 of the floor`,
        need: 0.85,
        backend: "postgres",
        workload: w,
        concurrency: c,
        against: [floor],
      }),
    ),
    {
      id: `postgres.contended.c${c}.vs-floor`,
      text: `postgres contended c${c} ≥ 0.8 of the floor, p50 within 1.5×`,
      need: 0.8,
      needP50: 1 / 1.5,
      backend: "postgres",
      workload: Workload.contended,
      concurrency: c,
      against: [floor],
    },
  ]),
  // Each SQLite target applies to each driver: both are the same store, with the same guarantees.
  ...Object.values(SqliteDriver).flatMap((driver) =>
    both.map(
      (w): Target => ({
        id: `sqlite.${driver}.${w}.vs-floor`,
        text: `${sqliteBackendNames[driver].store} ${w} c1 ≥ 0.8 of the floor`,
        need: 0.8,
        backend: sqliteBackendNames[driver].store,
        workload: w,
        concurrency: 1,
        against: [floor],
      }),
    ),
  ),
];

const usable = (cell: Cell | undefined): cell is Cell =>
  cell !== undefined && !cell.error && cell.samples.length > 0;

/** The other side's p50 latency over idempotool's (the best, i.e. lowest, of several), paired like {@link ratio}. */
export function p50Ratio(ours: Cell, theirs: readonly Cell[]): number {
  const reps = Math.min(ours.samples.length, ...theirs.map((t) => t.samples.length));
  const paired = theirs.every((t) => interleaved(t, ours));
  if (paired && reps > 0) {
    return median(
      Array.from(
        { length: reps },
        (_, i) => Math.min(...theirs.map((t) => t.samples[i]!.p50Us)) / ours.samples[i]!.p50Us,
      ),
    );
  }
  const best = Math.min(...theirs.map((t) => median(t.samples.map((s) => s.p50Us))));
  return best / median(ours.samples.map((s) => s.p50Us));
}

/** idempotool's ops/s over the other side's, paired per repetition when they ran interleaved. */
export function ratio(ours: Cell, theirs: readonly Cell[]): number {
  const paired = theirs.every((t) => interleaved(t, ours));
  const reps = Math.min(ours.samples.length, ...theirs.map((t) => t.samples.length));
  if (paired && reps > 0) {
    const per = Array.from({ length: reps }, (_, i) => {
      const best = Math.max(...theirs.map((t) => t.samples[i]!.opsPerSec));
      return ours.samples[i]!.opsPerSec / best;
    });
    return median(per);
  }
  const best = Math.max(...theirs.map((t) => median(t.samples.map((s) => s.opsPerSec))));
  return median(ours.samples.map((s) => s.opsPerSec)) / best;
}

export function evaluateTargets(cells: readonly Cell[], ourName: SubjectName = "idempotool"): TargetResult[] {
  const find: Find = (backend, workload, concurrency, subject) =>
    cells.find(
      (c) =>
        c.backend === backend &&
        c.workload === workload &&
        c.concurrency === concurrency &&
        c.subject === subject,
    );
  return targets.map((t): TargetResult => {
    const ours = find(t.backend, t.workload, t.concurrency, ourName);
    const theirs = t.against.map((s) => find(t.againstBackend ?? t.backend, t.workload, t.concurrency, s));
    if (!usable(ours) || !theirs.every(usable)) {
      return {
        id: t.id,
        text: t.text,
        need: t.need,
        ratio: undefined,
        p50Ratio: undefined,
        status: "n/a",
        detail: "not measured in this run",
      };
    }
    const value = ratio(ours, theirs);
    const byP50 = p50Ratio(ours, theirs);
    const dedup = ours.dedupOk && theirs.every((c) => c.dedupOk);
    const latency = t.needP50 === undefined || byP50 >= t.needP50;
    return {
      id: t.id,
      text: t.text,
      need: t.need,
      ratio: value,
      p50Ratio: byP50,
      status: value >= t.need && latency && dedup ? "PASS" : "MISS",
      detail: !dedup ? "a side failed its dedup check" : latency ? "" : "p50 too slow",
    };
  });
}
