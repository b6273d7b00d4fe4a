/** docs/cli.md's command table lists every command the binary has, and what each needs installed. */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { buildProgram } from "../src/cli/main.js";

const doc = readFileSync(join(import.meta.dirname, "..", "docs", "cli.md"), "utf8");
const commandTable = doc.slice(doc.indexOf("| command"), doc.indexOf("\n\n", doc.indexOf("| command")));
const rows = commandTable
  .split("\n")
  .slice(2)
  .map((row) => row.split("|").map((cell) => cell.trim()));

describe("docs/cli.md", () => {
  it("lists every command in its command table, and no command as coming", () => {
    const program = buildProgram({
      io: { stdout: process.stdout, stderr: process.stderr },
      setExitCode() {},
    });
    const documented = rows.map((cells) => /\[`(\w+)`\]/.exec(cells[1] ?? "")?.[1]);
    expect(documented.sort()).toEqual(program.commands.map((c) => c.name()).sort());
    expect(doc).not.toMatch(/are coming/);
  });

  it("says what demo and chaos need installed: nothing compiled for SQLite, tsx for a TypeScript module", () => {
    const needs = (command: string) =>
      rows.find((cells) => cells[1]?.includes(`[\`${command}\`]`))?.[3] ?? "";
    for (const command of ["demo", "chaos"]) {
      expect(needs(command)).toContain("nothing for SQLite");
      expect(needs(command)).not.toContain("better-sqlite3");
    }
    expect(needs("chaos")).toContain("tsx");
  });
});
