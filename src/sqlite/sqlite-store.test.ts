import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import type BetterSqlite3 from "better-sqlite3";
import { afterEach, describe, expect, expectTypeOf, it } from "vitest";
import { claimRequest as baseClaim, settleRequest as baseSettle } from "../../test/fixtures/claim-request.js";
import {
  pragma,
  type SqliteTestDriver,
  sqliteDrivers,
  storeSqliteDrivers,
} from "../../test/fixtures/sqlite-drivers.js";
import { isIdempotencyError } from "../core/errors.js";
import type { ClaimRequest, SettleRequest } from "../core/store.js";
import { storeConformanceCases } from "../testing/conformance.js";
import { fakeClock } from "../testing/fake-clock.js";
import { type AnySqliteDatabase, type SqliteDatabase, type SqliteDriver, sqliteStore } from "./index.js";

const directories: string[] = [];

function tempFile(): string {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "idempotool-sqlite-"));
  directories.push(directory);
  return path.join(directory, "records.db");
}

afterEach(() => {
  for (const directory of directories.splice(0)) fs.rmSync(directory, { recursive: true, force: true });
});

const t0 = Date.parse("2026-01-01T00:00:00.000Z");

/** A statement of either driver, as far as these tests call it. */
interface AnyStatement {
  run(...params: unknown[]): unknown;
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
}

/** Forwards everything to `target`, with `overrides` in front; methods stay bound to the real object. */
function forwarding<T extends object>(target: T, overrides: Partial<Record<PropertyKey, unknown>>): T {
  return new Proxy(target, {
    get(real, property) {
      if (Object.hasOwn(overrides, property)) return overrides[property];
      const value = Reflect.get(real, property);
      return typeof value === "function" ? value.bind(real) : value;
    },
  });
}

/** A real database whose prepare() passes through `wrap`: to see the store's SQL, or to inject a race. */
function intercepted<D extends AnySqliteDatabase>(
  real: D,
  wrap: (source: string, statement: AnyStatement) => AnyStatement,
): D {
  return forwarding(real, {
    prepare: (source: string) => wrap(source, real.prepare(source) as AnyStatement),
  });
}

/** `statement` with its run() replaced. */
function onRun(statement: AnyStatement, run: (...params: unknown[]) => unknown): AnyStatement {
  return forwarding(statement, { run });
}

const claimRequest = (overrides: Partial<ClaimRequest> = {}) => baseClaim({ now: t0, ...overrides });

const settleRequest = (overrides: Partial<SettleRequest> = {}) => baseSettle({ now: t0 + 10, ...overrides });

