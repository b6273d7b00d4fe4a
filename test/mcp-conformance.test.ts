/**
 * The MCP project's own conformance suite (`@modelcontextprotocol/conformance`, every server scenario)
 * against a plain server (test/fixtures/conformance-server.ts) directly, then against `idempotool proxy`
 * in front of it, every tool guarded (`--tool <name>=irreversible`; by their names and descriptions it
 * would pass most through): the proxy changes no check. Over `--http` and over stdio (the suite speaks HTTP
 * only, so a small front serves the stdio proxy over HTTP, one process per session), with calls without a
 * key keyed by their arguments (`--without-key`), so every call runs through the guard; and with keys
 * required, where the scenarios that call a tool without one fail by design, as the expected-failures file
 * lists.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { sqliteStore } from "../src/sqlite/index.js";
import { bin, ensureBuilt, root } from "./fixtures/cli-binary.js";

const fixtures = join(root, "test", "fixtures");
const server = [join(fixtures, "conformance-server.ts")];
const suite = join(root, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js");

/** The fixture's tools the scenarios call (json_schema_2020_12_tool is only listed). */
const calledTools = [
  "test_simple_text",
  "test_image_content",
  "test_audio_content",
  "test_embedded_resource",
  "test_multiple_content_types",
  "test_tool_with_logging",
  "test_error_handling",
  "test_tool_with_progress",
  "test_sampling",
  "test_elicitation",
  "test_elicitation_sep1034_defaults",
  "test_elicitation_sep1330_enums",
  "test_reconnection",
];
/** Every tool of the fixture guarded by the proxy as an irreversible action. */
const guardEveryTool = [...calledTools, "json_schema_2020_12_tool"].flatMap((tool) => [
  "--tool",
  `${tool}=irreversible`,
]);

/**
 * The scenarios that call a tool without a key and fail when it is refused. Two more call one
 * (`tools-call-simple-text`, `tools-call-error`) but pass on any text answer, the refusal's included.
 */
const refusedWithoutKey = [
  "tools-call-image",
  "tools-call-audio",
  "tools-call-embedded-resource",
  "tools-call-mixed-content",
  "tools-call-with-logging",
  "tools-call-with-progress",
  "tools-call-sampling",
  "tools-call-elicitation",
  "elicitation-sep1034-defaults",
  "server-sse-polling",
  "elicitation-sep1330-enums",
];

let dir: string;
const running: ChildProcess[] = [];
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "idempotool-conformance-"));
  await ensureBuilt();
}, 180_000);
afterEach(() => {
  for (const child of running.splice(0)) child.kill("SIGKILL");
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Start `args` under this Node; resolves with the MCP URL it names on stderr once it listens. */
function serve(args: readonly string[]): Promise<string> {
  const child = spawn(process.execPath, [...args], { cwd: root, stdio: ["ignore", "ignore", "pipe"] });
  running.push(child);
  let stderr = "";
  return new Promise((resolve, reject) => {
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
      const url = /(http:\/\/127\.0\.0\.1:\d+\/mcp)/.exec(stderr)?.[1];
      if (url !== undefined) resolve(url);
    });
    child.on("exit", (code) =>
      reject(new Error(`${args.join(" ")} exited (${code}) before listening:\n${stderr}`)),
    );
  });
}

/** The proxy's command line from the built binary, with its own store. */
function proxy(name: string, options: readonly string[]): string[] {
  const store = `sqlite://${join(dir, `${name}.db`)}`;
  return [bin, "proxy", "--store", store, ...guardEveryTool, ...options, "--", process.execPath, ...server];
}

/** The tools whose calls the proxy ran through its guard and recorded in `name`'s store, keyed by their arguments. */
async function guardedRuns(name: string): Promise<string[]> {
  const store = sqliteStore({ path: join(dir, `${name}.db`) });
  try {
    const { records } = await store.list({ keyPrefix: "~args~", limit: 1_000 });
    return [
      ...new Set(records.filter((record) => record.status === "completed").map((record) => record.tool)),
    ].sort();
  } finally {
    await store.close();
  }
}

/** Every server scenario against `url`; the tally the suite prints, and its exit code. */
async function conformance(url: string, expectedFailures: readonly string[] = []) {
  const work = mkdtempSync(join(dir, "run-"));
  const args = [suite, "server", "--url", url, "--suite", "all"];
  if (expectedFailures.length > 0) {
    const file = join(work, "expected-failures.yml");
    writeFileSync(file, `server:\n${expectedFailures.map((name) => `  - ${name}\n`).join("")}`);
    args.push("--expected-failures", file);
  }
  // The suite writes its results where it runs.
  const child = spawn(process.execPath, args, { cwd: work, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  const tally = /Total: (\d+) passed, (\d+) failed/.exec(output);
  if (tally === null) throw new Error(`the conformance suite printed no tally (exit ${code}):\n${output}`);
  return { code, passed: Number(tally[1]), failed: Number(tally[2]), output };
}

describe("the MCP conformance suite", () => {
  let direct: Awaited<ReturnType<typeof conformance>>;
  beforeAll(async () => {
    direct = await conformance(await serve([...server, "--http", "0"]));
  }, 60_000);

  it("passes every check against the plain server", () => {
    expect(direct.failed, direct.output).toBe(0);
    expect(direct.code, direct.output).toBe(0);
    expect(direct.passed).toBeGreaterThanOrEqual(44);
  });

  it("passes the same checks through idempotool proxy --http", async () => {
    // Each scenario opens a session (a copy of the server) and leaves it open: room for all of them.
    const url = await serve(proxy("http", ["--http", "0", "--max-sessions", "64", "--without-key", "60000"]));
    const run = await conformance(url);
    expect(run.failed, run.output).toBe(0);
    expect(run.passed, run.output).toBe(direct.passed);
    expect(run.code, run.output).toBe(0);
    // Every call went through the guard, and its outcome was recorded.
    expect(await guardedRuns("http")).toEqual([...calledTools].sort());
  }, 180_000);

  it("passes the same checks through idempotool proxy on stdio", async () => {
    const front = join(fixtures, "stdio-over-http.ts");
    const url = await serve([front, process.execPath, ...proxy("stdio", ["--without-key", "60000"])]);
    const run = await conformance(url);
    expect(run.failed, run.output).toBe(0);
    expect(run.passed, run.output).toBe(direct.passed);
    expect(run.code, run.output).toBe(0);
    expect(await guardedRuns("stdio")).toEqual([...calledTools].sort());
    // Every scenario starts a proxy and a server of its own: 160-180 s when the suite runs beside it.
  }, 420_000);

  it("with keys required, fails exactly the scenarios that call a guarded tool without one", async () => {
    const url = await serve(proxy("keyed", ["--http", "0", "--max-sessions", "64"]));
    // Exit 0 only when every listed scenario fails and no other does (a listed one that passes is stale).
    const run = await conformance(url, refusedWithoutKey);
    expect(run.code, run.output).toBe(0);
    expect(run.failed).toBeGreaterThanOrEqual(refusedWithoutKey.length);
  }, 180_000);
});
