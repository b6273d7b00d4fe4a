/**
 * Runs every (backend, workload, concurrency) group: a sanity check per subject, a warm-up, then the
 * repetitions interleaved across the group's subjects (A B C, C B A, A B C, …) so drift on a shared, noisy
 * machine hits every subject alike. Every repetition also checks the tool ran exactly as often as it must.
 */
import type { Backend } from "./backends/backend.js";
import {
  type Latencies,
  measure,
  median,
  type Sample,
  timed,
  type Unit,
  type UnitOutcome,
} from "./measure.js";
import type { Progress } from "./progress.js";
import { conflictingArgs, type Subject, type SubjectName, toolArgs, Workload } from "./subject.js";

/** Callers on one key in the contended workload (issue 7). */
export const contendedCallers = 32;

export interface RunSettings {
  readonly reps: number;
  readonly durationMs: number;
  readonly warmupMs: number;
  /** Collect the heap before each timed repetition (needs --expose-gc). */
  readonly gcEachRep: boolean;
  readonly workloads: readonly Workload[];
  readonly concurrencies: readonly number[] | undefined;
}

export interface Cell {
  readonly backend: Backend["name"];
  /** The backends whose repetitions ran interleaved with this cell's (see Backend.family); absent: its own. */
  readonly family?: string;
  readonly workload: Workload;
  readonly concurrency: number;
  readonly subject: SubjectName;
  readonly samples: Sample[];
  /** Every repetition ran the tool exactly as often as dedup allows (first: once per call; replay: never; contended: once per key). */
  dedupOk: boolean;
  dedupDetail?: string;
  error?: string;
}

export interface CellSummary {
  readonly opsPerSec: number;
  readonly p50Us: number;
  readonly p99Us: number;
  readonly cpuUsPerCall: number;
  /** Share of calls refused (an anchor refusing callers while the key is in flight). */
  readonly rejectedShare: number;
}

export function summarize(cell: Cell): CellSummary {
  const s = cell.samples;
  const calls = s.reduce((sum, x) => sum + x.calls, 0);
  return {
    opsPerSec: median(s.map((x) => x.opsPerSec)),
    p50Us: median(s.map((x) => x.p50Us)),
    p99Us: median(s.map((x) => x.p99Us)),
    cpuUsPerCall: median(s.map((x) => x.cpuUsPerCall)),
    rejectedShare: calls === 0 ? 0 : s.reduce((sum, x) => sum + x.rejected, 0) / calls,
  };
}

export interface SanityResult {
  readonly backend: Backend["name"];
  readonly subject: SubjectName;
  readonly ok: boolean;
  readonly checks: string[];
}

let sequence = 0;
/** Keys unique to this run (and to this process), short so hashing them costs little. */
export function keyMaker(tag: string): () => string {
  return () => `${tag}-${(sequence++).toString(36)}`;
}

const one: UnitOutcome = { calls: 1, rejected: 0 };

function unitFor(
  subject: Subject,
  workload: Workload,
  nextKey: () => string,
  replayKeys: readonly string[],
): Unit {
  switch (workload) {
    case Workload.first:
      return async (latencies) => {
        const key = nextKey();
        await timed(latencies, () => subject.first(key, toolArgs));
        return one;
      };
    case Workload.replay: {
      let i = 0;
      return async (latencies) => {
        const key = replayKeys[i++ % replayKeys.length]!;
        await timed(latencies, () => subject.replay(key, toolArgs));
        return one;
      };
    }
    case Workload.contended:
      return (latencies) => contendedBatch(subject, nextKey(), latencies);
  }
}

async function contendedBatch(subject: Subject, key: string, latencies: Latencies): Promise<UnitOutcome> {
  const settled = await Promise.allSettled(
    Array.from({ length: contendedCallers }, () => timed(latencies, () => subject.contended(key, toolArgs))),
  );
  let rejected = 0;
  let reasons: Map<string, number> | undefined;
  for (const outcome of settled) {
    if (outcome.status === "fulfilled") continue;
    rejected++;
    reasons ??= new Map();
    const reason = errorName(outcome.reason);
    reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
  }
  return reasons ? { calls: contendedCallers, rejected, reasons } : { calls: contendedCallers, rejected };
}

function errorName(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === "string" || typeof code === "number" ? `${error.name}(${code})` : error.name;
  }
  return String(error);
}

/** Complete one key per worker, so each replay worker has a completed key of its own. */
async function completedKeys(subject: Subject, count: number, nextKey: () => string): Promise<string[]> {
  const keys = Array.from({ length: count }, nextKey);
  for (const key of keys) await subject.first(key, toolArgs);
  return keys;
}

