/**
 * The timing loop: `concurrency` workers each run units back to back until the deadline; every call's
 * latency is recorded. A unit is one call, or for the contended workload one batch of callers on one key.
 */
import { performance } from "node:perf_hooks";

/** Latencies of one repetition, in microseconds, kept in a growable typed array (no boxing). */
export class Latencies {
  private values = new Float64Array(1 << 14);
  length = 0;

  add(us: number): void {
    if (this.length === this.values.length) {
      const grown = new Float64Array(this.values.length * 2);
      grown.set(this.values);
      this.values = grown;
    }
    this.values[this.length++] = us;
  }

  /** Sorted copy of the recorded values. */
  sorted(): Float64Array {
    return this.values.slice(0, this.length).sort();
  }
}

/** Runs one unit of work; records each call's latency and returns how many calls it made and how many were refused. */
export type Unit = (latencies: Latencies) => Promise<UnitOutcome>;
export interface UnitOutcome {
  readonly calls: number;
  /** Calls that ended in an error (an anchor refusing a caller while the key is in flight, say). */
  readonly rejected: number;
  /** Error names of rejected calls, counted. */
  readonly reasons?: ReadonlyMap<string, number>;
}

export interface Sample {
  readonly calls: number;
  readonly units: number;
  readonly rejected: number;
  readonly reasons: Record<string, number>;
  readonly seconds: number;
  readonly opsPerSec: number;
  readonly p50Us: number;
  readonly p99Us: number;
  /**
   * This process's CPU time (user + system, all threads) per call. Unlike ops/s it barely moves when other
   * processes compete for the cores, so it is the steadier figure on a shared machine.
   */
  readonly cpuUsPerCall: number;
}

export async function measure(unit: Unit, concurrency: number, durationMs: number): Promise<Sample> {
  const latencies = new Latencies();
  let calls = 0;
  let units = 0;
  let rejected = 0;
  const reasons: Record<string, number> = {};
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const deadline = started + durationMs;
  const worker = async () => {
    while (performance.now() < deadline) {
      const outcome = await unit(latencies);
      calls += outcome.calls;
      rejected += outcome.rejected;
      units++;
      if (outcome.reasons) {
        for (const [reason, count] of outcome.reasons) reasons[reason] = (reasons[reason] ?? 0) + count;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const sorted = latencies.sorted();
  return {
    calls,
    units,
    rejected,
    reasons,
    seconds,
    opsPerSec: calls / seconds,
    p50Us: percentile(sorted, 0.5),
    p99Us: percentile(sorted, 0.99),
    cpuUsPerCall: (cpu.user + cpu.system) / calls,
  };
}

/** Nearest-rank percentile of sorted values. */
export function percentile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank]!;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** Time one call and record it. */
export async function timed(latencies: Latencies, call: () => Promise<unknown>): Promise<void> {
  const t0 = performance.now();
  await call();
  latencies.add((performance.now() - t0) * 1000);
}
