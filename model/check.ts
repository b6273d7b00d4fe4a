/**
 * `npm run check:model`: the spin model of the record protocol (model/protocol.pml, docs/protocol.md), checked.
 *
 * 1. model/decide.pml must be what model/generate.ts makes of the table in src/core/decide.ts;
 * 2. the model as it is must pass: every safety property, exhaustively, for each effect class, and
 *    `key_not_blocked` under weak fairness;
 * 3. each known bug, switched back on by its flag, must make spin report a counterexample that breaks the
 *    property it is there for.
 *
 * One line per run: the verdict, what spin found, the states it explored and the time it took. Exits 1 when a
 * run is not as expected. Needs spin and a C compiler on the PATH.
 *
 *   node --import tsx model/check.ts                                everything
 *   node --import tsx model/check.ts --trail <name> [--shortest]    one bug's run and its counterexample,
 *                                     step by step (--shortest: breadth first, for the safety properties)
 */
import { execFile } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { actions, decidePml, factValues } from "./decide-pml.js";

const run = promisify(execFile);
const modelDir = path.dirname(fileURLToPath(import.meta.url));

/** The bounds of the safety runs (docs/protocol.md explains them). */
const safety = { WORKERS: 3, TMAX: 2, LEASE: 1, TTL: 1, FAULTS: 1 };
/** The liveness run: two callers, leases long enough to renew, no window ends before time stops. */
const liveness = { LIVENESS: 1, WORKERS: 2, TMAX: 3, LEASE: 2, TTL: 2, FAULTS: 1 };

interface Run {
  readonly name: string;
  readonly defines: Readonly<Record<string, number>>;
  readonly kind: "safety" | "liveness";
  /** The property a counterexample must break; absent when the run must pass. */
  readonly breaks?: readonly string[];
}

const effects = ["native-key", "owned-store", "compensatable", "irreversible"] as const;

const runs: readonly Run[] = [
  ...effects.map(
    (effect, i): Run => ({ name: `clean, ${effect}`, defines: { ...safety, EFFECT: i + 1 }, kind: "safety" }),
  ),
  { name: "clean, key_not_blocked", defines: liveness, kind: "liveness" },
  bug("BUG_REPLAY_ACROSS_TOOLS", ["result_from_same_call"]),
  bug("BUG_EXPIRY_FROM_CLAIM", ["effect_once"]),
  bug("BUG_OWN_CLAIM_UNRECOGNISED", ["key_not_blocked"], "liveness"),
  bug("BUG_LOST_WITHOUT_READ_BACK", ["lease_lost_is_true"]),
  bug("BUG_TAKEOVER_NOT_CAS", ["fenced"]),
  bug("BUG_SETTLE_NOT_FENCED", ["fenced"]),
  bug("BUG_IRREVERSIBLE_TAKEOVER", ["unknown_stays_unknown", "effect_once"]),
];

function bug(flag: string, breaks: readonly string[], kind: Run["kind"] = "safety"): Run {
  return { name: flag, defines: { ...(kind === "safety" ? safety : liveness), [flag]: 1 }, kind, breaks };
}

interface Verdict {
  readonly ok: boolean;
  readonly line: string;
  readonly dir: string;
}

const spinDefines = (r: Run) => Object.entries(r.defines).map(([name, value]) => `-D${name}=${value}`);

