/**
 * sqliteStore on libsql, libSQL's better-sqlite3-compatible `Database`: what differs from the other drivers.
 * The conformance suite, the lock waits and the cross-process races, crashes and lost replies run on libsql
 * as on every driver (src/sqlite/sqlite-store.test.ts, test/fixtures/sqlite-drivers.ts and stores.ts).
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type BetterSqlite3 from "better-sqlite3";
import Database from "libsql";
import { afterEach, describe, expect, expectTypeOf, it } from "vitest";
import { isIdempotencyError } from "../src/core/errors.js";
import type { SettleRequest } from "../src/core/store.js";
import { type LibsqlDatabase, type SqliteDatabase, sqliteStore } from "../src/sqlite/index.js";
import { claimRequest as baseClaim, settleRequest as baseSettle } from "./fixtures/claim-request.js";

const directories: string[] = [];
afterEach(() => {
  for (const directory of directories.splice(0)) fs.rmSync(directory, { recursive: true, force: true });
});

function tempFile(): string {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "idempotool-libsql-"));
  directories.push(directory);
  return path.join(directory, "records.db");
}

const t0 = Date.parse("2026-01-01T00:00:00.000Z");
const claimRequest = (overrides: Parameters<typeof baseClaim>[0] = {}) =>
  baseClaim({ now: t0, ...overrides });

const settleRequest = (overrides: Partial<SettleRequest> = {}) => baseSettle({ now: t0 + 10, ...overrides });

/** What `run` threw, for assertions on its code and message. */
function thrownBy(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe("sqliteStore on libsql", () => {
  it("tells a libsql Database from a better-sqlite3 one, whose API it follows", async () => {
    expectTypeOf<Database.Database>().toExtend<LibsqlDatabase>();
    expectTypeOf<BetterSqlite3.Database>().toExtend<SqliteDatabase>();
    const database = new Database(":memory:");
    const store = sqliteStore({ database });
    expect(store.driver).toBe("libsql");
    expect(store.database).toBe(database);
    expect((await store.claim(claimRequest())).claimed).toBe(true);
    database.close();
  });

  it("refuses a remote libsql database with invalid_options, sending it nothing", () => {
    // Nothing listens there: libsql connects to a remote database on its first statement only.
    const remote = new Database("http://127.0.0.1:9");
    const thrown = thrownBy(() => sqliteStore({ database: remote }));
    expect(isIdempotencyError(thrown, "invalid_options")).toBe(true);
    expect((thrown as Error).message).toContain("is a remote database");
    expect((thrown as Error).message).toContain("postgresStore");
  });

  it("refuses a path that libsql would open as a remote database, creating nothing", () => {
    const cwd = fs.readdirSync(".");
    for (const url of ["libsql://records.example.com", "http://127.0.0.1:9", "https://127.0.0.1:9"]) {
      const thrown = thrownBy(() => sqliteStore({ path: url, driver: "libsql" }));
      expect(isIdempotencyError(thrown, "invalid_options")).toBe(true);
      expect((thrown as Error).message).toContain("as a remote database");
    }
    expect(fs.readdirSync(".")).toEqual(cwd);
  });

  it("refuses a boolean with a TypeError before libsql binds it, which would abort the process", async () => {
    const store = sqliteStore({ path: tempFile(), driver: "libsql" });
    await store.claim(claimRequest());
    const bad = true as unknown as number;
    await expect(store.settle(settleRequest({ ttlMs: bad }))).rejects.toThrow(TypeError);
    await expect(store.get({ scope: "tenant-a", key: bad as unknown as string }, t0)).rejects.toThrow(
      TypeError,
    );
    // The process lives on, and the record is as it was.
    expect((await store.get({ scope: "tenant-a", key: "order-1" }, t0))?.status).toBe("in_progress");
    await store.close();
  });

  it("refuses a NUL in a key, which libsql would read back cut, as invalid_arguments", async () => {
    const store = sqliteStore({ database: new Database(":memory:") });
    const refused = await store.claim(claimRequest({ key: "k\u0000one" })).catch((error: unknown) => error);
    expect(isIdempotencyError(refused, "invalid_arguments")).toBe(true);
    expect((refused as Error).message).toContain("libsql");
  });

  it("runs its transaction as a savepoint inside one the caller holds open, which libsql's transaction() cannot", () => {
    const database = new Database(":memory:");
    database.exec("BEGIN");
    expect(() => database.transaction(() => 1).immediate()).toThrow(/within a transaction/);
    // migrate() creates the table in the store's transaction: here, a savepoint in the caller's.
    sqliteStore({ database, table: "records" }).migrate();
    const tables = () => database.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all();
    expect(tables()).toEqual([{ name: "records" }]);
    database.exec("ROLLBACK");
    expect(tables()).toEqual([]);
    database.close();
  });

  it("fails a call after close(), instead of running on the connection libsql keeps for its statements", async () => {
    const store = sqliteStore({ path: tempFile(), driver: "libsql" });
    await store.claim(claimRequest());
    await store.close();
    await expect(store.get({ scope: "tenant-a", key: "order-1" }, t0)).rejects.toThrow(/not open/);
    await expect(store.claim(claimRequest({ key: "order-2" }))).rejects.toThrow(/not open/);
  });

  it("fails a call on a database the caller closed, where libsql would abort the process", async () => {
    const database = new Database(tempFile());
    const store = sqliteStore({ database });
    database.close();
    // The first call creates the table in a transaction, which asks whether one is open already.
    await expect(store.claim(claimRequest())).rejects.toThrow(/not open/);
  });

  it("retries a write whose COMMIT was refused for a reader, after rolling it back, and applies it once", async () => {
    // Rollback-journal mode (a caller's database not in WAL): a writer needs every reader gone to commit.
    const file = tempFile();
    const database = new Database(file, { timeout: 0 });
    const store = sqliteStore({ database });
    store.migrate();
    const reader = new Database(file, { timeout: 0 });
    reader.exec("BEGIN");
    reader.prepare("SELECT count(*) FROM idempotool_records").all();
    let readerGone = false;
    const reading = new Promise((resolve) => setTimeout(resolve, 200)).then(() => {
      reader.exec("COMMIT");
      readerGone = true;
    });

    const claimed = await store.claim(claimRequest());
    expect(readerGone).toBe(true);
    expect(claimed).toMatchObject({ claimed: true, record: { token: "token-a" } });
    expect(database.inTransaction).toBe(false);
    const rows = database.prepare("SELECT key, token, status FROM idempotool_records").raw(true).all();
    expect(rows).toEqual([["order-1", "token-a", "in_progress"]]);
    await reading;
    reader.close();
    database.close();
  });
});