/** Prove each subject dedupes before timing it: one run per key, replays equal, conflicts refused, one run per contended key. */
export async function sanityCheck(
  backend: Backend,
  subject: Subject,
  nextKey: () => string,
): Promise<SanityResult> {
  const checks: string[] = [];
  let ok = true;
  const check = (passed: boolean, text: string) => {
    ok &&= passed;
    checks.push(`${passed ? "ok" : "FAILED"}: ${text}`);
  };
  subject.reset?.();
  try {
    const key = nextKey();
    const before = subject.runs();
    const original = await subject.first(key, toolArgs);
    check(subject.runs() === before + 1, `a first call runs the tool once (ran ${subject.runs() - before})`);
    const again = await subject.replay(key, toolArgs);
    check(subject.runs() === before + 1, "a replay does not run the tool");
    check(JSON.stringify(again) === JSON.stringify(original), "a replay returns the original result");
    if (subject.validatesPayload) {
      let refused = "";
      try {
        await subject.first(key, conflictingArgs);
      } catch (error) {
        refused = errorName(error);
      }
      check(
        refused !== "" && subject.runs() === before + 1,
        `other arguments under a used key are refused (${refused || "accepted!"})`,
      );
    }
    const contended = nextKey();
    const runsBefore = subject.runs();
    const settled = await Promise.allSettled(
      Array.from({ length: contendedCallers }, () => subject.contended(contended, toolArgs)),
    );
    const served = settled.filter((s) => s.status === "fulfilled").length;
    check(
      subject.runs() === runsBefore + 1,
      `${contendedCallers} concurrent callers on one key run the tool once (ran ${subject.runs() - runsBefore}; ${served} got the result)`,
    );
  } catch (error) {
    check(false, `threw ${errorName(error)}: ${(error as Error).message}`);
  }
  return { backend: backend.name, subject: subject.name, ok, checks };
}

/** Cells whose repetitions ran interleaved, one by one, so their ratios can be taken per repetition. */
export function interleaved(a: Cell, b: Cell): boolean {
  return (
    (a.family ?? a.backend) === (b.family ?? b.backend) &&
    a.workload === b.workload &&
    a.concurrency === b.concurrency
  );
}

/**
 * Runs one backend, or a family of them (see Backend.family) together: for each workload and concurrency,
 * a warm-up per subject, then the repetitions interleaved across every subject of every backend given.
 */
export async function runBackends(
  backends: readonly Backend[],
  settings: RunSettings,
  nextKey: () => string,
  progress: Progress,
): Promise<Cell[]> {
  const cells: Cell[] = [];
  const concurrencies = backends[0]!.concurrencies.filter(
    (c) =>
      (settings.concurrencies === undefined || settings.concurrencies.includes(c)) &&
      backends.every((b) => b.concurrencies.includes(c)),
  );
  const subjects = backends.flatMap((backend) => backend.subjects.map((subject) => ({ backend, subject })));
  for (const workload of settings.workloads) {
    for (const concurrency of concurrencies) {
      const group = subjects.map(
        ({ backend, subject }): Cell => ({
          backend: backend.name,
          ...(backend.family === undefined ? {} : { family: backend.family }),
          workload,
          concurrency,
          subject: subject.name,
          samples: [],
          dedupOk: true,
        }),
      );
      cells.push(...group);
      const replayKeys = new Map<Subject, string[]>();
      const prepare = async (subject: Subject) => {
        subject.reset?.();
        if (workload === Workload.replay && (subject.reset || !replayKeys.has(subject))) {
          replayKeys.set(subject, await completedKeys(subject, concurrency, nextKey));
        }
        return unitFor(subject, workload, nextKey, replayKeys.get(subject) ?? []);
      };
      const one = async (index: number, durationMs: number, rep: number | undefined) => {
        const { backend, subject } = subjects[index]!;
        const cell = group[index]!;
        if (cell.error) return;
        const label = `${backend.name} ${workload} c${concurrency} ${subject.name}`;
        try {
          const unit = await prepare(subject);
          if (settings.gcEachRep) gc();
          const before = subject.runs();
          const sample = await measure(unit, concurrency, durationMs);
          const ran = subject.runs() - before;
          const expected =
            workload === Workload.first ? sample.calls : workload === Workload.replay ? 0 : sample.units;
          if (rep !== undefined) {
            cell.samples.push(sample);
            if (ran !== expected) {
              cell.dedupOk = false;
              cell.dedupDetail = `rep ${rep + 1}: the tool ran ${ran} times, expected ${expected}`;
            }
          }
          progress.step(label, rep, sample.opsPerSec);
        } catch (error) {
          cell.error = `${errorName(error)}: ${(error as Error).message}`;
          progress.fail(label, cell.error);
        }
      };
      for (let i = 0; i < group.length; i++) await one(i, settings.warmupMs, undefined);
      for (let rep = 0; rep < settings.reps; rep++) {
        const order = group.map((_, i) => i);
        if (rep % 2 === 1) order.reverse();
        for (const i of order) await one(i, settings.durationMs, rep);
      }
    }
  }
  // Each backend's cells together, as the table prints them.
  return backends.flatMap((backend) => cells.filter((cell) => cell.backend === backend.name));
}

const collect = (globalThis as { gc?: () => void }).gc;
/**
 * A full GC, when node runs with --expose-gc. Not by default: for a while after a forced one the process runs
 * slower, most of all a subject that allocates more per call, so a 300 ms repetition started right after it
 * measured that spell rather than the steady state (bench/HISTORY.md, "Without a forced GC before each
 * repetition", shows the figures).
 */
function gc(): void {
  collect?.();
}

/** How many measurements runBackends will take for these backends (for progress). */
export function plannedSteps(backends: readonly Backend[], settings: RunSettings): number {
  const concurrencies = backends[0]!.concurrencies.filter(
    (c) =>
      (settings.concurrencies === undefined || settings.concurrencies.includes(c)) &&
      backends.every((b) => b.concurrencies.includes(c)),
  ).length;
  const subjects = backends.reduce((sum, b) => sum + b.subjects.length, 0);
  return settings.workloads.length * concurrencies * subjects * (settings.reps + 1);
}
