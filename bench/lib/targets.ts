/**
 * Issue 7's targets, kept as ratios measured within one run. A ratio between subjects of one group is the
 * median of the per-repetition ratios (the repetitions ran back to back, so each pair saw the same machine).
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
   * other processes moves far less than ops/s. Not what the target is judged on.
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
}

const pt = "powertools" as const;
const ni = "node-idempotency" as const;
const floor = "floor" as const;

export const targets: readonly Target[] = [
  ...([Workload.first, Workload.replay] as const).flatMap((w): Target[] => {
    const need = w === Workload.first ? 2 : 1.2;
    return [
      {
        id: `memory.${w}.vs-powertools`,
        text: `memory ${w} c1 ≥ ${need}× Powertools`,
        need,
        backend: "memory",
        workload: w,
        concurrency: 1,
        against: [pt],
      },
      {
        id: `memory.${w}.vs-node-idempotency`,
        text: `memory ${w} c1 ≥ ${need}× @node-idempotency`,
        need,
        backend: "memory",
        workload: w,
        concurrency: 1,
        against: [ni],
      },
      {
        id: `memory.${w}.vs-floor`,
        text: `memory ${w} c1 ≥ 0.6 of the floor`,
        need: 0.6,
        backend: "memory",
        workload: w,
        concurrency: 1,
        against: [floor],
      },
    ];
  }),
  {
    id: "redis.first.vs-floor",
    text: "redis first c1 ≥ 0.8 of the floor",
    need: 0.8,
    backend: "redis",
    workload: Workload.first,
    concurrency: 1,
    against: [floor],
  },
  {
    id: "redis.replay.vs-floor",
    text: "redis replay c1 ≥ 0.8 of the floor",
    need: 0.8,
    backend: "redis",
    workload: Workload.replay,
    concurrency: 1,
    against: [floor],
  },
  {
    id: "redis.replay.vs-powertools",
    text: "redis replay c1 ≥ 2× Powertools",
    need: 2,
    backend: "redis",
    workload: Workload.replay,
    concurrency: 1,
    against: [pt],
  },
  {
    id: "redis.replay.vs-node-idempotency",
    text: "redis replay c1 ≥ 2× @node-idempotency",
    need: 2,
    backend: "redis",
    workload: Workload.replay,
    concurrency: 1,
    against: [ni],
  },
  {
    id: "redis.first.c32.vs-best-anchor",
    text: "redis first c32 ≥ 1× the best anchor",
    need: 1,
    backend: "redis",
    workload: Workload.first,
    concurrency: 32,
    against: [pt, ni],
  },
  {
    id: "redis.replay.c32.vs-best-anchor",
    text: "redis replay c32 ≥ 1× the best anchor",
    need: 1,
    backend: "redis",
    workload: Workload.replay,
    concurrency: 32,
    against: [pt, ni],
  },
  ...([1, 16] as const).flatMap((c): Target[] =>
    ([Workload.first, Workload.replay] as const).map((w) => ({
      id: `postgres.${w}.c${c}.vs-floor`,
      text: `postgres ${w} c${c} ≥ 0.85 of the floor`,
      need: 0.85,
      backend: "postgres",
      workload: w,
      concurrency: c,
      against: [floor],
    })),
  ),
  // Each SQLite target applies to each driver: both are the same store, with the same guarantees.
  ...Object.values(SqliteDriver).flatMap((driver): Target[] => {
    const { store, tiered } = sqliteBackendNames[driver];
    return [
      {
        id: `sqlite.${driver}.first.vs-floor`,
        text: `${store} first c1 ≥ 0.8 of the floor`,
        need: 0.8,
        backend: store,
        workload: Workload.first,
        concurrency: 1,
        against: [floor],
      },
      {
        id: `sqlite.${driver}.replay.vs-floor`,
        text: `${store} replay c1 ≥ 0.5 of the floor`,
        need: 0.5,
        backend: store,
        workload: Workload.replay,
        concurrency: 1,
        against: [floor],
      },
      {
        id: `tiered-sqlite.${driver}.replay.vs-powertools-cache`,
        text: `${tiered} replay c1 ≥ 3× Powertools local cache`,
        need: 3,
        backend: tiered,
        workload: Workload.replay,
        concurrency: 1,
        against: ["powertools+cache"],
        againstBackend: "tiered-redis",
      },
    ];
  }),
  {
    id: "tiered-redis.replay.vs-powertools-cache",
    text: "tiered-redis replay c1 ≥ 3× Powertools local cache",
    need: 3,
    backend: "tiered-redis",
    workload: Workload.replay,
    concurrency: 1,
    against: ["powertools+cache"],
  },
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
    const dedup = ours.dedupOk && theirs.every((c) => c.dedupOk);
    return {
      id: t.id,
      text: t.text,
      need: t.need,
      ratio: value,
      p50Ratio: p50Ratio(ours, theirs),
      status: value >= t.need && dedup ? "PASS" : "MISS",
      detail: dedup ? "" : "a side failed its dedup check",
    };
  });
}
