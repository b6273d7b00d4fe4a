/**
 * What `iso()` (the envelope's dates) costs beside `Date#toISOString`, in ns per date, where its cache of
 * recent seconds pays and where it does not:
 * - burst: the envelope's two dates per call (claimed now, holds for 24 h), 50 calls a millisecond;
 * - scattered: replays of 64 records made across a day, interleaved, so nearly every second is new.
 *
 *   node --import tsx bench/iso.ts [--dates 4000000] [--rounds 9]
 */
import { parseArgs } from "node:util";
import { iso } from "../src/core/time.js";

const { values } = parseArgs({
  options: { dates: { type: "string", default: "4000000" }, rounds: { type: "string", default: "9" } },
});
const dates = Number(values.dates);
const rounds = Number(values.rounds);
const start = Date.parse("2026-01-01T00:00:00Z");
const dayMs = 86_400_000;

const workloads: Record<string, Float64Array> = {
  burst: new Float64Array(dates),
  scattered: new Float64Array(dates),
};
for (let call = 0; call < dates / 2; call++) {
  const now = start + Math.floor(call / 50);
  workloads.burst![2 * call] = now;
  workloads.burst![2 * call + 1] = now + dayMs;
  const created = start + ((call * 7_919) % 64) * 1_351_000 + (call % 64) * 13;
  workloads.scattered![2 * call] = created;
  workloads.scattered![2 * call + 1] = created + dayMs;
}

const formats: Record<string, (epochMs: number) => string> = {
  iso,
  "Date#toISOString": (epochMs) => new Date(epochMs).toISOString(),
};

let written = 0;
console.log("| workload | format | ns per date (median) |\n|---|---|---:|");
for (const [workload, times] of Object.entries(workloads)) {
  const samples = new Map<string, number[]>();
  for (let round = 0; round < rounds; round++) {
    for (const [name, format] of Object.entries(formats)) {
      const began = process.hrtime.bigint();
      for (let i = 0; i < times.length; i++) written += format(times[i]!).length;
      const ns = Number(process.hrtime.bigint() - began) / times.length;
      samples.set(name, [...(samples.get(name) ?? []), ns]);
    }
  }
  for (const [name, ns] of samples) {
    ns.sort((a, b) => a - b);
    console.log(`| ${workload} | ${name} | ${ns[Math.floor(ns.length / 2)]!.toFixed(0)} |`);
  }
}
if (written === 0) throw new Error("nothing was formatted");
