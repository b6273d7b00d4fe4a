/**
 * Store URLs, shared by the commands that work on records: every bad URL or unreachable store is a
 * UsageError (one line, exit 2), never a stack trace. PostgreSQL and Redis are opened in
 * test/cli-server-stores.test.ts.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { UsageError } from "../src/cli/errors.js";
import { openStore, parseStoreUrl } from "../src/cli/store-url.js";

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

  it.each(["mongodb://db/x", "records.db", "sqlite://", "postgres://", "redis://:6379"])(
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
});
