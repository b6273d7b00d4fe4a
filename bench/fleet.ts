/**
 * The fleet row on its own: 4 OS processes × 32 in flight on Redis and PostgreSQL, idempotool beside
 * @node-idempotency (Redis) and the floor. `npm run bench -- --fleet` adds it to the main run. Redis runs
 * twice: on ioredis, and on node-redis 4.7.1 (`node-redis`), the client @node-idempotency's adapter opens.
 *
 *   node --import tsx bench/fleet.ts [--lib dist] [--processes 4] [--in-flight 32] [--warmup 1000] [--duration 2000] [--reps 3]
 *                                    [--store redis,node-redis,postgres] [--workload first,contended]
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { type FleetBackend, fleetTable, runFleet } from "./lib/fleet.js";
import { loadLibrary } from "./lib/library.js";
import { toolArgs } from "./lib/subject.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({
  options: {
    lib: { type: "string", default: "dist" },
    processes: { type: "string", default: "4" },
    "in-flight": { type: "string", default: "32" },
    "callers-per-key": { type: "string", default: "8" },
    warmup: { type: "string", default: "1000" },
    duration: { type: "string", default: "2000" },
    reps: { type: "string", default: "3" },
    store: { type: "string", default: "redis,node-redis,postgres" },
    workload: { type: "string", default: "first,contended" },
  },
});
const lib = await loadLibrary(path.resolve(root, values.lib));
const options = {
  lib,
  processes: Number(values.processes),
  inFlight: Number(values["in-flight"]),
  callersPerKey: Number(values["callers-per-key"]),
  warmupMs: Number(values.warmup),
  durationMs: Number(values.duration),
  reps: Number(values.reps),
  tag: `f${Date.now().toString(36)}`,
  fingerprint: lib.core.fingerprint(toolArgs),
  redisUrl: process.env.IDEMPOTOOL_TEST_REDIS_URL ?? "redis://127.0.0.1:6379",
  pgUrl: process.env.IDEMPOTOOL_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test",
  backends: values.store
    .split(",")
    .map((name): FleetBackend => (name === "node-redis" ? "redis (node-redis 4)" : (name as FleetBackend))),
  workloads: values.workload.split(",") as ("first" | "contended")[],
  note: (text: string) => process.stderr.write(`${text}\n`),
};
const cells = await runFleet(options);
process.stdout.write(`${fleetTable(cells, options)}\n`);
process.exitCode = cells.every((c) => c.dedupOk) ? 0 : 1;
