/** The DBOS example runs against the PostgreSQL server, checks itself and exits 0, as CI runs it. */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { pgUrl } from "./fixtures/pg-helpers.js";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");

describe("examples/dbos-send-email.ts", () => {
  it("shows a retried plain step sending twice and a stepTool step sending once with the original id, and exits 0", async () => {
    // execFile rejects on a non-zero exit, so reaching the assertions means exit code 0.
    const { stdout } = await run(
      process.execPath,
      ["--import", "tsx", join(root, "examples/dbos-send-email.ts")],
      {
        cwd: root,
        env: { ...process.env, DATABASE_URL: pgUrl },
      },
    );
    expect(stdout).toContain("plain step, retried after a lost response: 2 emails, workflow returned msg-2");
    expect(stdout).toContain(
      "stepTool step, retried after a lost response: 1 email, workflow returned msg-1",
    );
    expect(stdout).toContain("a second workflow sends its own email under another key");
    expect(stdout).toContain("Every check holds");
  }, 60_000);
});
