/**
 * The package as users get it: the built entries behind each subpath export, the bin, the demo,
 * and the conformance suite under another test runner.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { runtimeImportGraph } from "./fixtures/import-graph.js";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  exports: Record<string, unknown>;
  bin: Record<string, string>;
};

/**
 * The folders of dist/ each entry loads: its own, the core, and only what it is about. The conformance
 * suite loads no concrete store; chaos runs tools on SQLite; the agent-loop, agent-SDK and durable-step
 * entries share tool-calls/.
 */
const foldersLoaded: Record<string, string[]> = {
  ".": [".", "core"],
  "./sqlite": ["core", "sqlite"],
  // The conformance suite checks operators' resolutions on every store.
  "./testing": ["core", "review", "testing"],
  "./chaos": ["chaos", "core", "sqlite"],
  "./otel": ["core", "otel", "review"],
  "./ops": ["core", "ops"],
  "./audit": ["audit", "core"],
  // It leaves operators' trail entries alone.
  "./reconcile": ["core", "reconcile", "review"],
  "./review": ["core", "review"],
  "./saga": ["core", "saga"],
  "./postgres": ["core", "postgres", "sqlite"],
  "./mysql": ["core", "mysql"],
  "./redis": ["core", "redis"],
  "./cloudflare": ["cloudflare", "core"],
  "./dynamodb": ["core", "dynamodb"],
  "./mcp": ["core", "mcp"],
  // The client shares the HTTP client's retry policy, and loads nothing of the server.
  "./mcp-client": ["core", "http", "mcp-client"],
  "./ai-sdk": ["ai-sdk", "core", "tool-calls"],
  "./openai-agents": ["core", "openai-agents", "tool-calls"],
  "./mastra": ["core", "mastra", "tool-calls"],
  "./loops": ["core", "loops", "tool-calls"],
  "./http": ["core", "http"],
  "./http/hono": ["core", "http"],
  "./http/express": ["core", "http"],
  "./http/fastify": ["core", "http"],
  "./langgraph": ["core", "langgraph", "tool-calls"],
  "./dbos": ["core", "dbos", "tool-calls"],
  "./vercel-workflow": ["core", "tool-calls", "vercel-workflow"],
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
    "ApprovalMismatchError",
    "fingerprint",
  ],
  "./sqlite": ["sqliteStore"],
  "./testing": ["storeConformanceCases", "fakeClock", "recordToolCalls"],
  "./chaos": ["chaos", "chaosProbe", "RepeatSource", "SourceVerdict"],
  "./otel": ["otelEvents", "composeEventHooks"],
  "./ops": [
    "transactionalOnce",
    "postgresTransactionalOnce",
    "mysqlTransactionalOnce",
    "mysqlDedupTableSql",
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
  "./review": ["reviewQueue", "resolveRecord", "readTrail"],
  "./saga": ["saga"],
  "./postgres": ["postgresStore", "lockPGliteDirectory"],
  "./mysql": ["mysqlStore"],
  "./redis": ["redisStore"],
  "./cloudflare": ["durableObjectStore", "durableObjectStoreClient", "handleStoreCall"],
  "./dynamodb": ["dynamoStore", "createTableInput"],
  "./mcp": ["registerIdempotentTool"],
  "./mcp-client": ["idempotentClient", "idempotentMcpTools"],
  "./ai-sdk": ["idempotentTool", "idempotentTools", "turnIdFromMessages"],
  "./openai-agents": ["idempotentTool", "approvalRequest", "approve"],
  "./mastra": [
    "idempotentTool",
    "idempotentStep",
    "keyFromStep",
    "toolApprovalRequest",
    "bindToolApproval",
    "approvalRequest",
    "runApproved",
  ],
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
  "./dbos": ["stepKey", "stepTool"],
  "./vercel-workflow": ["stepKey", "stepTool"],
};

