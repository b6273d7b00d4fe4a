/** `idempotool purge` through the built binary: only expired records go, batch by batch. */
import { beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, idempotool } from "./fixtures/cli-binary.js";
import { seededSqlite } from "./fixtures/reconcile-seed.js";

beforeAll(async () => {
  await ensureBuilt();
}, 200_000);

describe("idempotool purge", () => {
  it("removes the expired records in batches, with a line per batch when piped, and keeps the live ones", async () => {
    const { url } = await seededSqlite({ expired: 25 });
    const { code, stdout, stderr } = await idempotool(["purge", "--store", url, "--batch", "10"]);
    expect(code).toBe(0);
    expect(stdout).toContain("25 expired records removed in 4 batches");
    expect(stderr.trim().split("\n")).toEqual([
      "purge: batch 1 removed 10 (10 in all)",
      "purge: batch 2 removed 10 (20 in all)",
      "purge: batch 3 removed 5 (25 in all)",
      "purge: batch 4 removed 0 (25 in all)",
    ]);
    const left = await idempotool(["inspect", "list", "--store", url, "--json"]);
    expect(JSON.parse(left.stdout)).toHaveLength(7);
    const again = await idempotool(["purge", "--store", url, "--json"]);
    expect(JSON.parse(again.stdout)).toEqual({ deleted: 0, batches: 1 });
  });

  it("answers an unreachable store with one line and exit 2", async () => {
    const { code, stderr } = await idempotool(["purge", "--store", "sqlite:///no/such/dir/x.db"]);
    expect(code).toBe(2);
    expect(stderr.trim().split("\n")).toHaveLength(1);
  });

  it("has help with examples", async () => {
    const { stdout } = await idempotool(["purge", "--help"]);
    expect(stdout).toContain("Examples:");
  });
});
