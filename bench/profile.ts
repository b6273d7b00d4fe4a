/**
 * A CPU profile of idempotool's memory path, summarised: where a first call and a replay spend their time
 * (canonical JSON, hashing, result serialization, the lease's AbortControllers and timers, the async call
 * flow, the store, GC). It measures the BUILT library, like the bench, and profiles only the timed loops
 * (the V8 profiler is started and stopped around them, so module loading stays out).
 *
 *   node --import tsx bench/profile.ts [--seconds 3] [--lib dist] [--interval-us 50]
 *     [--store memory|redis] [--redis redis://127.0.0.1:6379]
 *
 * Prints Markdown: self time by category and the top functions, per workload. The raw .cpuprofile files go
 * to bench/tmp/profile/ (git-ignored); open them in Chrome DevTools or speedscope.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Redis } from "ioredis";
import { loadLibrary } from "./lib/library.js";
import { type CpuProfile, categoryOf, summarizeProfile } from "./lib/profile-summary.js";
import { countedTool, toolArgs } from "./lib/subject.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "3" },
    lib: { type: "string", default: "dist" },
    "interval-us": { type: "string", default: "50" },
    store: { type: "string", default: "memory" },
    redis: { type: "string", default: "redis://127.0.0.1:6379" },
  },
});

process.setSourceMapsEnabled(false);
const lib = await loadLibrary(path.resolve(root, values.lib));
const onRedis = values.store === "redis";
if (!onRedis && values.store !== "memory") throw new Error(`--store: unknown "${values.store}"`);
const redis = onRedis ? new Redis(values.redis, { maxRetriesPerRequest: 1 }) : undefined;
const redisPrefix = `idempotool-profile:${process.pid}:`;
const session = new Session();
session.connect();
await session.post("Profiler.enable");
await session.post("Profiler.setSamplingInterval", { interval: Number(values["interval-us"]) });
const dir = path.join(root, "bench", "tmp", "profile");
mkdirSync(dir, { recursive: true });

/** Calls back to back for `ms`, in batches so the clock reads stay out of the profile; returns calls/s. */
async function loop(
  call: (i: number) => Promise<unknown>,
  ms: number,
): Promise<{ calls: number; perSecond: number }> {
  let calls = 0;
  const started = performance.now();
  while (performance.now() - started < ms) {
    for (let i = 0; i < 1000; i++) await call(calls + i);
    calls += 1000;
  }
  return { calls, perSecond: calls / ((performance.now() - started) / 1000) };
}

const sections: string[] = [
  `Library: ${path.relative(root, lib.dir) || "."} · node ${process.version} · sampling every ${values["interval-us"]} µs`,
  "",
];
for (const workload of ["first", "replay"] as const) {
  const tool = countedTool();
  // Each workload starts from an empty store, as the bench's repetitions do, and is warmed up first.
  const store = redis
    ? lib.redis!.redisStore({ client: redis, prefix: `${redisPrefix}${workload}:` })
    : lib.core.memoryStore({ maxRecords: 50_000_000 });
  const wrapped = lib.core.idempotent(tool.fn, { name: "send_email", store });
  let n = 0;
  const call =
    workload === "first"
      ? () => wrapped(toolArgs, { key: `k${n++}` })
      : () => wrapped(toolArgs, { key: "replayed" });
  await loop(call, 1000);
  await session.post("Profiler.start");
  const { calls, perSecond } = await loop(call, Number(values.seconds) * 1000);
  const { profile } = (await session.post("Profiler.stop")) as unknown as { profile: CpuProfile };
  const file = path.join(dir, `${values.store}-${workload}.cpuprofile`);
  writeFileSync(file, JSON.stringify(profile));
  sections.push(
    `### ${values.store} ${workload === "first" ? "first call" : "replay"}: ${Math.round(perSecond).toLocaleString("en-US")} calls/s under the profiler (${calls.toLocaleString("en-US")} calls)`,
    "",
    summarizeProfile(profile, categoryOf),
    "",
    `profile: ${path.relative(root, file)}`,
    "",
  );
}
session.disconnect();
if (redis) {
  let cursor = "0";
  do {
    const [next, names] = await redis.scan(cursor, "MATCH", `${redisPrefix}*`, "COUNT", 1000);
    cursor = next;
    if (names.length > 0) await redis.unlink(...names);
  } while (cursor !== "0");
  redis.disconnect();
}
process.stdout.write(`${sections.join("\n")}\n`);
