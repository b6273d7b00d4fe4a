/**
 * The spin model decides with the table of src/core/decide.ts: model/decide.pml is generated from it, and
 * spin itself, run on every cell of the table's domain, answers what decide() answers. (`npm run check:model`
 * then checks the model; docs/protocol.md.) spin must be installed: without it these tests fail.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { actions, decidePml, harnessPml } from "../model/decide-pml.js";
import { callEvents, decide } from "../src/core/decide.js";

const modelDir = path.join(import.meta.dirname, "..", "model");
const committed = path.join(modelDir, "decide.pml");
const work = mkdtempSync(path.join(os.tmpdir(), "idempotool-model-table-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function spin(file: string): string {
  try {
    return execFileSync("spin", [file], { cwd: work, encoding: "utf8", maxBuffer: 16 * 1024 * 1024 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      throw new Error("spin is not installed (apt-get install spin): the model cannot be checked without it");
    }
    throw error;
  }
}

describe("the model's decision step", () => {
  it("is model/decide.pml as generated from the table (regenerate: node --import tsx model/generate.ts)", () => {
    expect(readFileSync(committed, "utf8")).toBe(decidePml());
  });

  it("answers, in spin, what decide() answers in every cell of the table's domain", () => {
    const { text, cells } = harnessPml(committed);
    writeFileSync(path.join(work, "harness.pml"), text);
    const printed = new Map<number, string | undefined>();
    for (const [, cell, act] of spin("harness.pml").matchAll(/cell (\d+) (\d+)/g)) {
      printed.set(Number(cell), actions[Number(act) - 1]);
    }
    expect(printed.size).toBe(cells.length);
    const differing = cells.flatMap((situation, n) => {
      const expected = decide(situation);
      return printed.get(n) === expected ? [] : [{ situation, spin: printed.get(n), decide: expected }];
    });
    expect(differing).toEqual([]);
  });

  it("is what the protocol model calls at each decision point, one inline per event", () => {
    const protocol = readFileSync(path.join(modelDir, "protocol.pml"), "utf8");
    expect(protocol).toContain('#include "decide.pml"');
    for (const event of callEvents) expect(protocol, event).toContain(`decide_${event}(`);
  });
});
