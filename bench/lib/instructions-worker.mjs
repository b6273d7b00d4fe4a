// Runs under callgrind for bench/instructions.ts: warm-up calls, then the counted calls, between two marks
// callgrind watches for (process.cpuUsage() zeroes its counters, process.resourceUsage() dumps them). Plain
// JavaScript: under valgrind, tsx's loader would add a minute to every run and nothing to what is counted.
//
//   node --expose-gc bench/lib/instructions-worker.mjs <built library dir> <first|replay|contended> \
//     <calls> <warm-up calls>
import path from "node:path";
import { pathToFileURL } from "node:url";

const [dir, workload, callsText, warmUpText] = process.argv.slice(2);
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
const tool = core.idempotent(
  async (a) => {
    runs++;
    return { queued: true, to: a.to, messageId: "m-1" };
  },
  { name: "send_email", store: core.memoryStore({ maxRecords: 10_000_000 }) },
);

/** Calls `from` to `to` (exclusive) of the workload; returns how many times the tool should have run. */
async function run(from, to) {
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
