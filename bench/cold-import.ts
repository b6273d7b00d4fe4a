/**
 * What a cold `import("idempotool")` costs beside `import("@aws-lambda-powertools/idempotency")` (a
 * devDependency): each import runs in a fresh Node process, the two alternating, and the table gives the
 * median and quartiles of the time `await import()` takes in it (Node's own start-up is left out) and the
 * number of files each loads. The files are counted in separate processes, by a resolve hook that keeps the
 * file: URLs it resolves (a hook slows what it watches, so timed runs have none).
 *
 *   npm run bench:cold-import -- [--runs 41] [--node 24] [--lib bench/tmp/other] [--instructions]
 *
 * --instructions adds what callgrind counts for each import, once (it needs valgrind, and takes a minute):
 * the same count on every run, where timings on a shared host drift by more than the difference between
 * the rows. It counts instructions only, not the time spent in system calls (stat, open, read).
 *
 * idempotool is imported by name, through the package's exports map, as a user's code imports it: from the
 * built dist/ (npm run bench:cold-import builds first). To compare with another commit, build it into a
 * directory of its own under bench/tmp/ (which git ignores) and pass it as --lib: its index.js is imported
 * too, in the same alternation. Each process runs on the Node that `scripts/node.sh <major>` installs.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs, promisify } from "node:util";

const run = promisify(execFile);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "41" },
    node: { type: "string", default: "24" },
    lib: { type: "string", multiple: true, default: [] },
    instructions: { type: "boolean", default: false },
  },
});
const runs = Number(values.runs);
if (!Number.isInteger(runs) || runs < 1)
  throw new Error(`--runs: a whole number of runs, got ${values.runs}`);

/** What each row imports: a specifier resolved from the repository root, as a user's module there would. */
const subjects: { name: string; specifier: string }[] = [
  { name: "idempotool", specifier: "idempotool" },
  { name: "@aws-lambda-powertools/idempotency", specifier: "@aws-lambda-powertools/idempotency" },
  ...values.lib.map((dir) => {
    const entry = path.resolve(root, dir, "index.js");
    if (!existsSync(entry)) throw new Error(`--lib ${dir}: no index.js there (build it first)`);
    return { name: `idempotool (${dir})`, specifier: pathToFileURL(entry).href };
  }),
];
if (!existsSync(path.join(root, "dist/index.js"))) throw new Error("no dist/index.js: npm run build first");

const { stdout: nodePath } = await run(path.join(root, "scripts/node.sh"), [values.node, "--path"]);
const node = nodePath.trim();

/**
 * Milliseconds `await import(specifier)` takes in a fresh process: wall-clock, and CPU (user and system, of
 * every thread of the process), which a busy machine disturbs less.
 */
const timed = `
const cpu = process.cpuUsage();
const began = performance.now();
await import(process.argv[1]);
const wallMs = performance.now() - began;
const { user, system } = process.cpuUsage(cpu);
console.log(JSON.stringify({ wallMs, cpuMs: (user + system) / 1000 }));
`;

/** The file: URLs and the built-in modules that `import(specifier)` resolves, in a fresh process. */
const counted = `
import { registerHooks } from "node:module";
const files = new Set();
const builtins = new Set();
registerHooks({
  resolve(specifier, context, next) {
    const resolved = next(specifier, context);
    (resolved.url.startsWith("file:") ? files : builtins).add(resolved.url);
    return resolved;
  },
});
await import(process.argv[1]);
console.log(JSON.stringify({ files: [...files], builtins: [...builtins] }));
`;

/** What callgrind counts between the two marks: from process.cpuUsage() to process.resourceUsage(). */
const marked = `
process.cpuUsage();
await import(process.argv[1]);
process.resourceUsage();
`;

/** Instructions `await import(specifier)` takes in a fresh process, counted by callgrind. */
async function instructionsOf(specifier: string): Promise<number> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "idempotool-cold-import-"));
  try {
    const out = path.join(dir, "out");
    await run(
      "valgrind",
      [
        "--tool=callgrind",
        `--callgrind-out-file=${out}`,
        // V8 writes and rewrites machine code as it runs.
        "--smc-check=all-non-file",
        "--zero-before=node::CPUUsage*",
        "--dump-before=node::ResourceUsage*",
        node,
        // One thread, and garbage collections scheduled by allocation alone: the same import, the same count.
        "--single-threaded",
        "--predictable-gc-schedule",
        "--input-type=module",
        "--eval",
        marked,
        specifier,
      ],
      { cwd: root, maxBuffer: 64 * 1024 * 1024 },
    );
    const totals = /^totals: (\d+)/m.exec(readFileSync(`${out}.1`, "utf8"));
    if (!totals?.[1]) throw new Error(`no totals in callgrind's dump for ${specifier}`);
    return Number(totals[1]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function inFreshProcess(script: string, specifier: string): Promise<string> {
  const { stdout } = await run(node, ["--input-type=module", "--eval", script, specifier], { cwd: root });
  return stdout;
}

const loads = new Map<string, { files: string[]; builtins: string[] }>();
for (const { name, specifier } of subjects) {
  loads.set(
    name,
    JSON.parse(await inFreshProcess(counted, specifier)) as { files: string[]; builtins: string[] },
  );
}

const samples = new Map<string, { wallMs: number[]; cpuMs: number[] }>(
  subjects.map(({ name }) => [name, { wallMs: [], cpuMs: [] }]),
);
// One discarded round first: the first processes also pay for reading the files from disk.
for (let round = -1; round < runs; round++) {
  // Alternate which goes first, so neither always runs right after the other's process.
  const order = round % 2 === 0 ? subjects : [...subjects].reverse();
  for (const { name, specifier } of order) {
    const { wallMs, cpuMs } = JSON.parse(await inFreshProcess(timed, specifier)) as Record<string, number>;
    if (round < 0) continue;
    samples.get(name)!.wallMs.push(wallMs!);
    samples.get(name)!.cpuMs.push(cpuMs!);
  }
}

const instructions = new Map<string, number>();
if (values.instructions) {
  for (const { name, specifier } of subjects) instructions.set(name, await instructionsOf(specifier));
}

const sorted = (values: number[]) => [...values].sort((a, b) => a - b);
const quantile = (values: number[], q: number): number => values[Math.round(q * (values.length - 1))]!;
const spread = (values: number[]) =>
  `${quantile(values, 0.5).toFixed(1)} (${quantile(values, 0.25).toFixed(1)}–${quantile(values, 0.75).toFixed(1)})`;
const version = (await run(node, ["--version"])).stdout.trim();
console.log(`Cold import on Node ${version}: ${runs} fresh processes each, interleaved; median (p25–p75)\n`);
const counts = values.instructions ? " instructions |" : "";
console.log(`| module | import ms | CPU ms |${counts} files loaded | built-in modules |`);
console.log(`|---|---:|---:|${values.instructions ? "---:|" : ""}---:|---|`);
for (const { name } of subjects) {
  const { wallMs, cpuMs } = samples.get(name)!;
  const { files, builtins } = loads.get(name)!;
  const counted = values.instructions ? ` ${(instructions.get(name)! / 1e6).toFixed(1)} M |` : "";
  console.log(
    `| ${name} | ${spread(sorted(wallMs))} | ${spread(sorted(cpuMs))} |${counted} ${files.length} | ${builtins.join(", ")} |`,
  );
}
