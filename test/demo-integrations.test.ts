/**
 * `idempotool demo`: the MCP, proxy, LangGraph and HTTP rows run on the demo's SQLite store and hold, and a
 * user without one of those frameworks gets that row skipped, not a failed demo. In this process, but for
 * that last case: hiding a package takes a Node hook in a process of its own, so it runs the built bin. Every
 * demo starts a process anyway: its crash row SIGKILLs a child after the email went out.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cli, ensureBuilt } from "./fixtures/cli-binary.js";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");
const bin = join(root, "dist/cli/main.js");
const rows = [
  "MCP: client re-sends tools/call",
  "Proxy: keyless MCP server, re-send",
  "LangGraph: resume re-runs the node",
  "HTTP: response lost",
];

/** The table row that starts with `source`, or undefined. */
const rowOf = (stdout: string, source: string) => stdout.split("\n").find((line) => line.startsWith(source));

describe("idempotool demo: the integration rows", () => {
  const dirs: string[] = [];
  beforeAll(ensureBuilt, 180_000);
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("runs the MCP, proxy, LangGraph and HTTP rows, each sending one email, and exits 0", async () => {
    const { code, stdout, stderr } = await cli(["demo"]);
    expect(code, stderr).toBe(0);
    for (const source of rows) {
      const row = rowOf(stdout, source);
      expect(row, `a row for ${source}`).toBeDefined();
      expect(row).toMatch(/\s2\s+1\s+1\s+.*\byes\s*$/);
      expect(row).toContain("replay");
    }
    expect(rowOf(stdout, "HTTP")).toContain("response lost, replay");
    expect(stdout).toContain("Every row holds");
    expect(stdout).not.toMatch(/\bNO\b|skipped/);
  }, 60_000);

  it("creates the folder demo --dir names", async () => {
    const parent = mkdtempSync(join(tmpdir(), "idempotool-demo-dir-"));
    dirs.push(parent);
    const dir = join(parent, "new-folder", "deeper");
    const { code, stdout, stderr } = await cli(["demo", "--dir", dir]);
    expect(code, stderr).toBe(0);
    expect(stdout).toContain(`on SQLite at ${join(dir, "idempotool.db")}`);
    expect(existsSync(join(dir, "idempotool.db"))).toBe(true);
  }, 120_000);

  it("skips the HTTP row when hono is not installed, and still exits 0", async () => {
    // execFile rejects on a non-zero exit, so resolving is the exit-0 check.
    const dir = mkdtempSync(join(tmpdir(), "idempotool-demo-test-"));
    dirs.push(dir);
    // A resolve hook that looks hono up from a folder with no node_modules, so Node's own
    // "Cannot find package 'hono'" error is what the demo sees, as it would without hono installed.
    const hook = join(dir, "hide-hono.mjs");
    writeFileSync(
      hook,
      [
        "export async function resolve(specifier, context, next) {",
        '  if (specifier === "hono" || specifier.startsWith("hono/")) {',
        `    return next(specifier, { ...context, parentURL: ${JSON.stringify(pathToFileURL(join(dir, "x.js")).href)} });`,
        "  }",
        "  return next(specifier, context);",
        "}",
      ].join("\n"),
    );
    const register = join(dir, "register.mjs");
    writeFileSync(
      register,
      `import { register } from "node:module";\nregister(${JSON.stringify(pathToFileURL(hook).href)});\n`,
    );
    const { stdout } = await run(process.execPath, ["--import", pathToFileURL(register).href, bin, "demo"], {
      cwd: root,
    });
    const http = rowOf(stdout, "HTTP");
    expect(http).toContain("to see this row, install hono beside idempotool: npm install hono");
    expect(http).toMatch(/\bskipped\s*$/);
    expect(rowOf(stdout, "MCP")).toMatch(/\byes\s*$/);
    expect(rowOf(stdout, "LangGraph")).toMatch(/\byes\s*$/);
    expect(stdout).toContain("Every row holds");
    expect(stdout).toContain("(1 row skipped)");
  }, 60_000);
});