/** Resolves after `ms` of real time: the other connection's lock is held for real, not on a fake clock. */
const realTime = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("sqliteStore's choice of driver", () => {
  it("opens a path with node:sqlite where this Node has it, else with better-sqlite3", async () => {
    const store = sqliteStore({ path: tempFile() });
    const builtIn = sqliteDrivers.some((driver) => driver.name === "node:sqlite");
    expect(store.driver).toBe(builtIn ? "node:sqlite" : "better-sqlite3");
    await store.close();
  });

  it.each(["node:sqlite", "better-sqlite3", "libsql"] as const)(
    "refuses %s, named, with invalid_options on a Node that cannot load it, and opens a path with another",
    async (name) => {
      const fixtures = path.join(import.meta.dirname, "..", "..", "test", "fixtures");
      const run = (...args: string[]) =>
        promisify(execFile)(
          process.execPath,
          [
            "--require",
            path.join(fixtures, "without-sqlite-drivers.cjs"),
            "--import",
            "tsx",
            path.join(fixtures, "sqlite-open-path.ts"),
            ...args,
          ],
          { env: { ...process.env, IDEMPOTOOL_HIDE_SQLITE_DRIVERS: name } },
        ).then(({ stdout }) => JSON.parse(stdout) as { code?: string; message?: string; driver?: string });
      const refused = await run(name);
      expect(refused.code).toBe("invalid_options");
      expect(refused.message).toContain(name);
      // libsql is never a default: a path opens with the built-in node:sqlite whether libsql loads or not.
      const other = name === "node:sqlite" ? "better-sqlite3" : "node:sqlite";
      expect(await run()).toEqual({ driver: other });
    },
  );

  it("refuses bun:sqlite outside Bun with invalid_options, saying it is Bun's own", () => {
    let thrown: unknown;
    try {
      sqliteStore({ path: tempFile(), driver: "bun:sqlite" });
    } catch (error) {
      thrown = error;
    }
    expect(isIdempotencyError(thrown, "invalid_options")).toBe(true);
    expect((thrown as Error).message).toBe(
      `sqliteStore({ path }): driver "bun:sqlite" cannot be loaded on Node ${process.version} ` +
        "(it is Bun's own module: run on Bun).",
    );
  });

  it("refuses a driver it does not know, and a database of neither driver, with invalid_options", () => {
    expect(() => sqliteStore({ path: tempFile(), driver: "sqlite3" as SqliteDriver })).toThrow(
      expect.objectContaining({ code: "invalid_options", message: expect.stringContaining("driver") }),
    );
    const notADatabase = { prepare() {}, exec() {} } as unknown as AnySqliteDatabase;
    expect(() => sqliteStore({ database: notADatabase })).toThrow(
      expect.objectContaining({ code: "invalid_options" }),
    );
  });

  it("keeps the type of the database it is given", () => {
    expectTypeOf<BetterSqlite3.Database>().toExtend<SqliteDatabase>();
    type Given = ReturnType<typeof sqliteStore<BetterSqlite3.Database>>["database"];
    expectTypeOf<Given>().toEqualTypeOf<BetterSqlite3.Database>();
    expectTypeOf<ReturnType<typeof sqliteStore>["database"]>().toEqualTypeOf<AnySqliteDatabase>();
  });
});

for (const driver of storeSqliteDrivers) sqliteStoreSpecs(driver);

