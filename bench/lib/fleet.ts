/**
 * The fleet row: the same measurement from several OS processes at once, each with its own clients, on
 * Redis (on ioredis, and on node-redis 4.7.1 as @node-idempotency's adapter) and PostgreSQL: what one process alone cannot show (waiters in another process poll the store,
 * every process holds its own pool). Per measurement: `processes` children of bench/lib/fleet-worker.ts,
 * each with `inFlight` calls in flight, started together; first calls use keys of their own, contended calls
 * walk the same keys in every process (`callersPerKey` callers per key per process). Subjects run one after
 * another, interleaved per repetition.
 */
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { connectPool, dropClaimFunctionsSql, floorTableSql } from "./backends/postgres.js";
import type { FleetReport, FleetTask } from "./fleet-worker.js";
import type { Library } from "./library.js";
import { SubjectName } from "./subject.js";

const here = path.dirname(fileURLToPath(import.meta.url));

export interface FleetOptions {
  readonly lib: Library;
  readonly processes: number;
  readonly inFlight: number;
  readonly callersPerKey: number;
  /** How long each process runs the workload on keys of its own before the measured part starts together. */
  readonly warmupMs: number;
  readonly durationMs: number;
  readonly reps: number;
  readonly tag: string;
  readonly fingerprint: string;
  readonly redisUrl: string;
  readonly pgUrl: string;
  readonly backends: readonly FleetBackend[];
  readonly workloads: readonly ("first" | "contended")[];
  readonly note?: (text: string) => void;
}

/** The fleet's row groups: "redis" on ioredis, "redis (node-redis 4)" on node-redis 4.7.1 clients. */
export type FleetBackend = "redis" | "redis (node-redis 4)" | "postgres";

export interface FleetCell {
  readonly backend: FleetBackend;
  readonly workload: "first" | "contended";
  readonly subject: SubjectName;
  readonly opsPerSec: number[];
  readonly p50Us: number[];
  readonly p99Us: number[];
  readonly cpuUsPerCall: number[];
  readonly rejected: number;
  dedupOk: boolean;
  dedupDetail?: string;
}

// @node-idempotency runs on node-redis only (its adapter opens a node-redis 4.7.1 client of its own), where
// idempotool and the floor run on node-redis 4.7.1 clients too.
const subjectsOf = {
  redis: [SubjectName.idempotool, SubjectName.floor],
  "redis (node-redis 4)": [SubjectName.idempotool, SubjectName.nodeIdempotency, SubjectName.floor],
  postgres: [SubjectName.idempotool, SubjectName.floor],
} as const satisfies Record<FleetBackend, readonly SubjectName[]>;

/** A worker process: `ready` settles once it has warmed up, `report` with what it measured. */
function startWorker(task: FleetTask) {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", path.join(here, "fleet-worker.ts"), JSON.stringify(task)],
    { stdio: ["ignore", "pipe", "inherit", "ipc"] },
  );
  const ready = new Promise<void>((resolve, reject) => {
    child.once("message", () => resolve());
    child.once("exit", (code) =>
      reject(new Error(`fleet worker ${task.worker} exited with ${code} before it was ready`)),
    );
  });
  const report = new Promise<FleetReport>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.on("error", reject);
    child.on("exit", (code) => {
      if (code !== 0) reject(new Error(`fleet worker ${task.worker} exited with ${code}`));
      else resolve(JSON.parse(out.trim().split("\n").at(-1) ?? "{}") as FleetReport);
    });
  });
  // Handled where it is awaited; this keeps an early exit from being an unhandled rejection meanwhile.
  report.catch(() => {});
  return { ready, report, start: (startAt: number) => child.send({ startAt }) };
}

/** Runs `tasks` as processes that start measuring together, once every one of them has warmed up. */
async function runWorkers(tasks: readonly FleetTask[]): Promise<FleetReport[]> {
  const workers = tasks.map(startWorker);
  await Promise.all(workers.map((w) => w.ready));
  const startAt = Date.now() + 20;
  for (const worker of workers) worker.start(startAt);
  return Promise.all(workers.map((w) => w.report));
}

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : s[Math.floor(s.length / 2)]!;
};
const percentile = (sorted: readonly number[], p: number) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;

