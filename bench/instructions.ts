/**
 * Instructions per call on `memoryStore`, counted by callgrind: the same count whatever else the machine
 * runs, so two builds compare on a shared, noisy host where timings drift by more than the difference
 * (repeat runs of one build agree within about 0.5%). It measures the BUILT library, like the bench. Only the
 * calls after a long warm-up, a GC and 1,000 calls that recompile what the GC discarded are counted (the
 * worker marks them): with a short warm-up, V8's optimizing compiles land inside the count, thousands of
 * instructions per call that move between builds for no reason of theirs. V8 runs single-threaded with an
 * allocation-driven GC schedule, so the GC work that remains is counted alike in every run.
 *
 *   npm run bench:instructions -- [--lib dist] [--lib bench/tmp/other] [--workload first,replay]
 *                                 [--calls 4000] [--warm-up 10000] [--runs 1] [--store memory|redis]
 *                                 [--redis redis://127.0.0.1:6379] [--in-flight 1]
 *
 * On redis it counts the client's instructions only (the core, redisStore, ioredis), not the server's.
 * Every --lib is measured, runs interleaved. first: a unique key each call; replay: one completed key;
 * contended: two callers on a fresh key, one runs and the other waits in process (counted per pair).
 * --in-flight N runs first and replay calls N at a time (per call still), as the bench's c32 rows do.
 * Needs valgrind; a run takes minutes. To compare with another commit, build it into a directory of its own
 * (under bench/tmp/, which git ignores) and pass that as a second --lib.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs, promisify } from "node:util";

const run = promisify(execFile);
const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..");
const workloads = ["first", "replay", "contended"] as const;

const { values } = parseArgs({
  options: {
    lib: { type: "string", multiple: true },
    workload: { type: "string", default: workloads.join(",") },
    calls: { type: "string", default: "4000" },
    "warm-up": { type: "string", default: "10000" },
    runs: { type: "string", default: "1" },
    store: { type: "string", default: "memory" },
    redis: { type: "string", default: "redis://127.0.0.1:6379" },
    "in-flight": { type: "string", default: "1" },
  },
});
const libs = (values.lib ?? ["dist"]).map((dir) => path.resolve(root, dir));
const chosen = values.workload.split(",").map((w) => w.trim());
for (const w of chosen) {
  if (!(workloads as readonly string[]).includes(w)) throw new Error(`--workload: unknown "${w}"`);
}
const calls = Number(values.calls);
const warmUp = Number(values["warm-up"]);
const runs = Number(values.runs);

/** Instructions callgrind counted between the worker's two marks, per call. */
async function measure(lib: string, workload: string): Promise<number> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "idempotool-callgrind-"));
  try {
    await run(
      "valgrind",
      [
        "--tool=callgrind",
        `--callgrind-out-file=${path.join(dir, "out")}`,
        // V8 writes and rewrites machine code as it runs.
        "--smc-check=all-non-file",
        "--zero-before=node::CPUUsage*",
        "--dump-before=node::ResourceUsage*",
        process.execPath,
        // One thread, and garbage collections scheduled by allocation alone (not by how much time passed,
        // which under valgrind depends on the machine's load): the same calls make the same count.
        "--single-threaded",
        "--predictable-gc-schedule",
        "--expose-gc",
        path.join(here, "lib", "instructions-worker.mjs"),
        lib,
        workload,
        String(calls),
        String(warmUp),
        values.store,
        values.redis,
        values["in-flight"],
      ],
      { maxBuffer: 64 * 1024 * 1024 },
    );
    // The first dump is the one the worker's second mark asked for.
    const totals = /^totals: (\d+)/m.exec(readFileSync(path.join(dir, "out.1"), "utf8"));
    if (!totals?.[1]) throw new Error(`no totals in callgrind's dump for ${lib} ${workload}`);
    return Number(totals[1]) / calls;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const label = (lib: string) => path.relative(root, lib) || ".";
process.stdout.write(
  `Instructions per call on ${values.store} (callgrind, ${calls} calls after ${warmUp} warm-up, ${values["in-flight"]} in flight, node ${process.version})\n\n`,
);
process.stdout.write(
  `| workload | ${libs.map(label).join(" | ")} |\n|---|${libs.map(() => "---:").join("|")}|\n`,
);
for (const workload of chosen) {
  const counts: number[][] = libs.map(() => []);
  for (let r = 0; r < runs; r++) {
    for (const [i, lib] of libs.entries()) {
      counts[i]!.push(await measure(lib, workload));
      process.stderr.write(`${workload} ${label(lib)} run ${r + 1}: ${Math.round(counts[i]!.at(-1)!)}\n`);
    }
  }
  const cells = counts.map((c) => c.map((n) => Math.round(n).toLocaleString("en-US")).join(" / "));
  process.stdout.write(`| ${workload} | ${cells.join(" | ")} |\n`);
}
