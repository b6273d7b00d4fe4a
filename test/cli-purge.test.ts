/**
 * `idempotool purge`, in this process: only expired records go, batch by batch; `--dry-run` counts them and
 * removes none, and on Redis purge says Redis expires records itself (test/cli-bin.test.ts spawns the built
 * binary).
 */
import { describe, expect, it } from "vitest";
import { redisExpiresItself } from "../src/cli/purge-command.js";
import { cli } from "./fixtures/cli-binary.js";
import { seededSqlite } from "./fixtures/reconcile-seed.js";

describe("idempotool purge", () => {
  it("removes the expired records in batches, with a line per batch when piped, and keeps the live ones", async () => {
    const { url } = await seededSqlite({ expired: 25 });
    const { code, stdout, stderr } = await cli(["purge", "--store", url, "--batch", "10"]);
    expect(code).toBe(0);
    expect(stdout).toContain("25 expired records removed in 4 batches");
    expect(stderr.trim().split("\n")).toEqual([
      "purge: batch 1 removed 10 (10 in all)",
      "purge: batch 2 removed 10 (20 in all)",
      "purge: batch 3 removed 5 (25 in all)",
      "purge: batch 4 removed 0 (25 in all)",
    ]);
    const left = await cli(["inspect", "list", "--store", url, "--json"]);
    expect(JSON.parse(left.stdout)).toHaveLength(7);
    const again = await cli(["purge", "--store", url, "--json"]);
    expect(JSON.parse(again.stdout)).toEqual({ deleted: 0, batches: 1 });
  });

  it("answers an unreachable store with one line and exit 2", async () => {
    const { code, stderr } = await cli(["purge", "--store", "sqlite:///no/such/dir/x.db"]);
    expect(code).toBe(2);
    expect(stderr.trim().split("\n")).toHaveLength(1);
  });

  it("has help with examples", async () => {
    const { stdout } = await cli(["purge", "--help"]);
    expect(stdout).toContain("Examples:");
  });
});

describe("idempotool purge --dry-run", () => {
  it("counts the expired records that would go, and removes none", async () => {
    const { url } = await seededSqlite({ expired: 25 });
    const records = async () => JSON.parse((await cli(["inspect", "list", "--store", url, "--json"])).stdout);
    expect(await records()).toHaveLength(32);

    const { code, stdout, stderr } = await cli(["purge", "--store", url, "--dry-run"]);
    expect(code, stderr).toBe(0);
    expect(stdout).toBe(
      "dry run, nothing removed (run without --dry-run to remove): 25 expired records would be removed\n",
    );
    expect(stderr).toBe("purge --dry-run: read 32 records, 25 expired\n");
    const json = await cli(["purge", "--store", url, "--dry-run", "--json", "--batch", "10"]);
    expect(JSON.parse(json.stdout)).toEqual({ dryRun: true, expired: 25 });
    expect(await records()).toHaveLength(32);

    // What the dry run counted is what purge then removes.
    const purged = await cli(["purge", "--store", url, "--json"]);
    expect(JSON.parse(purged.stdout)).toMatchObject({ deleted: 25 });
    expect(JSON.parse((await cli(["purge", "--store", url, "--dry-run", "--json"])).stdout)).toEqual({
      dryRun: true,
      expired: 0,
    });
  });

  it("is listed in the help", async () => {
    expect((await cli(["purge", "--help"])).stdout).toMatch(/--dry-run\s+count the expired records/);
  });
});

describe("idempotool purge on Redis", () => {
  // Port 1: nothing listens there, so a purge that tried to reach the server would fail with exit 2.
  const url = "redis://127.0.0.1:1?prefix=agents%3A";

  it("says Redis expires records itself and there is nothing to purge, and exits 0", async () => {
    for (const args of [[], ["--dry-run"]]) {
      const { code, stdout, stderr } = await cli(["purge", "--store", url, ...args]);
      expect({ code, stdout, stderr }, args.join(" ")).toEqual({
        code: 0,
        stdout: `${redisExpiresItself}\n`,
        stderr: "",
      });
    }
    expect(redisExpiresItself).toMatch(/^Redis expires records itself.* There is nothing to purge\.$/);
  });

  it("says so in the JSON too, with nothing removed or counted", async () => {
    const purge = await cli(["purge", "--store", url, "--json"]);
    expect(purge.code).toBe(0);
    expect(JSON.parse(purge.stdout)).toEqual({ deleted: 0, batches: 0, note: redisExpiresItself });
    const dryRun = await cli(["purge", "--store", url, "--json", "--dry-run"]);
    expect(JSON.parse(dryRun.stdout)).toEqual({ dryRun: true, expired: 0, note: redisExpiresItself });
  });

  it("still refuses an option Redis does not take", async () => {
    const { code, stderr } = await cli(["purge", "--store", url, "--table", "records"]);
    expect(code).toBe(2);
    expect(stderr).toBe(
      "idempotool: --table is for SQLite, PostgreSQL and DynamoDB; Redis takes --prefix; see idempotool purge --help\n",
    );
  });
});
