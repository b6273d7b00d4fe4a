/**
 * The built package on Deno and on Bun, through scripts/runtimes.sh (which installs each from npm the
 * first time): every case the runner prints becomes a test here, so the runtimes' cases count with the
 * rest of the suite. A runtime that cannot be installed or started fails, never skips.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { memoryStore } from "../src/index.js";
import { fakeClock, storeConformanceCases } from "../src/testing/index.js";

const root = join(import.meta.dirname, "..");

interface RuntimeRun {
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** One runtime's run of test/runtimes/run.ts; never rejects, so a failure is reported by the tests below. */
async function runOn(runtime: "deno" | "bun"): Promise<RuntimeRun> {
  try {
    const { stdout, stderr } = await promisify(execFile)(join(root, "scripts/runtimes.sh"), [runtime], {
      cwd: root,
      timeout: 240_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    return { exitCode: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: unknown; stdout?: string; stderr?: string; message: string };
    return {
      exitCode: typeof failed.code === "number" ? failed.code : 1,
      stdout: failed.stdout ?? "",
      stderr: failed.stderr || failed.message,
    };
  }
}

interface CaseLine {
  readonly name: string;
  /** Undefined when the case passed; else what the runner printed under its FAIL line. */
  readonly failure?: string;
}

/** The runner's `ok   name` and `FAIL name` lines (a failure's indented lines follow its FAIL line). */
function caseLines(stdout: string): CaseLine[] {
  const cases: { name: string; failure?: string }[] = [];
  for (const line of stdout.split("\n")) {
    if (line.startsWith("ok   ")) cases.push({ name: line.slice(5) });
    else if (line.startsWith("FAIL ")) cases.push({ name: line.slice(5), failure: "" });
    else if (line.startsWith("     ") && cases.at(-1)?.failure !== undefined)
      cases.at(-1)!.failure += `${line.trim()}\n`;
  }
  return cases;
}

const conformanceCount = storeConformanceCases({
  name: "count",
  create: () => ({ store: memoryStore(), clock: fakeClock() }),
}).length;

/** What each runtime must have run: the conformance suite per store, and at least one case per group. */
const expectations = {
  Deno: { script: "deno", sqliteDrivers: ["node:sqlite"] },
  Bun: { script: "bun", sqliteDrivers: ["bun:sqlite", "node:sqlite"] },
} as const;

// Collected before the tests are declared, one runtime after the other (the machine may have two cores).
const runs: Record<string, RuntimeRun> = {};
for (const [name, { script }] of Object.entries(expectations)) runs[name] = await runOn(script);

for (const [name, expected] of Object.entries(expectations)) {
  const run = runs[name]!;
  const cases = caseLines(run.stdout);
  const count = (prefix: string) => cases.filter((c) => c.name.startsWith(prefix)).length;

  describe(`idempotool on ${name}`, () => {
    it(`installs ${name} (the version scripts/runtimes.sh pins), runs the built package, ends with no failure`, () => {
      expect(run.stdout, run.stderr).toMatch(new RegExp(`^idempotool on ${name} \\d+\\.\\d+\\.\\d+\n`));
      const failures = cases.filter((c) => c.failure !== undefined).length;
      expect(run.stdout).toContain(`\n${name}: ${cases.length - failures} passed, ${failures} failed\n`);
      expect(failures).toBe(0);
      expect(run.exitCode, run.stderr).toBe(0);
    });

    it("runs the whole conformance suite on memoryStore, tieredStore and sqliteStore on each of its SQLite drivers", () => {
      const stores = [
        "memoryStore",
        "tieredStore",
        ...expected.sqliteDrivers.map((d) => `sqliteStore (${d})`),
      ];
      for (const store of stores) expect(count(`conformance ${store}: `), store).toBe(conformanceCount);
    });

    it("runs the send_email scenario on memory and on SQLite, and idempotool/http and idempotool/mcp on each", () => {
      for (const group of ["send_email on", "idempotool/http on", "idempotool/mcp on"]) {
        for (const store of ["memoryStore", "sqliteStore"])
          expect(count(`${group} ${store}: `), group).toBeGreaterThan(0);
      }
      expect(count("sqliteStore: ")).toBeGreaterThan(0);
    });

    for (const c of cases) {
      it(c.name, () => {
        if (c.failure !== undefined) throw new Error(`failed on ${name}:\n${c.failure}`);
      });
    }
  });
}

describe("README's Runtimes table", () => {
  it("names the Deno and Bun versions scripts/runtimes.sh installs", () => {
    const script = readFileSync(join(root, "scripts/runtimes.sh"), "utf8");
    const readme = readFileSync(join(root, "README.md"), "utf8");
    for (const [name, variable] of [
      ["Deno", "DENO"],
      ["Bun", "BUN"],
    ]) {
      const pinned = new RegExp(`IDEMPOTOOL_${variable}_VERSION:-([0-9.]+)\\}`).exec(script)?.[1];
      expect(pinned, name).toMatch(/^\d+\.\d+\.\d+$/);
      expect(readme).toMatch(new RegExp(`^\\| ${name} \\d +\\| ${pinned!.replaceAll(".", "\\.")} +\\|`, "m"));
    }
  });
});
