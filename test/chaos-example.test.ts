/** examples/chaos-send-email.ts runs as users would run it, checks itself, and exits 0. */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");

it("runs examples/chaos-send-email.ts: the naive tool sends twice per source, the wrapped one once", async () => {
  // execFile rejects on a non-zero exit, so reaching the assertions means the example exited 0.
  const { stdout } = await run(process.execPath, ["--import", "tsx", "examples/chaos-send-email.ts"], {
    cwd: root,
  });
  expect(stdout).toMatch(/SIGKILL after the effect, then a retry\s+2 email\(s\)\s+double_effect/);
  expect(stdout).toMatch(/SIGKILL after the effect, then a retry\s+1 email\(s\)\s+pass/);
  expect(stdout).toContain("the wrapped one sent once");
}, 120_000);
