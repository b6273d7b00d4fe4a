/**
 * The code in README.md and docs/ as a reader copies it. Every ```ts and ```js block type-checks on its
 * own, as a module of a strict ESM project that depends on idempotool (resolved to this package's
 * source), and every block fenced ```ts run also runs to completion. Text that is not code (a shape, a
 * terminal session) carries another tag, so an untagged fence fails too.
 */
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { blocksOf, type DocBlock, docFiles } from "./fixtures/doc-blocks.js";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");
const blocks = docFiles(root).flatMap((file) => blocksOf(root, file));
const code = blocks.filter((block) => block.lang === "ts" || block.lang === "js");
const runnable = code.filter((block) => block.flags.includes("run"));

/** The file name a block gets in the project: its page and line, so errors point back at the page. */
function fileNameOf(block: DocBlock): string {
  return `${block.file.replaceAll(/[/\\.]/g, "_")}_L${block.line}.${block.lang}`;
}

/** A reader's strict tsconfig, with `idempotool` and each subpath mapped to this package's source. */
const compilerOptions = {
  target: "ES2022",
  lib: ["ES2022", "ESNext.Disposable", "DOM"],
  module: "NodeNext",
  moduleResolution: "NodeNext",
  strict: true,
  noUncheckedIndexedAccess: true,
  exactOptionalPropertyTypes: true,
  verbatimModuleSyntax: true,
  noImplicitOverride: true,
  isolatedModules: true,
  esModuleInterop: true,
  skipLibCheck: true,
  allowJs: true,
  checkJs: true,
  noEmit: true,
  types: ["node"],
  paths: {
    idempotool: [join(root, "src/index.ts")],
    "idempotool/*": [join(root, "src/*/index.ts"), join(root, "src/*.ts")],
  },
};

/**
 * Packages and runtime modules (Bun's) the pages use that are not among our dev dependencies: only the
 * part the pages call, as the package declares it, so a block that misuses them still fails.
 */
const shims = `
declare module "stripe" {
  namespace Stripe {
    interface PaymentIntent { id: string; status: string; amount: number }
    interface RequestOptions { idempotencyKey?: string }
  }
  class Stripe {
    constructor(apiKey: string, config?: { maxNetworkRetries?: number });
    paymentIntents: {
      create(
        params: { customer?: string; amount: number; currency: string; confirm?: boolean },
        options?: Stripe.RequestOptions,
      ): Promise<Stripe.PaymentIntent>;
    };
  }
  export default Stripe;
}
declare module "cloudflare:workers" {
  type SqlStorageValue = ArrayBuffer | string | number | null;
  abstract class DurableObject<Env = unknown> {
    constructor(ctx: unknown, env: Env);
    protected ctx: {
      readonly storage: {
        readonly sql: {
          exec(query: string, ...bindings: SqlStorageValue[]): { toArray(): Record<string, SqlStorageValue>[] };
        };
        transactionSync<T>(closure: () => T): T;
      };
    };
    protected env: Env;
  }
}
declare module "bun:sqlite" {
  interface Changes { changes: number; lastInsertRowid: number | bigint }
  class Statement {
    run(...params: unknown[]): Changes;
    get(...params: unknown[]): unknown;
    all(...params: unknown[]): unknown[];
    values(...params: unknown[]): unknown[][];
    safeIntegers(toggle: boolean): this;
  }
  class Database {
    constructor(filename?: string, options?: { readonly?: boolean; create?: boolean; readwrite?: boolean; strict?: boolean; safeIntegers?: boolean });
    prepare(sql: string): Statement;
    query(sql: string): Statement;
    exec(sql: string, ...params: unknown[]): Changes;
    transaction<F extends (...args: never[]) => unknown>(fn: F): F & { immediate: F };
    get inTransaction(): boolean;
    close(throwOnError?: boolean): void;
  }
}
`;

let dir = "";

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "idempotool-docs-"));
  writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module", private: true }));
  writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions }, null, 2));
  symlinkSync(join(root, "node_modules"), join(dir, "node_modules"), "dir");
  writeFileSync(join(dir, "shims.d.ts"), shims);
  mkdirSync(join(dir, "blocks"));
  for (const block of code) {
    // Each block is a module of its own, even one without an import: its names are its own.
    writeFileSync(join(dir, "blocks", fileNameOf(block)), `${block.code}\nexport {};\n`);
  }
});

afterAll(() => {
  if (dir !== "") rmSync(dir, { recursive: true, force: true });
});

describe("code blocks in README.md and docs/", () => {
  it("carry a language tag (text for what is not code)", () => {
    const untagged = blocks
      .filter((block) => block.lang === "")
      .map((block) => `${block.file}:${block.line - 1}`);
    expect(untagged).toEqual([]);
  });

  it("type-check as written under a strict tsconfig", () => {
    const config = ts.parseJsonConfigFileContent({ compilerOptions }, ts.sys, dir);
    const files = code.map((block) => join(dir, "blocks", fileNameOf(block)));
    const program = ts.createProgram({
      rootNames: [join(dir, "shims.d.ts"), ...files],
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

  it("include runnable blocks", () => {
    expect(runnable.length).toBeGreaterThan(0);
  });

  for (const block of runnable) {
    it(`${block.file}:${block.line} runs to completion`, async () => {
      await run(process.execPath, ["--import", "tsx", join(dir, "blocks", fileNameOf(block))], {
        cwd: dir,
        env: { ...process.env, TSX_TSCONFIG_PATH: join(dir, "tsconfig.json") },
        timeout: 30_000,
      });
    });
  }
});
