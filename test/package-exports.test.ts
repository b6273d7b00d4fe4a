/**
 * The subpath list, kept in one agreement: package.json "exports", what the build emits (`tsc` compiles
 * every file of src/ to dist/, so an entry is built exactly when its source exists), the src/<name>/index.ts
 * entries, and the tsconfig paths that type-check examples/ against src/. And no declaration is exported
 * from two subpaths, so a user finds each name in one place.
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { exportsReport, subpathEntries } from "../scripts/exports-report.js";

const root = join(import.meta.dirname, "..");
const entries = subpathEntries(root);

/** The entries of a subpath that is not a folder's index.ts: the HTTP framework adapters. */
const fileEntries = ["src/http/express.ts", "src/http/fastify.ts", "src/http/hono.ts"];

/** Folders of src/ that are not a subpath: the command line, and code only other entries import. */
const notSubpaths = ["cli", "core", "tool-calls"];

/**
 * Names two subpaths each declare for themselves: the same role in another framework (`idempotentTool`
 * for each agent SDK, `stepKey` for each durable-step engine). Adding one is a choice, made here.
 */
const ownDeclarationInEach = [
  "ApprovalRequest",
  "IdempotentToolOptions",
  "KeyField",
  "StepToolOptions",
  "approvalRequest",
  "approve",
  "idempotentTool",
  "runApproved",
  "stepKey",
  "stepTool",
  "toolContextOf",
];

describe("the subpath list", () => {
  it("maps each subpath to dist/<path>.js and .d.ts, built from src/<path>.ts", () => {
    for (const entry of entries) {
      const path = entry.subpath === "." ? "index" : `${entry.subpath.slice(2)}/index`;
      const fileEntry = fileEntries.find((file) => file === `src/${entry.subpath.slice(2)}.ts`);
      const expectedSource = fileEntry ?? `src/${path}.ts`;
      expect(entry.source, entry.specifier).toBe(expectedSource);
      expect(entry.module, entry.specifier).toBe(
        expectedSource.replace(/^src\//, "dist/").replace(/\.ts$/, ".js"),
      );
      expect(entry.types, entry.specifier).toBe(
        expectedSource.replace(/^src\//, "dist/").replace(/\.ts$/, ".d.ts"),
      );
      expect(existsSync(join(root, entry.source)), `${entry.source} exists`).toBe(true);
    }
  });

  it("has a subpath for every src/<name>/index.ts, and src/ has no index.ts without one", () => {
    const indexes = readdirSync(join(root, "src"), { withFileTypes: true })
      .filter((dirent) => dirent.isDirectory() && existsSync(join(root, "src", dirent.name, "index.ts")))
      .map((dirent) => `src/${dirent.name}/index.ts`);
    const sources = entries.map((entry) => entry.source);
    expect(sources.filter((source) => !fileEntries.includes(source)).sort()).toEqual(
      ["src/index.ts", ...indexes].sort(),
    );
    for (const folder of notSubpaths) {
      expect(existsSync(join(root, "src", folder, "index.ts")), `src/${folder}/index.ts`).toBe(false);
    }
  });

  it("is the list the build compiles: tsconfig.build.json takes all of src/ and writes dist/", () => {
    const { config } = ts.readConfigFile(join(root, "tsconfig.build.json"), ts.sys.readFile);
    const parsed = ts.parseJsonConfigFileContent(config, ts.sys, root);
    expect(parsed.options.rootDir).toBe(join(root, "src"));
    expect(parsed.options.outDir).toBe(join(root, "dist"));
    for (const entry of entries) expect(parsed.fileNames, entry.source).toContain(join(root, entry.source));
  });
});

describe("the exported names", () => {
  const report = exportsReport(root);

  it("are read from every subpath, and each exports something", () => {
    expect(report.entries.map((entry) => entry.specifier)).toEqual(entries.map((entry) => entry.specifier));
    for (const entry of report.entries) expect(entry.names.length, entry.specifier).toBeGreaterThan(0);
    expect(report.entries.find((entry) => entry.specifier === "idempotool")?.names).toContain(
      "RecentSimilarCall",
    );
  });

  it("have one home each: no declaration is exported from two subpaths", () => {
    expect(
      report.shared
        .filter((name) => name.reExported)
        .map((name) => `${name.name}: ${name.specifiers.join(", ")}`),
    ).toEqual([]);
  });

  it("share a name across subpaths only where each declares its own, as listed here", () => {
    const unlisted = report.shared.filter((name) => !ownDeclarationInEach.includes(name.name));
    expect(unlisted.map((name) => `${name.name}: ${name.specifiers.join(", ")}`)).toEqual([]);
  });
});
