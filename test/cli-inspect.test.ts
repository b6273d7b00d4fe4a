/** `idempotool inspect` in this process, on a seeded SQLite store (test/cli-bin.test.ts spawns the built binary). */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { sqliteStore } from "../src/sqlite/index.js";
import { ansi, cli } from "./fixtures/cli-binary.js";
import { seededSqlite, seedRecord } from "./fixtures/reconcile-seed.js";

const DAY = 86_400_000;

let url = "";
beforeAll(async () => {
  url = (await seededSqlite()).url;
});

describe("idempotool inspect", () => {
  it("lists every record as a plain table without colour when piped", async () => {
    const { code, stdout } = await cli(["inspect", "list", "--store", url]);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^scope\s+key\s+tool\s+status/);
    expect(stdout).toContain("turn-4-stale");
    expect(stdout).toContain("stale: lease passed");
    expect(stdout).toContain("7 records");
    expect(stdout).not.toMatch(ansi);
  });

  it("filters by tool, status, scope, key prefix and age, as JSON", async () => {
    const json = async (...args: string[]) => {
      const { code, stdout } = await cli(["inspect", "list", "--store", url, "--json", ...args]);
      expect(code).toBe(0);
      return (JSON.parse(stdout) as { key: string }[]).map((r) => r.key).sort();
    };
    expect(await json("--tool", "charge_card")).toEqual(["order-9"]);
    expect(await json("--status", "unknown")).toEqual(["turn-3-carol"]);
    expect(await json("--scope", "tenant-b")).toEqual(["order-9"]);
    expect(await json("--key-prefix", "turn-2")).toEqual(["turn-2-bob"]);
    expect(await json("--older-than", "2d")).toEqual(["turn-0-old"]);
  });

  it("shows one record with its result parsed", async () => {
    const { code, stdout } = await cli([
      "inspect",
      "show",
      "default",
      "turn-1-alice",
      "--store",
      url,
      "--json",
    ]);
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({
      status: "completed",
      result: { messageId: "m-turn-1-alice" },
    });
    const missing = await cli(["inspect", "show", "default", "nope", "--store", url]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no live record for key "nope"');
  });

  it("colours statuses on a terminal only", async () => {
    const { stdout } = await cli(["inspect", "list", "--store", url], { env: { FORCE_COLOR: "1" } });
    expect(stdout).toMatch(ansi);
  });

  it("answers a bad URL, a missing store and a bad age with one line and exit 2", async () => {
    for (const args of [
      ["--store", "mysql://db/x"],
      ["--store", "sqlite:///nowhere/at/all.db"],
      ["--store", url, "--older-than", "soon"],
      ["--store", "postgres://127.0.0.1:1/none"],
    ]) {
      const { code, stderr } = await cli(["inspect", "list", ...args]);
      expect(code, args.join(" ")).toBe(2);
      expect(stderr, args.join(" ")).not.toMatch(/\n\s+at /);
    }
  });

  it("shows an expired record as expired, whatever its status", async () => {
    const path = join(mkdtempSync(join(tmpdir(), "idempotool-cli-expired-")), "records.db");
    const store = sqliteStore({ path });
    const now = Date.now();
    const twoDaysAgo = now - 2 * DAY;
    await seedRecord(store, { key: "gone-unknown", status: "unknown", now: twoDaysAgo, ttlMs: DAY });
    await seedRecord(store, { key: "gone-completed", status: "completed", now: twoDaysAgo, ttlMs: DAY });
    await seedRecord(store, { key: "live-unknown", status: "unknown", now });
    await store.close();
    const { code, stdout } = await cli(["inspect", "list", "--store", `sqlite://${path}`]);
    expect(code).toBe(0);
    const row = (key: string) => stdout.split("\n").find((line) => line.includes(key)) ?? "";
    expect(row("gone-unknown")).toMatch(/expired 1d ago; purge removes it$/);
    expect(row("gone-completed")).toMatch(/expired 1d ago; purge removes it$/);
    expect(row("live-unknown")).toMatch(/needs a verify hook or an operator$/);
  });

  it("says in its help the order the list really has: by scope, then key, not by age", async () => {
    const help = (await cli(["inspect", "list", "--help"])).stdout;
    expect(help).toContain("List records in order of scope, then key (not by age), as a table or JSON");
    expect(help).toMatch(/--limit <n>\s+at most this many records, the first in that order/);
    expect(help).not.toMatch(/newest/);
    const { stdout } = await cli(["inspect", "list", "--store", url, "--json"]);
    const listed = (JSON.parse(stdout) as { scope: string; key: string; createdAt: string }[]).map(
      ({ scope, key }) => [scope, key],
    );
    const byScopeThenKey = [...listed].sort(([s1, k1], [s2, k2]) =>
      s1! < s2! ? -1 : s1! > s2! ? 1 : k1! < k2! ? -1 : k1! > k2! ? 1 : 0,
    );
    expect(listed).toEqual(byScopeThenKey);
    // Not by age: the oldest record (turn-0-old, 3 days) comes before newer ones, and turn-1-alice (now)
    // before the older turn-4-stale (2 minutes).
    const keys = listed.map(([, key]) => key);
    expect(keys.indexOf("turn-0-old")).toBeLessThan(keys.indexOf("turn-1-alice"));
    expect(keys.indexOf("turn-1-alice")).toBeLessThan(keys.indexOf("turn-4-stale"));
    const limited = JSON.parse(
      (await cli(["inspect", "list", "--store", url, "--json", "--limit", "2"])).stdout,
    );
    expect(limited.map((r: { key: string }) => r.key)).toEqual(keys.slice(0, 2));
  });

  it("has help with examples", async () => {
    const { code, stdout } = await cli(["inspect", "list", "--help"]);
    expect(code).toBe(0);
    expect(stdout).toContain("Examples:");
    expect(stdout).toContain("--older-than");
  });
});
