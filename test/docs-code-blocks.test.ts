/**
 * The code in README.md and docs/ as a reader copies it: every block fenced ```ts run runs to completion,
 * as a module of a strict ESM project that depends on idempotool (resolved to this package's source), on
 * the Node running the tests (docs-code-types.test.ts type-checks every block, once). Text that is not
 * code (a shape, a terminal session) carries another tag, so an untagged fence fails too.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { blocksOf, type DocsProject, docFiles, docsProject } from "./fixtures/doc-blocks.js";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");
const blocks = docFiles(root).flatMap((file) => blocksOf(root, file));
const code = blocks.filter((block) => block.lang === "ts" || block.lang === "js");
const runnable = code.filter((block) => block.flags.includes("run"));

let project: DocsProject;
beforeAll(() => {
  project = docsProject(root, runnable);
});
afterAll(() => project?.remove());

describe("code blocks in README.md and docs/", () => {
  it("carry a language tag (text for what is not code)", () => {
    const untagged = blocks
      .filter((block) => block.lang === "")
      .map((block) => `${block.file}:${block.line - 1}`);
    expect(untagged).toEqual([]);
  });

  it("include runnable blocks", () => {
    expect(runnable.length).toBeGreaterThan(0);
  });

  for (const block of runnable) {
    it(`${block.file}:${block.line} runs to completion`, async () => {
      await run(process.execPath, ["--import", "tsx", project.pathOf(block)], {
        cwd: project.dir,
        env: { ...process.env, TSX_TSCONFIG_PATH: join(project.dir, "tsconfig.json") },
        timeout: 30_000,
      });
    });
  }
});
