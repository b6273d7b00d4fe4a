/**
 * Every ```ts and ```js block of README.md and docs/ type-checks on its own, as a module of a strict ESM
 * project that depends on idempotool (resolved to this package's source). The compiler's answer does not
 * depend on the Node that runs it, so `npm run test:all` runs this file on the first Node only.
 */
import { join } from "node:path";
import ts from "typescript";
import { afterAll, beforeAll, describe, it } from "vitest";
import { blocksOf, type DocsProject, docFiles, docsProject } from "./fixtures/doc-blocks.js";

const root = join(import.meta.dirname, "..");
const code = docFiles(root)
  .flatMap((file) => blocksOf(root, file))
  .filter((block) => block.lang === "ts" || block.lang === "js");

let project: DocsProject;
beforeAll(() => {
  project = docsProject(root, code);
});
afterAll(() => project?.remove());

describe("code blocks in README.md and docs/", () => {
  it("type-check as written under a strict tsconfig", () => {
    const tsconfig = join(project.dir, "tsconfig.json");
    const config = ts.parseJsonConfigFileContent(
      ts.readConfigFile(tsconfig, ts.sys.readFile).config,
      ts.sys,
      project.dir,
    );
    const files = code.map((block) => project.pathOf(block));
    const program = ts.createProgram({
      rootNames: [join(project.dir, "shims.d.ts"), ...files],
      options: config.options,
    });
    const errors: string[] = [];
    for (const [index, block] of code.entries()) {
      const source = program.getSourceFile(files[index] ?? "");
      if (source === undefined) throw new Error(`the program lost ${block.file}:${block.line}`);
      const diagnostics = [
        ...program.getSyntacticDiagnostics(source),
        ...program.getSemanticDiagnostics(source),
      ];
      for (const diagnostic of diagnostics) {
        const { line } = source.getLineAndCharacterOfPosition(diagnostic.start ?? 0);
        const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n  ");
        errors.push(`${block.file}:${block.line + line}: TS${diagnostic.code} ${message}`);
      }
    }
    // One message with every error, each at its page and line: vitest would cut a long diff short.
    if (errors.length > 0)
      throw new Error(`${errors.length} type errors in code blocks:\n${errors.join("\n")}`);
  }, 180_000);
});
