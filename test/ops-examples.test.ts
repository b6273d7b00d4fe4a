import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const run = promisify(execFile);

for (const example of ["op2-transaction.ts", "op3-content-addressed.ts"]) {
  it(`examples/${example} passes every check and exits 0`, async () => {
    const { stdout } = await run(process.execPath, ["--import", "tsx", join("examples", example)], {
      timeout: 30_000,
    });
    expect(stdout).not.toContain("FAIL");
    expect(stdout).toMatch(/^ok {3}/m);
  });
}
