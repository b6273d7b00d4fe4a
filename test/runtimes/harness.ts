/**
 * The small test runner the runtime checks use: a case is a name and an async function that throws when
 * the package misbehaves; each prints one line, and the run ends with `<Runtime>: N passed, N failed`.
 * It needs nothing but what Node, Deno and Bun all have, so the same files run under each.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

export interface RuntimeCase {
  readonly name: string;
  readonly run: () => Promise<void>;
}

interface RuntimeGlobals {
  readonly Bun?: { readonly version: string };
  readonly Deno?: { readonly version: { readonly deno: string } };
}

/** The runtime this runs on, by the global only it has. */
export const runtime: { readonly name: "Deno" | "Bun" | "Node"; readonly version: string } = (() => {
  const { Bun, Deno } = globalThis as RuntimeGlobals;
  if (Bun) return { name: "Bun", version: Bun.version };
  if (Deno) return { name: "Deno", version: Deno.version.deno };
  return { name: "Node", version: process.versions.node };
})();

const directories: string[] = [];

/** A path in a fresh temporary folder, removed when the run ends. */
export function tempFile(name = "records.db"): string {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "idempotool-runtime-"));
  directories.push(directory);
  return path.join(directory, name);
}

/** Runs every case in order, prints a line for each and the closing count; resolves to the failures. */
export async function runCases(cases: readonly RuntimeCase[]): Promise<number> {
  let passed = 0;
  let failed = 0;
  for (const c of cases) {
    try {
      await c.run();
      passed++;
      console.log(`ok   ${c.name}`);
    } catch (error) {
      failed++;
      const reason = error instanceof Error ? (error.stack ?? error.message) : String(error);
      console.log(`FAIL ${c.name}\n     ${reason.replaceAll("\n", "\n     ")}`);
    }
  }
  for (const directory of directories.splice(0)) fs.rmSync(directory, { recursive: true, force: true });
  console.log(`${runtime.name}: ${passed} passed, ${failed} failed`);
  return failed;
}
