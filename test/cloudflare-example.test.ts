/**
 * The Cloudflare example runs as users would run it: examples/cloudflare-mcp.ts runs the Worker in
 * workerd and calls its tool from the MCP SDK's client, checks itself, and exits 0. The code that runs in
 * workerd type-checks against Cloudflare's types and the `agents` package's.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");

it("runs examples/cloudflare-mcp.ts: one Slack post over three MCP calls of one key, exit 0", async () => {
  // execFile rejects on a non-zero exit, so reaching the assertions means the example exited 0.
  const { stdout } = await run(process.execPath, ["--import", "tsx", "examples/cloudflare-mcp.ts"], {
    cwd: root,
  });
  expect(stdout).toContain("call 1: Posted to #deploys (ts 1700000000.000001).");
  expect(stdout).toMatch(/call 2 \(transport retry, same key\): .*This is a replay/);
  expect(stdout).toMatch(/call 3 \(new MCP session, same key\): .*This is a replay/);
  expect(stdout).toContain("OK: 3 calls over MCP, 1 Slack post.");
}, 120_000);

it("type-checks the code that runs in workerd against Cloudflare's types", async () => {
  const tsc = join(root, "node_modules/typescript/bin/tsc");
  for (const project of ["examples/cloudflare-mcp", "test/fixtures/cloudflare"]) {
    await run(process.execPath, [tsc, "-p", project, "--noEmit"], { cwd: root });
  }
}, 120_000);
