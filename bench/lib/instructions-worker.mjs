// Runs under callgrind for bench/instructions.ts: warm-up calls, then the counted calls, between two marks
// callgrind watches for (process.cpuUsage() zeroes its counters, process.resourceUsage() dumps them). Plain
// JavaScript: under valgrind, tsx's loader would add a minute to every run and nothing to what is counted.
//
//   node --expose-gc bench/lib/instructions-worker.mjs <built library dir> <first|replay|contended> \
//     <calls> <warm-up calls> [memory | redis <url>] [in flight]
//
// With more than 1 in flight, first and replay calls run that many at a time (the calls of one workload
// split between as many callers), so a store that writes a tick's commands together is counted doing so.
//
// On redis, only this process's instructions are counted (the client's CPU: the core, the store, ioredis);
// the server's share is bench/redis-cost.ts's to measure.
import path from "node:path";
import { pathToFileURL } from "node:url";

const [dir, workload, callsText, warmUpText, storeName = "memory", redisUrl, inFlightText = "1"] =
  process.argv.slice(2);
const inFlight = Number(inFlightText);
const calls = Number(callsText);
const warmUp = Number(warmUpText);
const core = await import(pathToFileURL(path.join(dir, "index.js")).href);

// The same arguments and tool as bench/lib/subject.ts.
const args = {
  to: "alice@example.com",
  subject: "Quarterly report",
  body: "Hi Alice, the Q3 figures are attached. Let me know if anything looks off.",
  cc: ["bob@example.com", "carol@example.com"],
  priority: 2,
  attachments: [{ name: "q3.pdf", bytes: 48_213 }],
};
let runs = 0;
let store;
let close = async () => {};
if (storeName === "redis") {
  const { Redis } = await import("ioredis");
  const { redisStore } = await import(pathToFileURL(path.join(dir, "redis", "index.js")).href);
  const client = new Redis(redisUrl ?? "redis://127.0.0.1:6379", { maxRetriesPerRequest: 1 });
  const prefix = `idempotool-instructions:${process.pid}:`;
  await new Promise((resolve) => client.once("ready", resolve));
  // Under valgrind, the first calls (connecting, loading the scripts) take seconds.
  store = redisStore({ client, prefix, commandTimeoutMs: 600_000 });
  close = async () => {
    let cursor = "0";
    do {
      const [next, names] = await client.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
      cursor = next;
      if (names.length > 0) await client.unlink(...names);
    } while (cursor !== "0");
    client.disconnect();
  };
} else if (storeName === "memory") store = core.memoryStore({ maxRecords: 10_000_000 });
else throw new Error(`unknown store ${storeName}`);
const tool = core.idempotent(
  async (a) => {
    runs++;
    return { queued: true, to: a.to, messageId: "m-1" };
  },
  { name: "send_email", store },
);

/** Calls `from` to `to` (exclusive) of the workload; returns how many times the tool should have run. */
async function run(from, to) {
  if (inFlight > 1 && workload !== "contended") {
    let next = from;
    const caller = async () => {
      while (next < to) {
        const i = next++;
        await tool(args, { key: workload === "first" ? `first-${i}` : "replayed" });
      }
    };
    await Promise.all(Array.from({ length: inFlight }, caller));
    return workload === "first" ? to - from : 0;
  }
  if (workload === "first") {
    for (let i = from; i < to; i++) await tool(args, { key: `first-${i}` });
    return to - from;
  }
  if (workload === "replay") {
    for (let i = from; i < to; i++) await tool(args, { key: "replayed" });
    return 0;
  }
  if (workload === "contended") {
    // Two callers on one key: one runs, the other waits in process for its outcome and replays it.
    for (let i = from; i < to; i++) {
      const [a, b] = await Promise.all([
        tool(args, { key: `contended-${i}` }),
        tool(args, { key: `contended-${i}` }),
      ]);
      if (a.was_replay === b.was_replay) throw new Error("contended: expected one run and one replay");
    }
    return to - from;
  }
  throw new Error(`unknown workload ${workload}`);
}

// V8 optimizes a function called once per call after a few thousand calls, and a full GC throws away some
// optimized code (it deoptimizes functions that hold weak references): compiles that fall inside the counted
// calls add thousands of instructions per call that say nothing about the library. So: a long warm-up, the
// GC, then calls that recompile what it threw away, and only then the count.
const rewarm = 1_000;
await tool(args, { key: "replayed" });
let expected = 1 + (await run(0, warmUp));
// Every build starts the counted calls from the same clean heap.
globalThis.gc();
expected += await run(warmUp, warmUp + rewarm);
process.cpuUsage();
expected += await run(warmUp + rewarm, warmUp + rewarm + calls);
process.resourceUsage();
if (runs !== expected) throw new Error(`the tool ran ${runs} times, expected ${expected}`);
await close();