describe("the package", () => {
  it("exports exactly the subpaths we document", () => {
    expect(
      Object.keys(pkg.exports)
        .filter((p) => p !== "./package.json")
        .sort(),
    ).toEqual(Object.keys(expected).sort());
    expect(Object.keys(foldersLoaded).sort()).toEqual(Object.keys(expected).sort());
  });

  for (const [subpath, names] of Object.entries(expected)) {
    it(`idempotool${subpath === "." ? "" : subpath.slice(1)} resolves to built code exporting ${names.join(", ")}`, async () => {
      // A package may import itself by name: this goes through the exports map, as a user's import does.
      const specifier = subpath === "." ? "idempotool" : `idempotool${subpath.slice(1)}`;
      const module = (await import(specifier)) as Record<string, unknown>;
      for (const name of names) expect(module[name], `${specifier} exports ${name}`).toBeDefined();
    });
  }

  for (const [subpath, folders] of Object.entries(foldersLoaded)) {
    it(`idempotool${subpath === "." ? "" : subpath.slice(1)} loads only dist/{${folders.join(",")}} and no store driver`, () => {
      const entry = join(root, (pkg.exports[subpath] as { default: string }).default);
      const graph = runtimeImportGraph(entry);
      const loaded = new Set([...graph.files].map((file) => dirname(relative(join(root, "dist"), file))));
      expect([...loaded].sort()).toEqual(folders);
      expect(
        [...graph.packages].filter((name) =>
          /^(better-sqlite3|pg|postgres|@electric-sql\/pglite|ioredis|redis|@upstash\/redis|@valkey\/valkey-glide)(\/|$)/.test(
            name,
          ),
        ),
      ).toEqual([]);
    });
  }

  // A cold import of the root entry loads 24 files; @aws-lambda-powertools/idempotency 2.35.0 loads 25 on the same
  // Node, counted the same way (its file: URLs as a resolve hook sees them): bench/cold-import.ts counts both.
  it("keeps a cold import of the root entry to fewer files than Powertools' idempotency loads (25)", () => {
    const graph = runtimeImportGraph(join(root, "dist/index.js"));
    expect(graph.loadedOnImport.size).toBeLessThanOrEqual(24);
  });

  it("counts the files of that import as Node loads them: every one the walk names, and no other", async () => {
    const { stdout } = await run(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        [
          "const { registerHooks } = await import('node:module');",
          "const files = new Set();",
          "registerHooks({ resolve(s, c, next) { const r = next(s, c); if (r.url.startsWith('file:')) files.add(r.url); return r; } });",
          "await import('idempotool');",
          "console.log(JSON.stringify([...files]));",
        ].join(" "),
      ],
      { cwd: root },
    );
    const loaded = (JSON.parse(stdout) as string[]).map((url) => relative(root, fileURLToPath(url)));
    const walked = [...runtimeImportGraph(join(root, "dist/index.js")).loadedOnImport].map((file) =>
      relative(root, file),
    );
    expect(loaded.sort()).toEqual(walked.sort());
  });

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

describe("the Node versions the package claims", () => {
  it("are the versions npm test and CI run the whole suite on, each a supported major", () => {
    const engines = (
      JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { engines: { node: string } }
    ).engines.node;
    const claimed = engines.split("||").map((range) => range.trim().match(/^\^(\d+)\.\d+\.\d+$/)?.[1]);
    expect(claimed, `engines.node is ^major.minor.patch ranges joined by ||: ${engines}`).not.toContain(
      undefined,
    );
    const testScript = readFileSync(join(root, "scripts", "test.sh"), "utf8");
    const tested = testScript.match(/IDEMPOTOOL_TEST_NODES:-([\d ]+)\}/)?.[1]?.split(" ") ?? [];
    expect([...tested].sort()).toEqual([...claimed].sort());
    const ci = readFileSync(join(root, ".ci", "run"), "utf8");
    const reported = ci.match(/const versions = \[([^\]]*)\]/)?.[1]?.match(/\d+/g) ?? [];
    expect([...reported].sort()).toEqual([...claimed].sort());
  });
});
