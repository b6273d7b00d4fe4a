import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { pragma, storeSqliteDrivers } from "../../test/fixtures/sqlite-drivers.js";
import { isIdempotencyError } from "../core/errors.js";
import { openSqliteFile, withoutSqliteExperimentalWarning } from "./open-sqlite-file.js";

const directories: string[] = [];
afterEach(() => {
  for (const directory of directories.splice(0)) fs.rmSync(directory, { recursive: true, force: true });
});

function tempDirectory(): string {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "idempotool-open-"));
  directories.push(directory);
  return directory;
}

for (const driver of storeSqliteDrivers) {
  describe(`openSqliteFile (${driver.name})`, () => {
    it("opens only a file that exists when told it must, even one with % and spaces in its name", () => {
      const file = path.join(tempDirectory(), "100% my records.db");
      const options = { driver: driver.name, mustExist: true, busyTimeoutMs: 2, caller: "test" } as const;
      expect(() => openSqliteFile(file, options)).toThrow();
      expect(fs.existsSync(file)).toBe(false);

      const created = openSqliteFile(file, { ...options, mustExist: false });
      expect(created.driver).toBe(driver.name);
      created.database.exec("CREATE TABLE t (x)");
      created.database.close();
      const opened = openSqliteFile(file, options);
      expect(opened.database.prepare("SELECT name FROM sqlite_master").all()).toEqual([{ name: "t" }]);
      expect(pragma(opened.database, "busy_timeout")).toBe(2);
      opened.database.close();
    });
  });
}

describe("openSqliteFile", () => {
  it("refuses a driver it does not know, naming the choices", () => {
    let thrown: unknown;
    try {
      openSqliteFile(":memory:", { driver: "sqlite3" as "node:sqlite", busyTimeoutMs: 2, caller: "test" });
    } catch (error) {
      thrown = error;
    }
    expect(isIdempotencyError(thrown, "invalid_options")).toBe(true);
    expect((thrown as Error).message).toContain('"node:sqlite", "bun:sqlite", "better-sqlite3" or "libsql"');
  });
});

describe("loading node:sqlite", () => {
  it("drops Node 22's warning that SQLite is experimental, and passes every other warning on", () => {
    const seen: string[] = [];
    const emitWarning = process.emitWarning;
    // Stands in for Node's emitter, so the test records what reaches it and prints nothing.
    process.emitWarning = ((warning: string, type?: string | { type?: string }) => {
      seen.push(`${typeof type === "string" ? type : type?.type}: ${warning}`);
    }) as typeof process.emitWarning;
    try {
      const loaded = withoutSqliteExperimentalWarning(() => {
        // What Node 22 emits while node:sqlite loads, and warnings that are not it.
        process.emitWarning(
          "SQLite is an experimental feature and might change at any time",
          "ExperimentalWarning",
        );
        process.emitWarning("SQLite is an experimental feature", { type: "ExperimentalWarning" });
        process.emitWarning("VM Modules is an experimental feature", "ExperimentalWarning");
        process.emitWarning("SQLite file is large", "Warning");
        return "module";
      });
      expect(loaded).toBe("module");
      process.emitWarning("SQLite is an experimental feature", "ExperimentalWarning");
    } finally {
      process.emitWarning = emitWarning;
    }
    expect(seen).toEqual([
      "ExperimentalWarning: VM Modules is an experimental feature",
      "Warning: SQLite file is large",
      "ExperimentalWarning: SQLite is an experimental feature",
    ]);
  });
});

describe("a path on a Node where neither driver loads", () => {
  it("is refused with invalid_options, saying how to get a driver and why each failed", async () => {
    const fixtures = path.join(import.meta.dirname, "..", "..", "test", "fixtures");
    const { stdout } = await promisify(execFile)(process.execPath, [
      "--require",
      path.join(fixtures, "without-sqlite-drivers.cjs"),
      "--import",
      "tsx",
      path.join(fixtures, "sqlite-open-path.ts"),
    ]);
    const outcome = JSON.parse(stdout) as { code?: string; message: string; causes: string[] };
    expect(outcome.code).toBe("invalid_options");
    expect(outcome.message).toMatch(/^sqliteStore\(\{ path \}\) needs a SQLite driver/);
    expect(outcome.message).toContain("Node 24");
    expect(outcome.message).toContain("install better-sqlite3 beside idempotool: npm install better-sqlite3");
    expect(outcome.message).toContain("{ database }");
    expect(outcome.causes).toEqual([
      "Cannot find module 'node:sqlite'",
      "Cannot find module 'better-sqlite3'",
    ]);
  });
});
