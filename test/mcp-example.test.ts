/** The MCP example runs as users would run it, checks itself, and exits 0. */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");

it("runs examples/mcp-send-slack-message.ts: one Slack message per intent, exit 0", async () => {
  // execFile rejects on a non-zero exit, so reaching the assertions means the example exited 0.
  const { stdout } = await run(process.execPath, ["--import", "tsx", "examples/mcp-send-slack-message.ts"], {
    cwd: root,
  });
  expect(stdout).toContain("call 2 (transport retry, same key): Posted to #deploys (ts 1700000000.000001).");
  expect(stdout).toContain("This is a replay");
  expect(stdout).toContain("OK: 6 calls, 2 Slack messages, one per intent.");
}, 90_000);
