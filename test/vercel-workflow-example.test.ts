/**
 * The Vercel Workflow example runs on the SDK's real local runtime (its builder, its local world, its step
 * retries), checks itself and exits 0, as CI runs it.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");

describe("examples/vercel-workflow-send-email.ts", () => {
  // Compiling the workflows with the SDK's builder takes most of a minute on a busy machine.
  it("shows retried plain steps sending twice and stepTool steps sending once with the original ids, and exits 0", async () => {
    // execFile rejects on a non-zero exit, so reaching the assertions means exit code 0.
    const { stdout } = await run(
      process.execPath,
      ["--import", "tsx", join(root, "examples/vercel-workflow-send-email.ts")],
      { cwd: root, maxBuffer: 16 * 1024 * 1024 },
    );
    expect(stdout).toContain("plain steps, each retried once: 4 emails for 2 recipients");
    expect(stdout).toContain(
      "idempotool steps, each retried once: 2 emails for 2 recipients, original ids returned",
    );
    expect(stdout).toContain("a second run sends its own 2 emails under new keys");
    expect(stdout).toContain("Every check holds");
  }, 300_000);
});