async function check(r: Run, shortest = false): Promise<Verdict> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "idempotool-model-"));
  for (const file of ["protocol.pml", "decide.pml"])
    copyFileSync(path.join(modelDir, file), path.join(dir, file));
  const started = performance.now();
  await run("spin", [...spinDefines(r), "-a", "protocol.pml"], { cwd: dir });
  // -O0: pan spends its time hashing states, and -O2 would triple the compile time for little.
  // Breadth first finds the shortest counterexample, but searches no cycles: safety runs only.
  const cc = r.kind === "safety" ? ["-DSAFETY", "-DNOCLAIM", ...(shortest ? ["-DBFS"] : [])] : [];
  await run("cc", ["-O0", "-DMEMLIM=8192", ...cc, "-o", "pan", "pan.c"], { cwd: dir });
  const pan = r.kind === "safety" ? ["-m200000", "-w25"] : ["-a", "-f", "-m200000", "-w22"];
  const { stdout } = await run("./pan", pan, { cwd: dir, maxBuffer: 64 * 1024 * 1024 });
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  const states = Number(/(\d+) states, stored/.exec(stdout)?.[1] ?? Number.NaN).toLocaleString("en-US");
  const errors = Number(/errors: (\d+)/.exec(stdout)?.[1] ?? Number.NaN);
  const incomplete = /max search depth too small|out of memory|MEMLIM/i.test(stdout);
  const broken =
    /assertion violated (\w+)/.exec(stdout)?.[1] ??
    (/acceptance cycle/.test(stdout) ? "key_not_blocked" : undefined);
  const found = errors > 0 ? `counterexample: ${broken ?? "unrecognised error"}` : "no counterexample";
  const ok =
    !incomplete &&
    (r.breaks === undefined ? errors === 0 : errors > 0 && broken !== undefined && r.breaks.includes(broken));
  const expected = r.breaks === undefined ? "" : ` (expected: ${r.breaks.join(" or ")})`;
  const line = `${ok ? "ok  " : "FAIL"}  ${r.name.padEnd(28)} ${found}${ok ? "" : expected}${incomplete ? ", search incomplete" : ""}, ${states} states, ${seconds} s`;
  return { ok, line, dir };
}

/** The store commands, numbered as protocol.pml numbers them (C_CLAIM …). */
const commands = ["claim", "takeover", "settle", "renew", "release", "read back"];

/** Names for the numbers the model prints: `{status:2}` becomes `completed`, `{act:7}` `take_over`. */
function narrate(text: string): string {
  const values = factValues();
  return text.replace(/\{(\w+):(\d+)\}/g, (whole, fact: string, n: string) => {
    const i = Number(n) - 1;
    const name = fact === "act" ? actions[i] : fact === "command" ? commands[i] : values.get(fact)?.[i];
    return name ?? whole;
  });
}

/** The counterexample spin left in `dir`, as the model's own account of each step. */
async function trail(r: Run, dir: string): Promise<string> {
  const { stdout } = await run("spin", [...spinDefines(r), "-t", "protocol.pml"], {
    cwd: dir,
    maxBuffer: 64 * 1024 * 1024,
  });
  return stdout
    .split("\n")
    .filter((line) => /^\s*t\d|START OF CYCLE/.test(line))
    .map((line) => narrate(line.trim()))
    .join("\n");
}

/** A gate that lets at most `width` tasks run at once, starting them in the order they came. */
function gate(width: number) {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async <T>(task: () => Promise<T>): Promise<T> => {
    while (running >= width) await new Promise<void>((resolve) => waiting.push(resolve));
    running++;
    try {
      return await task();
    } finally {
      running--;
      waiting.shift()?.();
    }
  };
}

async function main(): Promise<number> {
  const trailOf = process.argv.indexOf("--trail");
  if (trailOf !== -1) {
    const name = process.argv[trailOf + 1];
    const chosen = runs.find((r) => r.name === name);
    if (!chosen) {
      console.error(
        `--trail takes one of: ${runs
          .filter((r) => r.breaks)
          .map((r) => r.name)
          .join(", ")}`,
      );
      return 2;
    }
    const verdict = await check(chosen, process.argv.includes("--shortest"));
    console.log(verdict.line);
    if (verdict.ok && chosen.breaks) console.log(await trail(chosen, verdict.dir));
    rmSync(verdict.dir, { recursive: true, force: true });
    return verdict.ok ? 0 : 1;
  }

  const committed = readFileSync(path.join(modelDir, "decide.pml"), "utf8");
  const generated = committed === decidePml();
  console.log(
    generated
      ? "ok    model/decide.pml is generated from src/core/decide.ts"
      : "FAIL  model/decide.pml differs from the table: run `node --import tsx model/generate.ts`",
  );
  // Two at a time: each run is one process, and the machines this runs on have two cores.
  const admit = gate(Math.max(1, Math.min(2, os.availableParallelism())));
  const started = runs.map((r) =>
    admit(() => check(r)).catch((error: unknown): Verdict => {
      const why = error instanceof Error ? error.message.split("\n")[0] : String(error);
      return { ok: false, line: `FAIL  ${r.name.padEnd(28)} ${why}`, dir: "" };
    }),
  );
  let ok = generated;
  for (const verdict of started) {
    const { line, dir, ok: passed } = await verdict;
    console.log(line);
    if (dir) rmSync(dir, { recursive: true, force: true });
    ok &&= passed;
  }
  return ok ? 0 : 1;
}

process.exitCode = await main();
