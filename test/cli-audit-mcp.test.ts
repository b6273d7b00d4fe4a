/**
 * `idempotool audit --mcp`, in this process, against real MCP servers from npm
 * (@modelcontextprotocol/server-memory) and commands that fail: the command starts each server over stdio
 * itself, which is what these tests are about.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuditReport } from "../src/audit/index.js";
import { cli, root } from "./fixtures/cli-binary.js";

const memoryServer = join(root, "node_modules", ".bin", "mcp-server-memory");
let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "idempotool-cli-audit-mcp-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function auditJson(args: readonly string[]) {
  const result = await cli(["audit", ...args, "--json"]);
  return { ...result, report: JSON.parse(result.stdout) as AuditReport & { source: string } };
}

const byName = (report: AuditReport) => Object.fromEntries(report.tools.map((t) => [t.name, t]));

describe("idempotool audit --mcp (a real MCP server over stdio)", () => {
  const mcp = () => `MEMORY_FILE_PATH=${join(dir, "memory.jsonl")} ${memoryServer}`;

  it("lists @modelcontextprotocol/server-memory's tools and classifies them", async () => {
    const { code, report } = await auditJson(["--mcp", mcp()]);
    expect(code).toBe(1);
    expect(report.source).toMatch(/memory-server .* over stdio/);
    const tools = byName(report);
    expect(Object.keys(tools).sort()).toEqual([
      "add_observations",
      "create_entities",
      "create_relations",
      "delete_entities",
      "delete_observations",
      "delete_relations",
      "open_nodes",
      "read_graph",
      "search_nodes",
    ]);
    for (const name of ["create_entities", "create_relations", "add_observations"]) {
      expect(tools[name], name).toMatchObject({ class: "side-effectful", key: null, verdict: "fail" });
      expect(tools[name]?.recommendations[0]?.mechanism).toBe("OP-7");
    }
    // Annotated idempotentHint: true: a claim, so a warning rather than a pass or a failure.
    for (const name of ["delete_entities", "delete_observations", "delete_relations"]) {
      expect(tools[name], name).toMatchObject({
        class: "side-effectful",
        declaredIdempotent: true,
        verdict: "warn",
      });
    }
    for (const name of ["read_graph", "search_nodes", "open_nodes"]) {
      expect(tools[name], name).toMatchObject({ class: "read-only", verdict: "ok" });
      expect(tools[name]?.signals[0]?.detail).toContain("readOnlyHint: true");
    }
  }, 60_000);

  it("ends by suggesting idempotool proxy, with the server's own command, to one who did not write it", async () => {
    const memoryFile = join(dir, "my memory.jsonl");
    const { code, stdout } = await cli([
      "audit",
      "--mcp",
      `MEMORY_FILE_PATH='${memoryFile}' ${memoryServer}`,
    ]);
    expect(code).toBe(1);
    expect(stdout.trimEnd().split("\n").slice(-3)).toEqual([
      "",
      "Did not write this server? Run it behind the proxy: it gives the 6 tools without a key a required " +
        "idempotency_key and dedupes on it, with no change to the server (docs/proxy.md):",
      `  $ MEMORY_FILE_PATH='${memoryFile}' idempotool proxy -- ${memoryServer}`,
    ]);
  }, 60_000);

  it("passes once the three tools without a key are ignored, and fails again under --strict", async () => {
    const ignore = ["--ignore", "create_entities,create_relations", "--ignore", "add_observations"];
    expect((await cli(["audit", "--mcp", mcp(), ...ignore])).code).toBe(0);
    expect((await cli(["audit", "--mcp", mcp(), ...ignore, "--strict"])).code).toBe(1);
  }, 90_000);
});

describe("idempotool audit --mcp when it cannot run: one line, exit 2", () => {
  const oneLine = (stderr: string) => {
    expect(stderr.trim().split("\n")).toHaveLength(1);
    expect(stderr).not.toMatch(/\n\s+at /);
  };

  it("an MCP command that does not exist, or a server that exits at once", async () => {
    const missing = await cli(["audit", "--mcp", "no-such-mcp-server-xyz --stdio"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("the command was not found");
    oneLine(missing.stderr);
    const exits = await cli(["audit", "--mcp", `${process.execPath} -e "process.exit(3)"`]);
    expect(exits.code).toBe(2);
    expect(exits.stderr).toContain("exited before answering");
    oneLine(exits.stderr);
  }, 60_000);

  it("a server that never answers, past --timeout", async () => {
    const { code, stderr } = await cli([
      "audit",
      "--mcp",
      `${process.execPath} -e "setTimeout(() => {}, 60000)"`,
      "--timeout",
      "500",
    ]);
    expect(code).toBe(2);
    expect(stderr).toContain("did not answer in time");
  }, 60_000);

  it("prints the stack and its causes with --debug", async () => {
    const { code, stderr } = await cli(["--debug", "audit", "--mcp", "no-such-mcp-server-xyz"]);
    expect(code).toBe(2);
    expect(stderr).toMatch(/\n\s+at /);
    expect(stderr).toContain("Caused by:");
  });
});
