/** The MCP client example runs as users would run it, checks itself, and exits 0. */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");

it("runs examples/mcp-client-retries.ts: lost replies retried under one key, one invoice per call, exit 0", async () => {
  // execFile rejects on a non-zero exit, so reaching the assertions means the example exited 0.
  const { stdout } = await run(process.execPath, ["--import", "tsx", "examples/mcp-client-retries.ts"], {
    cwd: root,
  });
  expect(stdout).toContain("call 2 (2 replies lost, 3 requests so far): Invoice #2 sent to Globex.");
  expect(stdout).toContain("call 3 (every reply lost): Outcome unknown");
  expect(stdout).toContain("OK: 8 requests, 3 invoices, one per logical call.");
}, 90_000);
