/**
 * The package as users get it: the built entries behind each subpath export, the bin, the demo,
 * and the conformance suite under another test runner.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  exports: Record<string, unknown>;
  bin: Record<string, string>;
};

/** What each subpath must export, and nothing is re-exported by `export *`. */
const expected: Record<string, string[]> = {
  ".": [
    "idempotent",
    "memoryStore",
    "tieredStore",
    "keys",
    "isIdempotencyError",
    "IdempotencyError",
    "fingerprint",
  ],
  "./sqlite": ["sqliteStore"],
  "./testing": ["storeConformanceCases", "fakeClock", "chaos", "chaosProbe", "recordToolCalls"],
  "./otel": ["otelEvents", "composeEventHooks"],
  "./ops": [
    "postgresTransactionalOnce",
    "sqliteTransactionalOnce",
    "writeContentOnce",
    "fileSystemTarget",
    "s3ConditionalTarget",
    "postgresInsertOnce",
    "sqliteInsertOnce",
    "checkpoint",
  ],
  "./audit": ["auditTools"],
  "./reconcile": ["reconcileOnce", "startReconciler"],
  "./saga": ["saga"],
  "./postgres": ["postgresStore"],
  "./redis": ["redisStore"],
  "./mcp": ["registerIdempotentTool"],
  "./ai-sdk": ["idempotentTool", "idempotentTools", "turnIdFromMessages"],
  "./loops": [
    "loopTool",
    "dispatchToolCalls",
    "runOpenAIToolCalls",
    "runOpenAIResponsesCalls",
    "runAnthropicToolUses",
  ],
  "./http": ["idempotentFetch", "idempotencyMiddleware", "withIdempotencyKey"],
  "./http/hono": ["honoIdempotency"],
  "./http/express": ["expressIdempotency"],
  "./http/fastify": ["fastifyIdempotency"],
  "./langgraph": ["nodeTool", "requestApproval", "runApproved", "keyFromCheckpoint", "mintKey"],
};

describe("the package", () => {
  it("exports exactly the subpaths we document", () => {
    expect(
      Object.keys(pkg.exports)
        .filter((p) => p !== "./package.json")
        .sort(),
    ).toEqual(Object.keys(expected).sort());
  });

  for (const [subpath, names] of Object.entries(expected)) {
    it(`idempotool${subpath === "." ? "" : subpath.slice(1)} resolves to built code exporting ${names.join(", ")}`, async () => {
      // A package may import itself by name: this goes through the exports map, as a user's import does.
      const specifier = subpath === "." ? "idempotool" : `idempotool${subpath.slice(1)}`;
      const module = (await import(specifier)) as Record<string, unknown>;
      for (const name of names) expect(module[name], `${specifier} exports ${name}`).toBeDefined();
    });
  }

  it("keeps the root entry free of drivers: importing it loads no better-sqlite3, pg or ioredis", async () => {
    const { stdout } = await run(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        "await import('idempotool'); const m = await import('node:module'); const r = m.createRequire(import.meta.url); console.log(Object.keys(r.cache).some((k) => /better-sqlite3|[/]pg[/]|ioredis/.test(k)));",
      ],
      { cwd: root },
    );
    expect(stdout.trim()).toBe("false");
  });

  it("runs the demo from the bin: every repeat source holds and it exits 0", async () => {
    const { stdout } = await run(process.execPath, [join(root, pkg.bin.idempotool!), "demo"], { cwd: root });
    expect(stdout).toContain("Every row holds");
    for (const source of [
      "transport retry",
      "framework resume",
      "twice in one turn",
      "double-clicks",
      "crash after sending",
      "new arguments",
      "new turn",
    ]) {
      expect(stdout).toContain(source);
    }
    expect(stdout).not.toMatch(/\bNO\b/);
  }, 60_000);

  it("prints help with examples", async () => {
    const { stdout } = await run(process.execPath, [join(root, pkg.bin.idempotool!), "demo", "--help"], {
      cwd: root,
    });
    expect(stdout).toContain("Examples:");
  });

  it("runs the conformance suite under node:test too", async () => {
    const { stdout } = await run(
      process.execPath,
      [
        "--import",
        "tsx",
        "--test",
        "--test-reporter=tap",
        join(root, "test/fixtures/conformance-node-test.ts"),
      ],
      { cwd: root },
    );
    expect(stdout).toMatch(/# pass [1-9]\d*/);
    expect(stdout).toContain("# fail 0");
  }, 60_000);
});
