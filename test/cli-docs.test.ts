/**
 * docs/cli.md's command table lists every command the binary has, and what each needs installed; its
 * Store URLs name every kind of store the CLI opens, and what it says of SQLite holds (that the record
 * commands need no better-sqlite3 is run on the built binary, in test/cli-bin.test.ts).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { buildProgram } from "../src/cli/main.js";
import { storeOpeners } from "../src/cli/store-url.js";

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

describe("docs/cli.md on stores", () => {
  const section = (title: string) => {
    const start = doc.indexOf(`\n## ${title}\n`);
    return doc.slice(start, doc.indexOf("\n## ", start + 1));
  };

  it("lists every kind of store URL the CLI opens under Store URLs, dynamodb:// among them", () => {
    const urls = section("Store URLs");
    for (const kind of Object.keys(storeOpeners)) expect(urls, kind).toContain(`\`${kind}://`);
    expect(urls).toContain("`dynamodb://table?region=eu-west-1`");
  });

  it("names each store's driver, and nothing for sqlite:// (node:sqlite, no better-sqlite3)", () => {
    const drivers = doc.slice(
      doc.indexOf("The store's driver is"),
      doc.indexOf("## What every command shares"),
    );
    expect(drivers.replace(/\s+/g, " ")).toContain(
      "The store's driver is nothing for `sqlite://` (on Node 22 and 24 every command opens SQLite with " +
        "Node's built-in `node:sqlite`; better-sqlite3 is not needed), `pg` for `postgres://`, `ioredis` " +
        "for `redis://` and `@aws-sdk/client-dynamodb` for `dynamodb://`.",
    );
    for (const command of ["proxy", "inspect", "purge", "reconcile"]) {
      const needs = rows.find((cells) => cells[1]?.includes(`[\`${command}\`]`))?.[3] ?? "";
      expect(needs, command).toContain("the store's driver (see below)");
    }
  });

  it("documents purge --dry-run, purge on Redis and --version", () => {
    const purge = section("inspect / purge / reconcile");
    expect(purge).toContain("`--dry-run` removes nothing");
    expect(purge).toContain("On Redis there is nothing to purge");
    expect(doc).toContain("**`--version`** (or `-V`)");
  });
});
