/** The proxy example runs as users would run it, checks itself, and exits 0. */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");

it("runs examples/mcp-proxy-filesystem.ts: the re-sent edit lands twice without the proxy, once through it", async () => {
  // execFile rejects on a non-zero exit, so reaching the assertions means the example exited 0.
  const { stdout } = await run(process.execPath, ["--import", "tsx", "examples/mcp-proxy-filesystem.ts"], {
    cwd: root,
  });
  expect(stdout).toContain(
    "without the proxy, after a re-send:\n- [x] ship the proxy\n- [x] write the docs\n",
  );
  expect(stdout).toContain(
    "through the proxy, after a re-send:\n- [x] ship the proxy\n- [ ] write the docs\n",
  );
  expect(stdout).toContain("OK: one edit per intent through the proxy.");
}, 90_000);
