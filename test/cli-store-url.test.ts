/**
 * Store URLs, shared by the commands that work on records: every bad URL or unreachable store is a
 * UsageError (one line, exit 2), never a stack trace.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { UsageError } from "../src/cli/errors.js";
import { openStore, parseStoreUrl } from "../src/cli/store-url.js";
import { postgresStore } from "../src/postgres/index.js";

const dir = mkdtempSync(join(tmpdir(), "idempotool-store-url-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("parseStoreUrl", () => {
  it("reads sqlite:// paths, relative and absolute, with a table", () => {
    expect(parseStoreUrl("sqlite://./records.db")).toEqual({
      kind: "sqlite",
      path: "./records.db",
      table: undefined,
    });
    expect(parseStoreUrl("sqlite:///var/lib/idempotool.db?table=tool_calls")).toEqual({
      kind: "sqlite",
      path: "/var/lib/idempotool.db",
      table: "tool_calls",
    });
    expect(parseStoreUrl("sqlite:my%20records.db")).toMatchObject({ path: "my records.db" });
    // A % that starts no escape is part of the name.
    expect(parseStoreUrl("sqlite://./100%.db")).toMatchObject({ path: "./100%.db" });
    expect(parseStoreUrl("sqlite://./100%25%.db")).toMatchObject({ path: "./100%%.db" });
  });

  it("reads postgres:// and redis:// URLs", () => {
    expect(parseStoreUrl("postgres://app@127.0.0.1:5432/test?table=dedup")).toMatchObject({
      kind: "postgres",
      table: "dedup",
    });
    expect(parseStoreUrl("postgresql://127.0.0.1/test").kind).toBe("postgres");
    expect(parseStoreUrl("redis://127.0.0.1:6379?prefix=agents:")).toMatchObject({
      kind: "redis",
      prefix: "agents:",
    });
  });

  it.each(["mysql://db/x", "records.db", "sqlite://", "postgres://", "redis://:6379"])(
    "refuses %s with a UsageError",
    (url) => {
      expect(() => parseStoreUrl(url)).toThrow(UsageError);
    },
  );
});

describe("openStore", () => {
  it("opens a SQLite store that exists, and creates one only when asked", async () => {
    const path = join(dir, "records.db");
    await expect(openStore(`sqlite://${path}`)).rejects.toThrow(`no SQLite store at ${path}`);
    const created = await openStore(`sqlite://${path}`, { create: true });
    await created.close();
    expect(existsSync(path)).toBe(true);
    const opened = await openStore(`sqlite://${path}`);
    expect(await opened.get({ scope: "default", key: "nothing" }, Date.now())).toBeUndefined();
    await opened.close();
  });

  it("opens a file with a % in its name, and names it when it is missing", async () => {
    const path = join(dir, "100%.db");
    await expect(openStore(`sqlite://${path}`)).rejects.toThrow(`no SQLite store at ${path}`);
    const created = await openStore(`sqlite://${path}`, { create: true });
    await created.close();
    const opened = await openStore(`sqlite://${path}`);
    expect(await opened.get({ scope: "default", key: "nothing" }, Date.now())).toBeUndefined();
    await opened.close();
  });

  it("turns a store that cannot be opened into one clear UsageError", async () => {
    const error = await openStore(`sqlite://${join(dir, "no", "such", "dir", "x.db")}`, {
      create: true,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UsageError);
    expect((error as Error).message).toMatch(/^cannot open the SQLite store at /);
  });

  it("opens PostgreSQL and Redis stores, and turns an unreachable server into one UsageError", async () => {
    // The commands never create a store: make the default table here rather than hope another test did.
    const pool = new pg.Pool({ connectionString: "postgres://postgres@127.0.0.1:5432/test" });
    await postgresStore({ client: pool }).migrate();
    await pool.end();
    for (const url of ["postgres://postgres@127.0.0.1:5432/test", "redis://127.0.0.1:6379"]) {
      const store = await openStore(url);
      expect(await store.get({ scope: "cli-store-url", key: "nothing-here" }, Date.now())).toBeUndefined();
      await store.close();
    }
    await expect(openStore("postgres://postgres@127.0.0.1:1/test")).rejects.toThrow(UsageError);
    await expect(openStore("redis://127.0.0.1:1")).rejects.toThrow(/cannot reach the Redis store/);
  });
});
