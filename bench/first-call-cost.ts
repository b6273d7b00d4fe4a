/**
 * What one first call and one replay cost the process, on the BUILT library: CPU time, and bytes allocated
 * (V8's sampling heap profiler, objects the GC already collected included, on a second run of as many calls),
 * on `memoryStore` and on a store that does nothing (what is left is the core's own cost). A replay on the
 * store that does nothing is answered with one completed record it keeps for every key.
 *
 *   node --import tsx bench/first-call-cost.ts [--lib dist] [--calls 50000] [--sites 20]
 *
 * `--sites N` also lists the N functions that allocate most per call (as V8 attributes them: what an
 * optimised function inlined counts as its own).
 *
 * Compare two builds with `--lib`: e.g. one of an older commit compiled into bench/tmp/.
 */
import { Session } from "node:inspector/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import type { ClaimRequest, IdempotencyRecord, IdempotencyStore, SettleRequest } from "../src/index.js";
import { loadLibrary } from "./lib/library.js";
import { countedTool, toolArgs } from "./lib/subject.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({
  options: {
    lib: { type: "string", default: "dist" },
    calls: { type: "string", default: "50000" },
    sites: { type: "string", default: "0" },
  },
});
const calls = Number(values.calls);
if (!Number.isSafeInteger(calls) || calls < 1_000)
  throw new Error("--calls must be an integer of 1000 or more");
const sites = Number(values.sites);
if (!Number.isSafeInteger(sites) || sites < 0) throw new Error("--sites must be a whole number");
process.setSourceMapsEnabled(false);
const lib = await loadLibrary(path.resolve(root, values.lib));

/**
 * Claims always win and settles always land, with nothing kept: the core's cost alone. Given `completed`,
 * every claim instead finds that record (under the claim's own key and fingerprint): a replay.
 */
function nothingStore(completed?: IdempotencyRecord): IdempotencyStore {
  const record = (r: ClaimRequest): IdempotencyRecord => ({
    scope: r.scope,
    key: r.key,
    tool: r.tool,
    fingerprint: r.fingerprint,
    status: "in_progress",
    token: r.token,
    createdAt: r.now,
    updatedAt: r.now,
    leaseExpiresAt: r.now + r.leaseMs,
    expiresAt: r.now + r.ttlMs,
    attempts: 1,
    result: null,
    error: null,
  });
  const settled = (r: SettleRequest): IdempotencyRecord => ({
    scope: r.scope,
    key: r.key,
    tool: "send_email",
    fingerprint: "",
    status: r.status,
    token: r.token,
    createdAt: r.now,
    updatedAt: r.now,
    leaseExpiresAt: r.now,
    expiresAt: r.now + r.ttlMs,
    attempts: 1,
    result: r.result,
    error: r.error,
  });
  const unused = () => Promise.reject(new Error("not used by a first call or a replay"));
  return {
    claim: async (r) =>
      completed === undefined
        ? { claimed: true, record: record(r), now: r.now }
        : { claimed: false, record: { ...completed, key: r.key, fingerprint: r.fingerprint }, now: r.now },
    settle: async (r) => settled(r),
    takeover: unused,
    renew: async () => true,
    release: unused,
    get: unused,
    delete: unused,
    list: unused,
    purge: unused,
  };
}

const session = new Session();
session.connect();

/** `replays`: call one key again and again (it must already hold a completed record), else a new key each time. */
async function measure(label: string, store: IdempotencyStore, replays = false): Promise<void> {
  const wrapped = lib.core.idempotent(countedTool().fn, { name: "send_email", store });
  const keyOf = (run: string, i: number) => (replays ? "replayed" : `${label}-${run}-${i}`);
  if (replays) await wrapped(toolArgs, { key: "replayed" });
  for (let i = 0; i < 20_000; i++) await wrapped(toolArgs, { key: keyOf("warm", i) });
  const cpu = process.cpuUsage();
  for (let i = 0; i < calls; i++) await wrapped(toolArgs, { key: keyOf("timed", i) });
  const used = process.cpuUsage(cpu);
  // Allocation on a second run of the same calls: the sampler would inflate the CPU time above.
  await session.post("HeapProfiler.startSampling", {
    samplingInterval: 256,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  for (let i = 0; i < calls; i++) await wrapped(toolArgs, { key: keyOf("sampled", i) });
  const { profile } = await session.post("HeapProfiler.stopSampling");
  let bytes = 0;
  const bySite = new Map<string, number>();
  const walk = (node: typeof profile.head): void => {
    bytes += node.selfSize;
    const frame = node.callFrame;
    const site = `${frame.functionName || "(anonymous)"} ${path.basename(frame.url)}:${frame.lineNumber + 1}`;
    bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
    for (const child of node.children) walk(child);
  };
  walk(profile.head);
  const kb = (bytes / calls / 1024).toFixed(1);
  const us = ((used.user + used.system) / calls).toFixed(1);
  console.log(`| ${label} | ${kb} KB | ${us} µs |`);
  if (sites > 0) {
    const top = [...bySite].sort((a, b) => b[1] - a[1]).slice(0, sites);
    for (const [site, size] of top) console.log(`|   ${site} | ${Math.round(size / calls)} B | |`);
  }
}

console.log(
  `Library: ${path.relative(root, lib.dir) || "."} · ${calls.toLocaleString("en-US")} calls of each kind`,
);
console.log("\n| store | allocated per call | CPU per call |");
console.log("|---|--:|--:|");
await measure("first call, memoryStore", lib.core.memoryStore({ maxRecords: 2 * calls + 40_000 }));
await measure("first call, a store that does nothing", nothingStore());
await measure("replay, memoryStore", lib.core.memoryStore(), true);
const memory = lib.core.memoryStore();
await lib.core.idempotent(countedTool().fn, { name: "send_email", store: memory })(toolArgs, { key: "k" });
const completed = await memory.get({ scope: "default", key: "k" }, Date.now());
if (completed?.status !== "completed") throw new Error("first-call-cost: the replayed record was not kept");
await measure("replay, a store that does nothing", nothingStore(completed), true);
session.disconnect();