function sqliteStoreSpecs(driver: SqliteTestDriver) {
  describe(`sqliteStore conformance (${driver.name})`, () => {
    for (const c of storeConformanceCases({
      name: "sqlite",
      create: () => {
        const directory = fs.mkdtempSync(path.join(os.tmpdir(), "idempotool-sqlite-"));
        const store = sqliteStore({ path: path.join(directory, "records.db"), driver: driver.name });
        return {
          store,
          clock: fakeClock(),
          cleanup: async () => {
            await store.close();
            fs.rmSync(directory, { recursive: true, force: true });
          },
        };
      },
    })) {
      it(c.name, c.run);
    }
  });

  describe(`sqliteStore (${driver.name})`, () => {
    it(`accepts a ${driver.name} database, and says which driver it runs on`, () => {
      const database = driver.open(":memory:");
      const store = sqliteStore({ database });
      expect(store.database).toBe(database);
      expect(store.driver).toBe(driver.name);
      database.close();
    });

    it(`opens a path with ${driver.name} when asked to`, async () => {
      const store = sqliteStore({ path: tempFile(), driver: driver.name });
      expect(store.driver).toBe(driver.name);
      await store.close();
    });

    it("opens a path in WAL mode with NORMAL synchronous by default", async () => {
      const store = sqliteStore({ path: tempFile(), driver: driver.name });
      expect(pragma(store.database, "journal_mode")).toBe("wal");
      expect(pragma(store.database, "synchronous")).toBe(1);
      // Calls wait for locks on timers; SQLite's own wait stays at a few milliseconds.
      expect(pragma(store.database, "busy_timeout")).toBe(2);
      await store.close();

      const full = sqliteStore({ path: tempFile(), synchronous: "FULL", driver: driver.name });
      expect(pragma(full.database, "synchronous")).toBe(2);
      await full.close();
    });

    it("refuses a request value SQLite cannot bind, instead of binding something else in its place", async () => {
      const database = driver.open(":memory:");
      const store = sqliteStore({ database });
      const { scope } = claimRequest();
      await store.claim(claimRequest({ key: "k" }));
      const bad = <T>(value: unknown) => value as T;
      // An object where a string belongs must not be taken for a map of names (which would shift the rest).
      await expect(store.get({ scope: bad<string>({}), key: "k" }, t0)).rejects.toThrow();
      await expect(store.delete({ scope: bad<string>(new Date()), key: "k" })).rejects.toThrow();
      if (driver.name === "node:sqlite") {
        // node:sqlite refused an undefined value when it bound by name, and still does now that it binds in
        // order (better-sqlite3 binds it as NULL, which matches no token).
        await expect(store.release({ scope, key: "k", token: bad<string>(undefined) })).rejects.toThrow();
        await expect(
          store.takeover({
            scope,
            key: "k",
            fromToken: bad<string>(undefined),
            token: "t2",
            leaseMs: 1_000,
            ttlMs: 5_000,
            now: t0,
          }),
        ).rejects.toThrow();
      }
      expect((await store.get({ scope, key: "k" }, t0))?.status).toBe("in_progress");
      database.close();
    });

    it("rejects a table name that is not a plain identifier, naming the option", () => {
      const database = driver.open(":memory:");
      for (const table of ["", "1records", "records; DROP TABLE x", 'a"b', "a-b", "x".repeat(64)]) {
        let thrown: unknown;
        try {
          sqliteStore({ database, table });
        } catch (error) {
          thrown = error;
        }
        expect(isIdempotencyError(thrown, "invalid_options"), `table ${JSON.stringify(table)}`).toBe(true);
        expect((thrown as Error).message).toContain("table");
      }
      expect(() => sqliteStore({ database, table: "_Tool_records_2" })).not.toThrow();
      database.close();
    });

    it("rejects a busyTimeoutMs that is not a positive number of milliseconds, naming the option", () => {
      const database = driver.open(":memory:");
      for (const busyTimeoutMs of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31, "100"]) {
        let thrown: unknown;
        try {
          sqliteStore({ database, busyTimeoutMs: busyTimeoutMs as number });
        } catch (error) {
          thrown = error;
        }
        expect(isIdempotencyError(thrown, "invalid_options"), String(busyTimeoutMs)).toBe(true);
        expect((thrown as Error).message).toContain("busyTimeoutMs");
      }
      for (const busyTimeoutMs of [0.5, 1, 2 ** 31 - 1]) {
        expect(() => sqliteStore({ database, busyTimeoutMs })).not.toThrow();
      }
      database.close();
    });

    it("keeps stores with different tables apart in one database", async () => {
      const database = driver.open(":memory:");
      const first = sqliteStore({ database, table: "first" });
      const second = sqliteStore({ database, table: "second" });
      expect((await first.claim(claimRequest())).claimed).toBe(true);
      expect((await second.claim(claimRequest({ token: "token-b" }))).claimed).toBe(true);
      database.close();
    });

    it("leaves a caller's database open on close()", async () => {
      const database = driver.open(":memory:");
      const store = sqliteStore({ database });
      await store.claim(claimRequest());
      await store.close();
      expect(driver.isOpen(database)).toBe(true);
      // toMatchObject: libsql's rows also carry a `_metadata` field.
      expect(database.prepare("SELECT count(*) AS n FROM idempotool_records").get()).toMatchObject({ n: 1 });
      database.close();
    });

    it("closes the database it opened from a path", async () => {
      const store = sqliteStore({ path: tempFile(), driver: driver.name });
      await store.claim(claimRequest());
      await store.close();
      await expect(store.get({ scope: "tenant-a", key: "order-1" }, t0)).rejects.toThrow();
    });

    it("keeps a completed record across close and reopen", async () => {
      const file = tempFile();
      const first = sqliteStore({ path: file, driver: driver.name });
      await first.claim(claimRequest());
      const settled = await first.settle({
        scope: "tenant-a",
        key: "order-1",
        token: "token-a",
        status: "completed",
        result: '{"id":"msg_1"}',
        error: null,
        ttlMs: 86_400_000,
        now: t0 + 10,
      });
      await first.close();

      const reopened = sqliteStore({ path: file, driver: driver.name });
      expect(await reopened.get({ scope: "tenant-a", key: "order-1" }, t0 + 20)).toEqual(settled);
      const repeat = await reopened.claim(claimRequest({ token: "token-b", now: t0 + 20 }));
      expect(repeat).toMatchObject({
        claimed: false,
        record: { status: "completed", result: '{"id":"msg_1"}' },
      });
      await reopened.close();
    });

    it("lets two connections to one file see each other's claims and never both claim", async () => {
      const file = tempFile();
      const a = sqliteStore({ path: file, driver: driver.name });
      const b = sqliteStore({ path: file, driver: driver.name });
      const first = await a.claim(claimRequest());
      const second = await b.claim(claimRequest({ token: "token-b" }));
      expect(first.claimed).toBe(true);
      expect(second).toMatchObject({ claimed: false, record: { token: "token-a" } });

      const results = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          (i % 2 === 0 ? a : b).claim(claimRequest({ key: "race", token: `t${i}` })),
        ),
      );
      expect(results.filter((r) => r.claimed)).toHaveLength(1);
      await a.close();
      await b.close();
    });

    it("replaces an expired record written by another connection", async () => {
      const file = tempFile();
      const a = sqliteStore({ path: file, driver: driver.name });
      const b = sqliteStore({ path: file, driver: driver.name });
      await a.claim(claimRequest({ ttlMs: 1_000, leaseMs: 1_000 }));
      const again = await b.claim(claimRequest({ token: "token-b", now: t0 + 2_000 }));
      expect(again).toMatchObject({
        claimed: true,
        record: { token: "token-b", attempts: 1, createdAt: t0 + 2_000 },
      });
      expect(await a.get({ scope: "tenant-a", key: "order-1" }, t0 + 2_000)).toEqual(again.record);
      await a.close();
      await b.close();
    });

    it("returns the winner when another connection claims between its read and its insert", async () => {
      const file = tempFile();
      const rival = sqliteStore({ path: file, driver: driver.name });
      let rivalClaim: ReturnType<typeof rival.claim> | undefined;
      const real = driver.open(file);
      let armed = false;
      const rivalClaims = () => {
        if (armed) rivalClaim ??= rival.claim(claimRequest({ token: "rival" }));
      };
      // The rival's claim runs (synchronously underneath) just before this store's first INSERT, or on
      // libsql, where each write takes the lock first, just before that.
      const database = forwarding(
        intercepted(real, (source, statement) => {
          if (!source.trimStart().startsWith("INSERT")) return statement;
          return onRun(statement, (...params) => {
            rivalClaims();
            return statement.run(...params);
          });
        }),
        {
          exec: (source: string) => {
            if (source.startsWith("BEGIN IMMEDIATE")) rivalClaims();
            return real.exec(source);
          },
        },
      );
      const store = sqliteStore({ database });
      store.migrate();
      armed = true;

      const outcome = await store.claim(claimRequest({ token: "late" }));
      expect(await rivalClaim).toMatchObject({ claimed: true, record: { token: "rival" } });
      expect(outcome).toMatchObject({ claimed: false, record: { token: "rival", status: "in_progress" } });
      await rival.close();
      real.close();
    });

    it("reads records back with plain numbers even when the database defaults to BigInt", async () => {
      const database = driver.open(":memory:", { bigInts: true });
      const store = sqliteStore({ database });
      const numbers = (record: object | null | undefined) => {
        expect(record).toBeTruthy();
        const { createdAt, updatedAt, leaseExpiresAt, expiresAt, attempts } = record as Record<
          string,
          unknown
        >;
        for (const value of [createdAt, updatedAt, leaseExpiresAt, expiresAt, attempts]) {
          expect(typeof value).toBe("number");
        }
      };
      await store.claim(claimRequest());
      numbers(await store.get({ scope: "tenant-a", key: "order-1" }, t0));
      numbers((await store.claim(claimRequest({ token: "token-b" }))).record);
      numbers((await store.list({})).records[0]);
      numbers(
        await store.takeover({
          ...claimRequest({ token: "token-b", now: t0 + 60_000 }),
          fromToken: "token-a",
        }),
      );
      numbers(await store.settle(settleRequest({ token: "token-b", now: t0 + 60_001 })));
      database.close();
    });

    it("returns from settle the record as stored: the claim's tool, fingerprint and creation time, the takeover's attempts", async () => {
      const store = sqliteStore({ database: driver.open(":memory:") });
      await store.claim(claimRequest());
      const taken = await store.takeover({
        ...claimRequest({ token: "token-b", now: t0 + 60_000 }),
        fromToken: "token-a",
      });
      expect(taken).toMatchObject({ attempts: 2, createdAt: t0 });
      const result = JSON.stringify({ text: "héllo — 𝄞 👩‍👩‍👧 \u2028", body: "x".repeat(100_000) });
      const settled = await store.settle(settleRequest({ token: "token-b", result, now: t0 + 60_500 }));
      expect(settled).toEqual({
        scope: "tenant-a",
        key: "order-1",
        tool: "send_email",
        fingerprint: "f".repeat(64),
        status: "completed",
        token: "token-b",
        createdAt: t0,
        updatedAt: t0 + 60_500,
        leaseExpiresAt: t0 + 60_500,
        expiresAt: t0 + 60_500 + 86_400_000,
        attempts: 2,
        result,
        error: null,
      });
      expect(await store.get({ scope: "tenant-a", key: "order-1" }, t0 + 60_500)).toEqual(settled);
      expect(await store.settle(settleRequest({ token: "token-a", now: t0 + 60_600 }))).toBeNull();
      store.database.close();
    });

    it("returns the record as stored when a string holds a lone surrogate, which SQLite's UTF-8 cannot keep", async () => {
      const store = sqliteStore({ database: driver.open(":memory:") });
      for (const [i, field] of (["scope", "key", "tool", "fingerprint", "token"] as const).entries()) {
        const request = claimRequest({ key: `key-${i}`, [field]: `${field}-\ud800-${i}` });
        const claimed = await store.claim(request);
        expect(claimed.claimed).toBe(true);
        const stored = await store.get({ scope: request.scope, key: request.key }, t0);
        expect(stored).toBeDefined();
        expect(claimed.record).toEqual(stored);
        const again = await store.claim({ ...request, token: "token-z" });
        expect(again).toEqual({ claimed: false, record: stored, now: t0 });
      }
      for (const [i, field] of (["result", "error", "scope", "key", "token"] as const).entries()) {
        const overrides = { key: `settle-${i}`, [field]: `${field}-\udc00-${i}` };
        const request = claimRequest(overrides);
        await store.claim(request);
        const settled = await store.settle(settleRequest({ ...overrides, status: "failed" }));
        expect(settled).not.toBeNull();
        expect(settled).toEqual(await store.get({ scope: request.scope, key: request.key }, t0 + 10));
      }
      store.database.close();
    });

    it("treats % and _ in a key prefix literally and finds keys with characters beyond U+FFFF", async () => {
      const store = sqliteStore({ database: driver.open(":memory:") });
      for (const key of [
        "50%_off",
        "50x_off",
        "50%xoff",
        "50%_off\u{1F600}",
        "50%_ofg",
        "\u{10FFFF}\u{10FFFF}x",
      ]) {
        await store.claim(claimRequest({ key }));
      }
      const keys = async (keyPrefix: string) => (await store.list({ keyPrefix })).records.map((r) => r.key);
      expect(await keys("50%_")).toEqual(["50%_off", "50%_off\u{1F600}", "50%_ofg"]);
      expect(await keys("50%_off")).toEqual(["50%_off", "50%_off\u{1F600}"]);
      expect(await keys("\u{10FFFF}")).toEqual(["\u{10FFFF}\u{10FFFF}x"]);
      await store.close();
      store.database.close();
    });

    it("rejects a list cursor it did not issue", async () => {
      const store = sqliteStore({ database: driver.open(":memory:") });
      await expect(store.list({ cursor: "not-a-cursor" })).rejects.toThrow(TypeError);
      store.database.close();
    });

    it("purges through the expires_at index, removing only expired records", async () => {
      const real = driver.open(":memory:");
      const sources: string[] = [];
      // Records the store's SQL, so the plan checked is the one purge really runs.
      const database = intercepted(real, (source, statement) => {
        sources.push(source);
        return statement;
      });
      const store = sqliteStore({ database });
      for (let i = 0; i < 20; i++) {
        await store.claim(claimRequest({ key: `k${i}`, ttlMs: i < 5 ? 1_000 : 5_000, leaseMs: 1_000 }));
      }
      expect(await store.purge({ now: t0 + 2_000 })).toEqual({ deleted: 5 });
      expect((await store.list({})).records).toHaveLength(15);

      const purge = sources.find((source) => /^\s*DELETE\b/.test(source) && source.includes("expires_at <="));
      expect(purge).toBeDefined();
      // node:sqlite's statements are bound in order (`?`), the other drivers' by name.
      const params = purge!.includes("@now") ? [{ now: t0, limit: 1000 }] : [t0, 1000];
      const plan = real.prepare(`EXPLAIN QUERY PLAN ${purge}`).all(...params) as { detail: string }[];
      expect(plan.map((step) => step.detail).join("\n")).toMatch(
        /USING (COVERING )?INDEX idempotool_records_expires_at/,
      );
      real.close();
    });

    it("creates its table on first use, or earlier through migrate()", () => {
      const database = driver.open(":memory:");
      const store = sqliteStore({ database, table: "records" });
      const tables = () => database.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all();
      expect(tables()).toEqual([]);
      store.migrate();
      store.migrate();
      expect(tables()).toEqual([{ name: "records" }]);
      database.close();
    });
  });

  describe(`sqliteStore while another connection holds a lock (${driver.name})`, () => {
    it("waits without blocking in every operation, then applies each write once the lock is released", async () => {
      const file = tempFile();
      const store = sqliteStore({ path: file, driver: driver.name });
      const seed = (key: string, overrides: Partial<ClaimRequest> = {}) =>
        store.claim(claimRequest({ key, ...overrides }));
      for (const key of ["take", "settle", "renew", "release", "delete"]) await seed(key, { leaseMs: 1_000 });
      await seed("purge", { leaseMs: 1_000, ttlMs: 1_000 });
      const now = t0 + 2_000;

      const other = driver.open(file);
      other.exec("BEGIN IMMEDIATE");
      let committed = false;
      // Fires only if the store's waiting leaves the event loop free.
      const commit = realTime(200).then(() => {
        other.exec("COMMIT");
        committed = true;
      });
      const landed = <T>(operation: Promise<T>) => operation.then((value) => ({ value, committed }));

      const writes = await Promise.all([
        landed(store.claim(claimRequest({ key: "claim", now }))),
        landed(
          store.takeover({ ...claimRequest({ key: "take", token: "token-b", now }), fromToken: "token-a" }),
        ),
        landed(store.settle(settleRequest({ key: "settle", now }))),
        landed(
          store.renew({
            scope: "tenant-a",
            key: "renew",
            token: "token-a",
            leaseMs: 60_000,
            ttlMs: 60_000,
            now,
          }),
        ),
        landed(store.release({ scope: "tenant-a", key: "release", token: "token-a" })),
        landed(store.delete({ scope: "tenant-a", key: "delete" })),
        landed(store.purge({ now })),
      ]);
      await commit;
      other.close();

      expect(writes.map((write) => write.committed)).toEqual(writes.map(() => true));
      const [claimed, taken, settled, renewed, released, deleted, purged] = writes.map(
        (write) => write.value,
      );
      expect(claimed).toMatchObject({ claimed: true, record: { key: "claim", token: "token-a" } });
      expect(taken).toMatchObject({ key: "take", token: "token-b", attempts: 2 });
      expect(settled).toMatchObject({ key: "settle", status: "completed" });
      expect([renewed, released, deleted, purged]).toEqual([true, true, true, { deleted: 1 }]);
      const keys = (await store.list({})).records.map((record) => [record.key, record.token, record.status]);
      expect(keys).toEqual([
        ["claim", "token-a", "in_progress"],
        ["renew", "token-a", "in_progress"],
        ["settle", "token-a", "completed"],
        ["take", "token-b", "in_progress"],
      ]);
      expect((await store.get({ scope: "tenant-a", key: "renew" }, now))?.leaseExpiresAt).toBe(now + 60_000);
      await store.close();
    });

    // A file in rollback-journal mode (a caller's database not in WAL): a writer needs every reader gone to
    // commit, so its statement or transaction can get as far as COMMIT and be refused there.
    function rollbackJournal() {
      const file = tempFile();
      const real = driver.open(file, { timeoutMs: 0 });
      expect(pragma(real, "journal_mode")).toBe("delete");
      const reader = driver.open(file, { timeoutMs: 0 });
      let readerGone = false;
      /** Another connection reads in an open transaction for `ms`; resolves once it committed. */
      const readFor = (ms: number) => {
        reader.exec("BEGIN");
        reader.prepare("SELECT count(*) FROM idempotool_records").get();
        return realTime(ms).then(() => {
          reader.exec("COMMIT");
          readerGone = true;
        });
      };
      const rows = () => real.prepare("SELECT key, token, status FROM idempotool_records ORDER BY key").all();
      return {
        file,
        real,
        readFor,
        readerGone: () => readerGone,
        rows,
        close() {
          reader.close();
          real.close();
        },
      };
    }

    // libsql runs each write in its own transaction, so its first INSERT cannot lose a race while it runs:
    // test/libsql-store.test.ts retries its writes refused at COMMIT.
    if (driver.name !== "libsql") {
      it("retries a claim whose transaction was refused at COMMIT, after rolling it back", async () => {
        const journal = rollbackJournal();
        const rival = sqliteStore({ database: driver.open(journal.file, { timeoutMs: 0 }) });
        let reading: Promise<void> | undefined;
        let rivalClaim: Promise<unknown> | undefined;
        let rivalRelease: Promise<unknown> | undefined;
        let lostChanges: number | undefined;
        // The first INSERT loses a race to a rival that then releases its claim, and a reader arrives: the
        // claim goes on under BEGIN IMMEDIATE, inserts, and cannot commit while the reader is there.
        const database = intercepted(journal.real, (source, statement) => {
          if (!source.trimStart().startsWith("INSERT")) return statement;
          return onRun(statement, (...params) => {
            if (reading) return statement.run(...params);
            // The rival's operations run synchronously underneath: they land before the next line.
            rivalClaim = rival.claim(claimRequest({ token: "rival" }));
            const lost = statement.run(...params) as { changes: number | bigint };
            lostChanges = Number(lost.changes);
            rivalRelease = rival.release({ scope: "tenant-a", key: "order-1", token: "rival" });
            reading = journal.readFor(200);
            return lost;
          });
        });
        const store = sqliteStore({ database });
        store.migrate();

        const outcome = await store.claim(claimRequest({ token: "late" }));
        expect(journal.readerGone()).toBe(true);
        await reading;
        expect(await rivalClaim).toMatchObject({ claimed: true });
        expect(await rivalRelease).toBe(true);
        expect(lostChanges).toBe(0);
        expect(outcome).toMatchObject({ claimed: true, record: { token: "late" } });
        expect(driver.inTransaction(journal.real)).toBe(false);
        expect(journal.rows()).toEqual([{ key: "order-1", token: "late", status: "in_progress" }]);
        rival.database.close();
        journal.close();
      });
    }

    it("never reports a settle or takeover that was refused at COMMIT: it waits and applies it", async () => {
      const journal = rollbackJournal();
      const store = sqliteStore({ database: journal.real });
      await store.claim(claimRequest({ key: "settle" }));
      await store.claim(claimRequest({ key: "take", leaseMs: 1_000 }));
      const reading = journal.readFor(200);

      const [settled, taken] = await Promise.all([
        store.settle(settleRequest({ key: "settle" })),
        store.takeover({
          ...claimRequest({ key: "take", token: "token-b", now: t0 + 2_000 }),
          fromToken: "token-a",
        }),
      ]);
      expect(journal.readerGone()).toBe(true);
      await reading;
      expect(settled).toMatchObject({ status: "completed", token: "token-a" });
      expect(taken).toMatchObject({ status: "in_progress", token: "token-b" });
      expect(journal.rows()).toEqual([
        { key: "settle", token: "token-a", status: "completed" },
        { key: "take", token: "token-b", status: "in_progress" },
      ]);
      journal.close();
    });
  });
}
