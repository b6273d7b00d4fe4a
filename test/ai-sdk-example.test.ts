/** The AI SDK example runs as users would run it, checks itself, and exits 0. */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");

it("runs examples/ai-sdk-send-email.ts: one email per intent, exit 0", async () => {
  // execFile rejects on a non-zero exit, so reaching the assertions means the example exited 0.
  const { stdout } = await run(process.execPath, ["--import", "tsx", "examples/ai-sdk-send-email.ts"], {
    cwd: root,
  });
  expect(stdout).toContain("turn 1, call 1: msg-1\n");
  expect(stdout).toMatch(/turn 1, call 2: msg-1 \(replay: /);
  expect(stdout).toContain(
    "turn 2: msg-2; send_email ran now as a new request, but a similar send_email call",
  );
  expect(stdout).toContain("OK: 4 send_email calls over 2 turns, 2 emails, one per intent.");
}, 90_000);
