/** The OpenAI Agents SDK example runs as users would run it, checks itself, and exits 0. */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");

it("runs examples/openai-agents-send-email.ts: one email per intent, the approved one once, exit 0", async () => {
  // execFile rejects on a non-zero exit, so reaching the assertions means the example exited 0.
  const { stdout } = await run(
    process.execPath,
    ["--import", "tsx", "examples/openai-agents-send-email.ts"],
    {
      cwd: root,
    },
  );
  expect(stdout).toContain("run 1: 1 email for 2 calls; replays: ");
  expect(stdout).toContain("run 2: 2 emails (the user asked again)\n");
  expect(stdout).toContain("resume 2: sent; 3 emails in all\n");
  expect(stdout).toContain(
    "OK: 5 send_email calls, 3 emails, one per intent; the approved one once over two resumes.",
  );
}, 90_000);
