/** `idempotool reconcile` in this process: a dry run by default, `--apply` to act (test/cli-bin.test.ts spawns the built binary). */
import { mkdtempSync, writeFileSync } from "node:fs";
import module from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { cli } from "./fixtures/cli-binary.js";
import { seededSqlite } from "./fixtures/reconcile-seed.js";

const hooks = join(import.meta.dirname, "fixtures", "reconcile-hooks.mjs");

async function statusOf(url: string, key: string): Promise<string | undefined> {
  const { stdout } = await cli(["inspect", "list", "--store", url, "--json", "--key-prefix", key]);
  return (JSON.parse(stdout) as { status: string }[])[0]?.status;
}

describe("idempotool reconcile", () => {
  it("reports what it would do in a dry run, not what it did, and changes nothing", async () => {
    const { url } = await seededSqlite();
    const { code, stdout, stderr } = await cli(["reconcile", "--store", url, "--hooks", hooks]);
    expect(code).toBe(0);
    const row = (key: string) => stdout.split("\n").find((line) => line.includes(key)) ?? "";
    expect(row("turn-4-stale")).toMatch(/send_email\s+would settle completed\s+stale/);
    expect(row("turn-3-carol")).toMatch(/send_email\s+would release\s+recorded as unknown/);
    expect(stdout.trim().split("\n").at(-1)).toBe(
      "dry run, nothing changed (--apply to act): 2 examined; would settle 1 as completed, 0 as failed, " +
        "release 1, compensate 0; 0 need review, 0 skipped, 0 errors",
    );
    expect(stderr.trim().split("\n").sort()).toEqual([
      "reconcile (dry run): default/turn-3-carol (send_email): would release",
      "reconcile (dry run): default/turn-4-stale (send_email): would settle completed",
    ]);
    expect(stdout + stderr).not.toMatch(/\b(released|compensated)\b|: completed\b|\b1 completed\b/);
    expect(await statusOf(url, "turn-4-stale")).toBe("in_progress");
    expect(await statusOf(url, "turn-3-carol")).toBe("unknown");
  });

  it("says what it did with --apply", async () => {
    const { url } = await seededSqlite();
    const { code, stdout, stderr } = await cli(["reconcile", "--store", url, "--hooks", hooks, "--apply"]);
    expect(code).toBe(0);
    const row = (key: string) => stdout.split("\n").find((line) => line.includes(key)) ?? "";
    expect(row("turn-4-stale")).toMatch(/send_email\s+completed\s+stale/);
    expect(row("turn-3-carol")).toMatch(/send_email\s+released\s+recorded as unknown/);
    expect(stdout.trim().split("\n").at(-1)).toBe(
      "2 examined, 1 completed, 0 failed, 1 released, 0 compensated, 0 need review, 0 skipped, 0 errors",
    );
    expect(stderr).toContain("reconcile: default/turn-4-stale (send_email): completed");
    expect(await statusOf(url, "turn-4-stale")).toBe("completed");
  });

  it("settles and releases with --apply, and summarises as JSON", async () => {
    const { url } = await seededSqlite();
    const { code, stdout } = await cli(["reconcile", "--store", url, "--hooks", hooks, "--apply", "--json"]);
    expect(code).toBe(0);
    const summary = JSON.parse(stdout) as {
      dryRun: boolean;
      completed: number;
      released: number;
      decisions: unknown[];
    };
    expect(summary).toMatchObject({ dryRun: false, examined: 2, completed: 1, released: 1 });
    expect(await statusOf(url, "turn-4-stale")).toBe("completed");
    expect(await statusOf(url, "turn-3-carol")).toBeUndefined();
    expect(await statusOf(url, "turn-5-live")).toBe("in_progress");
  });

  it("exits 1 when records need review", async () => {
    const { url } = await seededSqlite();
    const { code, stdout } = await cli([
      "reconcile",
      "--store",
      url,
      "--hooks",
      hooks,
      "--tool",
      "charge_card",
    ]);
    expect(code).toBe(0);
    expect(stdout).toContain("0 examined");
    const other = await seededSqlite();
    const flagged = await cli([
      "reconcile",
      "--store",
      other.url,
      "--hooks",
      join(import.meta.dirname, "fixtures", "reconcile-hooks-unsure.mjs"),
    ]);
    expect(flagged.code).toBe(1);
    expect(flagged.stdout).toContain("2 need review");
  });

  it("answers a missing hooks module or a bad URL with one line and exit 2", async () => {
    const { url } = await seededSqlite();
    for (const args of [
      ["--store", url, "--hooks", "./no-such-hooks.mjs"],
      ["--store", "redis//nope", "--hooks", hooks],
    ]) {
      const { code, stderr } = await cli(["reconcile", ...args]);
      expect(code).toBe(2);
      expect(stderr.trim().split("\n")).toHaveLength(1);
    }
  });

  it("registers tsx once for TypeScript hooks, however many runs in one process load them", async () => {
    const dir = mkdtempSync(join(tmpdir(), "idempotool-cli-ts-hooks-"));
    const tsHooks = join(dir, "hooks.ts");
    writeFileSync(
      tsHooks,
      'const notSent: { status: "not_executed" } = { status: "not_executed" };\n' +
        "export const tools = { send_email: { verify: () => notSent } };\n",
    );
    // tsx's register() adds its loader hooks to this process's chain, for good: through
    // module.registerHooks() where Node has it, else module.register().
    const spies = (["registerHooks", "register"] as const)
      .filter((name) => typeof module[name] === "function")
      .map((name) => vi.spyOn(module, name));
    try {
      for (let run = 0; run < 3; run++) {
        const { url } = await seededSqlite();
        const { code, stdout, stderr } = await cli(["reconcile", "--store", url, "--hooks", tsHooks]);
        expect(code, stderr).toBe(0);
        expect(stdout).toContain("2 examined");
      }
      expect(spies.reduce((calls, spy) => calls + spy.mock.calls.length, 0)).toBe(1);
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
  });

  it("has help with examples", async () => {
    const { stdout } = await cli(["reconcile", "--help"]);
    expect(stdout).toContain("Examples:");
    expect(stdout).toContain("--apply");
  });
});
