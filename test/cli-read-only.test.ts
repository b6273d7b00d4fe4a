/**
 * Read commands never write: `inspect` and a reconcile dry run against a missing SQLite file, a
 * misspelled table or an empty Redis prefix say so and exit 2, creating nothing. In this process, against
 * real PostgreSQL and Redis servers.
 */
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postgresStore } from "../src/postgres/index.js";
import { cli } from "./fixtures/cli-binary.js";
import { seededSqlite, seedRecord } from "./fixtures/reconcile-seed.js";

const hooks = join(import.meta.dirname, "fixtures", "reconcile-hooks.mjs");
const pool = new pg.Pool({ connectionString: "postgres://postgres@127.0.0.1:5432/test", max: 2 });
const table = `idempotool_cli_ro_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
const misspelled = `${table}_typo`;
const pgUrl = "postgres://postgres@127.0.0.1:5432/test";

let sqlite = { path: "", url: "" };
beforeAll(async () => {
  sqlite = await seededSqlite();
  await seedRecord(postgresStore({ client: pool, table }), {
    key: "turn-1",
    status: "completed",
    now: Date.now(),
  });
});

afterAll(async () => {
  await pool.query(`DROP TABLE IF EXISTS ${table}`);
  await pool.query(`DROP TABLE IF EXISTS ${misspelled}`);
  await pool.end();
});

function sqliteTables(path: string): string[] {
  const database = new Database(path, { readonly: true });
  try {
    const rows = database.prepare("SELECT name FROM sqlite_master").all() as { name: string }[];
    return rows.map((row) => row.name).sort();
  } finally {
    database.close();
  }
}

/** Every read command, on one store. */
const reads = (url: string, ...flags: string[]) => [
  ["inspect", "list", "--store", url, ...flags],
  ["inspect", "list", "--store", url, "--json", ...flags],
  ["inspect", "show", "default", "turn-1", "--store", url, ...flags],
  ["reconcile", "--store", url, "--hooks", hooks, ...flags],
];

describe("read commands on a store that is not there", () => {
  it("refuse a misspelled SQLite table and create nothing in the file", async () => {
    const before = sqliteTables(sqlite.path);
    for (const argv of [
      ...reads(sqlite.url, "--table", "idempotool_recrods"),
      ...reads(`${sqlite.url}?table=nope`),
    ]) {
      const { code, stdout, stderr } = await cli(argv);
      expect(code, argv.join(" ")).toBe(2);
      expect(stdout, argv.join(" ")).toBe("");
      expect(stderr, argv.join(" ")).toMatch(
        /^idempotool: the SQLite store at .* has no table (idempotool_recrods|nope) \(its tables: idempotool_records\); check --table\n$/,
      );
    }
    expect(sqliteTables(sqlite.path)).toEqual(before);
  });

  it("refuse a SQLite file that does not exist, and do not create it", async () => {
    const path = join(mkdtempSync(join(tmpdir(), "idempotool-cli-ro-")), "typo.db");
    for (const argv of [...reads(`sqlite://${path}`), ["purge", "--store", `sqlite://${path}`]]) {
      const { code, stderr } = await cli(argv);
      expect(code, argv.join(" ")).toBe(2);
      expect(stderr).toBe(`idempotool: no SQLite store at ${path}\n`);
    }
    expect(existsSync(path)).toBe(false);
  });

  it("refuse a misspelled PostgreSQL table and create nothing on the server", async () => {
    for (const argv of [
      ...reads(pgUrl, "--table", misspelled),
      ["purge", "--store", `${pgUrl}?table=${misspelled}`],
    ]) {
      const { code, stderr } = await cli(argv);
      expect(code, argv.join(" ")).toBe(2);
      expect(stderr, argv.join(" ")).toBe(
        `idempotool: the PostgreSQL store at ${pgUrl} has no table ${misspelled}; check --table\n`,
      );
    }
    const { rows } = await pool.query("SELECT to_regclass($1) AS found", [misspelled]);
    expect(rows[0].found).toBeNull();
    // The right table still reads.
    const { code, stdout } = await cli(["inspect", "list", "--store", pgUrl, "--table", table, "--json"]);
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toHaveLength(1);
  });

  it("refuse a Redis prefix with no records", async () => {
    const prefix = `idempotool-cli-ro-${randomUUID().slice(0, 8)}:`;
    for (const argv of reads("redis://127.0.0.1:6379", "--prefix", prefix)) {
      const { code, stderr } = await cli(argv);
      expect(code, argv.join(" ")).toBe(2);
      expect(stderr, argv.join(" ")).toContain(`no records under the prefix "${prefix}"`);
    }
  });
});
