/** The Mastra example runs as users would run it, checks itself, and exits 0. */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");

it("runs examples/mastra-send-email.ts: one email per intent, the step's effects once over two resumes, exit 0", async () => {
  // execFile rejects on a non-zero exit, so reaching the assertions means the example exited 0.
  const { stdout } = await run(process.execPath, ["--import", "tsx", "examples/mastra-send-email.ts"], {
    cwd: root,
  });
  expect(stdout).toContain("run 1: 1 email for 2 calls; replays: ");
  expect(stdout).toContain("run 2: 2 emails (the user asked again)\n");
  expect(stdout).toContain("resume 1: sent; 4 emails in all\n");
  expect(stdout).toContain("resume 2: already sent; 4 emails in all\n");
  expect(stdout).toContain("OK: 3 send_email calls by the model, 2 emails;");
}, 90_000);
