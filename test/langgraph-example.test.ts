/** The LangGraph example runs, checks itself and exits 0, as CI runs it. */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");

describe("examples/langgraph-approval-email.ts", () => {
  it("shows each layer alone leaking and both together sending one approved email, and exits 0", async () => {
    // execFile rejects on a non-zero exit, so reaching the assertions means exit code 0.
    const { stdout } = await run(
      process.execPath,
      ["--import", "tsx", join(root, "examples/langgraph-approval-email.ts")],
      { cwd: root },
    );
    expect(stdout).toMatch(/topology only: .* 2 emails/);
    expect(stdout).toMatch(/dedup only: .* 2 emails/);
    expect(stdout).toMatch(/double-clicks approve: .* 1 email\n/);
    expect(stdout).toMatch(/crashes after sending; .* 1 email\n/);
    expect(stdout).toMatch(/edited after the approval: .* 0 emails/);
    expect(stdout).toContain("Every check holds");
  }, 60_000);
});
