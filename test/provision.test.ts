/**
 * scripts/provision.sh, which `npm run test:all` runs first: on a machine without spin (and not allowed to
 * install it), it stops at once with one line naming what is missing and how to get it, instead of a test
 * failing deep inside the run; with everything there, it says nothing and lets the run go on.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const script = join(import.meta.dirname, "../scripts/provision.sh");
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A PATH holding only what the script calls, found on this machine's PATH, less the commands in `without`. */
async function pathWithout(without: readonly string[]): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "idempotool-provision-"));
  dirs.push(dir);
  const wanted = [
    "bash",
    "env",
    "id",
    "seq",
    "sleep",
    "ls",
    "head",
    "pg_isready",
    "redis-cli",
    "mysqladmin",
    "mysql",
    "cc",
    "gcc",
    "spin",
    "chromium",
  ];
  for (const command of wanted.filter((name) => !without.includes(name))) {
    const { stdout } = await run("bash", ["-c", `command -v ${command}`]);
    symlinkSync(stdout.trim(), join(dir, command));
  }
  return dir;
}

async function provision(path: string) {
  return run(join(path, "bash"), [script], { env: { PATH: path, IDEMPOTOOL_NO_INSTALL: "1" } }).then(
    ({ stderr }) => ({ code: 0, stderr }),
    (error: { code: number; stderr: string }) => ({ code: error.code, stderr: error.stderr }),
  );
}

describe("scripts/provision.sh", () => {
  it("passes quietly when spin, a compiler, Chromium, PostgreSQL, MariaDB and Redis are there", async () => {
    expect(await provision(await pathWithout([]))).toEqual({ code: 0, stderr: "" });
  });

  it("stops with one line naming spin and how to install it, when spin is missing and may not be installed", async () => {
    const { code, stderr } = await provision(await pathWithout(["spin"]));
    expect(code).toBe(1);
    expect(stderr.trim().split("\n")).toEqual([
      "test:all: missing spin: install spin (Debian/Ubuntu: apt-get install spin; macOS: brew install spin)",
    ]);
  });
});
