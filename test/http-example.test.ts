/**
 * The HTTP example runs, checks itself and exits 0, as CI runs it.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");

it("examples/http-server-and-client.ts passes every check and exits 0", async () => {
  const { stdout } = await run(
    process.execPath,
    ["--import", "tsx", join("examples", "http-server-and-client.ts")],
    { cwd: root },
  );
  expect(stdout).toContain("the card was charged once");
  expect(stdout).toContain("All checks passed.");
  expect(stdout).not.toMatch(/^NO /m);
}, 60_000);
