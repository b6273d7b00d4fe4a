/**
 * One process of the fleet row (bench/lib/fleet.ts): builds one subject on its own clients, warms up, tells
 * its parent it is ready and waits for the common start the parent sends, runs its callers for the duration,
 * and prints what it measured as one JSON line.
 * The parent made the tables; every process of one measurement shares them and, when contended, its keys.
 */
import path from "node:path";
import { performance } from "node:perf_hooks";
import { Redis } from "ioredis";
import { nodeIdempotencyRedis, nodeIdempotencySubject } from "./anchors.js";
import { idempotoolSubject } from "./backends/memory.js";
import { connectPool, postgresFloor } from "./backends/postgres.js";
import { connectNodeRedis, nodeRedisFloor, redisFloor } from "./backends/redis.js";
import type { FleetBackend } from "./fleet.js";
import { loadLibrary } from "./library.js";
import { Latencies } from "./measure.js";
import { type Subject, SubjectName, toolArgs } from "./subject.js";

export interface FleetTask {
  readonly lib: string;
  readonly backend: FleetBackend;
  readonly subject: SubjectName;
  readonly workload: "first" | "contended";
  readonly inFlight: number;
  /** Callers on one key in the contended workload, per process. */
  readonly callersPerKey: number;
  /** How long each process runs the workload on keys of its own before the common start. */
  readonly warmupMs: number;
  readonly durationMs: number;
  readonly worker: number;
  readonly names: { readonly store: string; readonly floor: string; readonly prefix: string };
  readonly fingerprint: string;
  readonly redisUrl: string;
  readonly pgUrl: string;
}

export interface FleetReport {
  readonly calls: number;
  readonly rejected: number;
  readonly runs: number;
  /** Contended: the highest key index this process reached (keys are shared across the fleet). */
  readonly keys: number;
  readonly elapsedMs: number;
  readonly cpuUs: number;
  readonly latenciesUs: number[];
}

// tsx turns source maps on for the harness; as in the main run, no stack trace the measured code builds
// should pay for source-map lookups.
process.setSourceMapsEnabled(false);
const task = JSON.parse(process.argv[2] ?? "{}") as FleetTask;
const lib = await loadLibrary(path.resolve(task.lib));
const closers: (() => Promise<unknown> | undefined)[] = [];

async function subjectFor(): Promise<Subject> {
  if (task.backend === "postgres") {
    const pool = connectPool(task.pgUrl);
    closers.push(() => pool.end());
    if (task.subject === SubjectName.floor)
      return postgresFloor(pool, task.names.floor, task.fingerprint, false);
    if (!lib.postgres) throw new Error("the postgres store is not built");
    const store = lib.postgres.postgresStore({ client: pool, table: task.names.store });
    return idempotoolSubject(lib, () => store, "postgresStore");
  }
  if (task.subject === SubjectName.nodeIdempotency) {
    const ni = await nodeIdempotencyRedis(task.redisUrl);
    closers.push(() => ni.close());
    return nodeIdempotencySubject({ storage: () => ni.storage, prefix: `${task.names.prefix}ni` });
  }
  if (!lib.redis && task.subject === SubjectName.idempotool) throw new Error("the redis store is not built");
  if (task.backend === "redis (node-redis 4)") {
    const client = await connectNodeRedis(task.redisUrl);
    closers.push(() => client.quit());
    if (task.subject === SubjectName.floor)
      return nodeRedisFloor(client, `${task.names.prefix}f:`, task.fingerprint);
    const store = lib.redis!.redisStore({ client, prefix: `${task.names.prefix}i:` });
    return idempotoolSubject(lib, () => store, "redisStore({ client: node-redis 4.7.1 })");
  }
  const redis = new Redis(task.redisUrl, { maxRetriesPerRequest: 1 });
  closers.push(() => {
    redis.disconnect();
    return undefined;
  });
  if (task.subject === SubjectName.floor)
    return redisFloor(redis, `${task.names.prefix}f:`, task.fingerprint);
  if (!lib.redis) throw new Error("the redis store is not built");
  const store = lib.redis.redisStore({ client: redis, prefix: `${task.names.prefix}i:` });
  return idempotoolSubject(lib, () => store, "redisStore");
}

const subject = await subjectFor();
const latencies = new Latencies();
let calls = 0;
let rejected = 0;
let nextKey = 0;
const timed = async (call: () => Promise<unknown>) => {
  const started = performance.now();
  try {
    await call();
  } catch {
    rejected++;
  }
  latencies.add((performance.now() - started) * 1000);
  calls++;
};
const lanes = task.workload === "first" ? task.inFlight : Math.max(1, task.inFlight / task.callersPerKey);
/** Runs the workload until `deadline`; keys under `prefix` (the fleet's shared keys when contended). */
const run = (deadline: number, prefix: string) =>
  Promise.all(
    Array.from({ length: lanes }, async () => {
      while (performance.now() < deadline) {
        if (task.workload === "first") {
          await timed(() => subject.first(`${prefix}w${task.worker}-${nextKey++}`, toolArgs));
        } else {
          // Every process walks the same keys: each key's callers come from the whole fleet.
          const key = `${prefix}c-${nextKey++}`;
          await Promise.all(
            Array.from({ length: task.callersPerKey }, () => timed(() => subject.contended(key, toolArgs))),
          );
        }
      }
    }),
  );
// Warm up (connections, prepared statements, the JIT) on keys of this process's own, as a serving
// process is warm, then tell the parent and wait for the common start it sends once every process is.
await run(performance.now() + task.warmupMs, `${task.names.prefix}warm${task.worker}-`);
latencies.length = 0;
calls = 0;
rejected = 0;
nextKey = 0;
const startAt = await new Promise<number>((resolve) => {
  process.once("message", (message: { startAt: number }) => resolve(message.startAt));
  process.send!("ready");
});
const runsBefore = subject.runs();
await new Promise((resolve) => setTimeout(resolve, Math.max(0, startAt - Date.now())));
const cpu = process.cpuUsage();
const started = performance.now();
await run(started + task.durationMs, task.names.prefix);
const elapsedMs = performance.now() - started;
const used = process.cpuUsage(cpu);
const sorted = latencies.sorted();
// Every 10th latency is plenty for the fleet's percentiles and keeps the report small.
const sample: number[] = [];
for (let i = 0; i < sorted.length; i += 10) sample.push(Math.round(sorted[i]!));
const report: FleetReport = {
  calls,
  rejected,
  runs: subject.runs() - runsBefore,
  keys: nextKey,
  elapsedMs,
  cpuUs: used.user + used.system,
  latenciesUs: sample,
};
process.stdout.write(`${JSON.stringify(report)}\n`);
for (const close of closers) await close();
