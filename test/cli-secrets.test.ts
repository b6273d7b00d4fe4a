/**
 * No password from a store URL is ever printed: not in the one-line error, not in `--debug` stacks and
 * causes, whatever the URL's form and whatever the driver echoes. In this process: cli() fails a run that
 * writes anything (a driver's echo to the console) outside the output it captures.
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { redactUrl, secretsOf } from "../src/cli/redact.js";
import { cli } from "./fixtures/cli-binary.js";

/** A table with the store's name but not its columns: the store opens, and its first read fails. */
const odd = `idempotool_cli_secrets_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
const pool = new pg.Pool({ connectionString: "postgres://postgres@127.0.0.1:5432/test", max: 1 });

beforeAll(async () => {
  await pool.query(`CREATE TABLE ${odd} (id integer)`);
});

afterAll(async () => {
  await pool.query(`DROP TABLE IF EXISTS ${odd}`);
  // Were a command to create the missing table, this test would leave it behind.
  await pool.query(`DROP TABLE IF EXISTS ${odd}_none`);
  await pool.end();
});

const password = "Hunter2Secret";

/** Each form puts the password somewhere else; every command run on it must fail without printing it. */
const forms = [
  { what: "an unknown scheme", url: `mysql://app:${password}@db/agents` },
  { what: "a bad port", url: `postgres://app:${password}@127.0.0.1:99999/test` },
  { what: "no host", url: `postgres://app:${password}@/test` },
  { what: "?password= in the query", url: `postgres://127.0.0.1:1/test?password=${password}` },
  { what: "?sslpassword= in the query", url: `postgres://127.0.0.1:1/test?sslpassword=${password}` },
  { what: "a Redis password without a user", url: `redis://:${password}@127.0.0.1:1` },
  { what: "a Redis user and password", url: `rediss://agent:${password}@127.0.0.1:1` },
  { what: "a raw @ inside the password", url: `postgres://app:${password}@x@127.0.0.1:1/test` },
  { what: "a raw / inside the password", url: `postgres://app:${password}/x@127.0.0.1:1/test` },
  { what: "a raw ? inside the password", url: `postgres://app:9${password}?x@127.0.0.1:1/test` },
  { what: "a percent-encoded password", url: `postgres://app:${password}%40x@127.0.0.1:1/test` },
  // Reachable servers (trust auth ignores the password), so the error is a missing table or prefix.
  {
    what: "a PostgreSQL server reached, table missing",
    url: `postgres://postgres:${password}@127.0.0.1:5432/test?table=${odd}_none`,
  },
  {
    what: "a raw @ before the password, the store's read failing",
    url: `postgres://postgres:x@${password}@127.0.0.1:5432/test?table=${odd}`,
  },
  {
    what: "a Redis server reached, prefix empty",
    url: `redis://127.0.0.1:6379?password=${password}&prefix=${odd}-none:`,
  },
];

describe("a store URL's password", () => {
  it.each(forms)("is never printed for $what", async ({ url }) => {
    for (const argv of [
      ["inspect", "list", "--store", url],
      ["--debug", "inspect", "show", "default", "k", `--store=${url}`],
    ]) {
      const { code, stdout, stderr } = await cli(argv);
      const printed = stdout + stderr;
      expect(code, argv.join(" ")).toBe(2);
      expect(printed, argv.join(" ")).not.toContain(password);
      expect(printed, argv.join(" ")).not.toContain(encodeURIComponent(password));
      if (!argv.includes("--debug")) {
        expect(stderr.trim().split("\n"), argv.join(" ")).toHaveLength(1);
        expect(stderr, argv.join(" ")).toContain("***");
      }
    }
  });

  it("is masked where the URL is shown, which stays readable", async () => {
    const { stderr } = await cli(["inspect", "list", "--store", `redis://:${password}@127.0.0.1:1`]);
    expect(stderr).toBe(
      "idempotool: cannot reach the Redis store at redis://:***@127.0.0.1:1: Connection is closed.\n",
    );
  });
});

describe("redactUrl", () => {
  it.each([
    ["postgres://app:pw@db:5432/agents?table=t", "postgres://app:***@db:5432/agents?table=t"],
    ["redis://:pw@cache:6379", "redis://:***@cache:6379"],
    ["postgres://db/agents?password=pw&table=t", "postgres://db/agents?password=***&table=t"],
    ["postgres://app:p@w@db/agents", "postgres://app:***@db/agents"],
    ["postgres://app:pw@db:99999/agents", "postgres://app:***@db:99999/agents"],
    ["postgres://app:p/w@db/agents", "postgres://app:***@db/agents"],
    ["postgres://app@db/agents", "postgres://app@db/agents"],
    ["sqlite://./records.db", "sqlite://./records.db"],
  ])("%s → %s", (url, shown) => {
    expect(redactUrl(url)).toBe(shown);
  });

  it("finds the password raw and decoded, so a driver's echo of either is scrubbed", () => {
    expect(secretsOf("postgres://app:p%40w@db/agents")).toEqual(expect.arrayContaining(["p%40w", "p@w"]));
    expect(secretsOf("postgres://db/agents?password=a%20b")).toEqual(expect.arrayContaining(["a b"]));
    expect(secretsOf("postgres://app@db:5432/agents?table=t")).toEqual([]);
  });
});