export async function runFleet(o: FleetOptions): Promise<FleetCell[]> {
  const cells: FleetCell[] = [];
  const pool = o.backends.includes("postgres") ? connectPool(o.pgUrl) : undefined;
  const redis = o.backends.some((b) => b !== "postgres") ? new Redis(o.redisUrl) : undefined;
  const tables: string[] = [];
  let round = 0;
  try {
    for (const backend of o.backends) {
      for (const workload of o.workloads) {
        const group = subjectsOf[backend]
          .filter(
            (s) => s !== SubjectName.idempotool || (backend === "postgres" ? o.lib.postgres : o.lib.redis),
          )
          .map(
            (subject): FleetCell => ({
              backend,
              workload,
              subject,
              opsPerSec: [],
              p50Us: [],
              p99Us: [],
              cpuUsPerCall: [],
              rejected: 0,
              dedupOk: true,
            }),
          );
        cells.push(...group);
        for (let rep = 0; rep < o.reps; rep++) {
          const order = rep % 2 === 0 ? group : [...group].reverse();
          for (const cell of order) {
            // Fresh tables and keys for every measurement: no process sees another measurement's records.
            const names = {
              store: `fleet_${o.tag}_${round}_s`,
              floor: `fleet_${o.tag}_${round}_f`,
              prefix: `fl:${o.tag}:${round}:`,
            };
            round++;
            if (backend === "postgres" && pool) {
              if (cell.subject === SubjectName.floor) await pool.query(floorTableSql(names.floor));
              else await o.lib.postgres?.postgresStore({ client: pool, table: names.store }).migrate();
              tables.push(names.store, names.floor);
            }
            const reports = await runWorkers(
              Array.from({ length: o.processes }, (_, worker) => ({
                lib: o.lib.dir,
                backend,
                subject: cell.subject,
                workload,
                inFlight: o.inFlight,
                callersPerKey: o.callersPerKey,
                warmupMs: o.warmupMs,
                durationMs: o.durationMs,
                worker,
                names,
                fingerprint: o.fingerprint,
                redisUrl: o.redisUrl,
                pgUrl: o.pgUrl,
              })),
            );
            const calls = reports.reduce((sum, r) => sum + r.calls, 0);
            const runs = reports.reduce((sum, r) => sum + r.runs, 0);
            const seconds = Math.max(...reports.map((r) => r.elapsedMs)) / 1000;
            const latencies = reports.flatMap((r) => r.latenciesUs).sort((a, b) => a - b);
            cell.opsPerSec.push(calls / seconds);
            cell.p50Us.push(percentile(latencies, 0.5));
            cell.p99Us.push(percentile(latencies, 0.99));
            cell.cpuUsPerCall.push(reports.reduce((sum, r) => sum + r.cpuUs, 0) / calls);
            (cell as { rejected: number }).rejected += reports.reduce((sum, r) => sum + r.rejected, 0);
            // First calls run the tool once each; contended keys once per key across the whole fleet.
            const expected = workload === "first" ? calls : Math.max(...reports.map((r) => r.keys));
            if (runs !== expected) {
              cell.dedupOk = false;
              cell.dedupDetail = `rep ${rep + 1}: the tool ran ${runs} times, expected ${expected}`;
            }
            o.note?.(
              `fleet ${backend} ${workload} ${cell.subject} rep ${rep + 1}: ${Math.round(calls / seconds)} ops/s`,
            );
          }
        }
      }
    }
  } finally {
    if (pool) {
      for (const table of tables) {
        await pool.query(`DROP TABLE IF EXISTS "${table}"`).catch(() => {});
        await pool.query(dropClaimFunctionsSql([table])).catch(() => {});
      }
      await pool.end();
    }
    if (redis) {
      let cursor = "0";
      do {
        const [next, keys] = await redis.scan(cursor, "MATCH", `fl:${o.tag}:*`, "COUNT", 1000);
        cursor = next;
        if (keys.length > 0) await redis.unlink(...keys);
      } while (cursor !== "0");
      redis.disconnect();
    }
  }
  return cells;
}

/** The fleet cells as Markdown, with idempotool's ops/s over each row's (a ratio of medians). */
export function fleetTable(
  cells: readonly FleetCell[],
  o: Pick<FleetOptions, "processes" | "inFlight">,
): string {
  const lines = [
    `Fleet: ${o.processes} processes × ${o.inFlight} in flight, medians of the repetitions (ops/s over the whole fleet).`,
    "",
    "| store | workload | subject | ops/s | p50 ms | p99 ms | CPU µs/call | idempotool ÷ row | dedup |",
    "|---|---|---|---:|---:|---:|---:|---:|---|",
  ];
  for (const cell of cells) {
    const mine = cells.find(
      (c) =>
        c.backend === cell.backend && c.workload === cell.workload && c.subject === SubjectName.idempotool,
    );
    const ops = median(cell.opsPerSec);
    const ratio = mine && cell !== mine ? (median(mine.opsPerSec) / ops).toFixed(2) : "";
    lines.push(
      `| ${cell.backend} | ${cell.workload} | ${cell.subject} | ${Math.round(ops).toLocaleString("en-US")} | ${(median(cell.p50Us) / 1000).toFixed(1)} | ${(median(cell.p99Us) / 1000).toFixed(1)} | ${Math.round(median(cell.cpuUsPerCall))} | ${ratio} | ${cell.dedupOk ? "ok" : `FAILED: ${cell.dedupDetail}`}${cell.rejected > 0 ? `; ${cell.rejected} refused` : ""} |`,
    );
  }
  return lines.join("\n");
}
