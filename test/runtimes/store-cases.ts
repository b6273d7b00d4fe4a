/**
 * The stores under the running runtime: the conformance suite on memoryStore, tieredStore and sqliteStore
 * (on each SQLite driver the runtime has), and what sqliteStore promises beyond it there: the runtime's
 * own driver by default, WAL mode, waiting for another connection's lock without blocking the event loop,
 * and one file format across the drivers.
 */
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { memoryStore, tieredStore } from "idempotool";
import { type AnySqliteDatabase, type SqliteDriver, sqliteStore } from "idempotool/sqlite";
import { fakeClock, storeConformanceCases } from "idempotool/testing";
import { type RuntimeCase, runtime, tempFile } from "./harness.js";

const require = createRequire(import.meta.url);

/** The SQLite drivers each runtime offers, its default first. */
export const runtimeSqliteDrivers: Record<typeof runtime.name, readonly SqliteDriver[]> = {
  Deno: ["node:sqlite"],
  Bun: ["bun:sqlite", "node:sqlite"],
  Node: ["node:sqlite"],
};

const conformance = (name: string, create: Parameters<typeof storeConformanceCases>[0]["create"]) =>
  storeConformanceCases({ name, create }).map((c) => ({
    name: `conformance ${name}: ${c.name}`,
    run: c.run,
  }));

function sqliteConformance(driver: SqliteDriver): RuntimeCase[] {
  return conformance(`sqliteStore (${driver})`, () => {
    const store = sqliteStore({ path: tempFile(), driver });
    return { store, clock: fakeClock(), cleanup: () => store.close() };
  });
}

/** A PRAGMA's value, read alike on every driver (each answers a row named after the pragma). */
function pragma(database: AnySqliteDatabase, name: string): unknown {
  const row = database.prepare(`PRAGMA ${name}`).get() as Record<string, unknown>;
  return Object.values(row)[0];
}

const t0 = Date.parse("2026-01-01T00:00:00.000Z");
const claimOf = (token: string, now = t0) => ({
  scope: "tenant-a",
  key: "order-1",
  tool: "send_email",
  fingerprint: "f".repeat(64),
  token,
  leaseMs: 30_000,
  ttlMs: 86_400_000,
  now,
});

function sqliteCases(): RuntimeCase[] {
  const [ownDriver, ...otherDrivers] = runtimeSqliteDrivers[runtime.name];
  const cases: RuntimeCase[] = [
    {
      name: `sqliteStore: opens a path with ${runtime.name}'s own SQLite (${ownDriver}), in WAL mode`,
      run: async () => {
        const store = sqliteStore({ path: tempFile() });
        try {
          assert.equal(store.driver, ownDriver);
          assert.equal(pragma(store.database, "journal_mode"), "wal");
          store.migrate();
          assert.equal((await store.claim(claimOf("token-a"))).claimed, true);
        } finally {
          await store.close();
        }
      },
    },
    {
      name: "sqliteStore: waits on timers while another connection holds the write lock, then claims",
      run: async () => {
        const file = tempFile();
        const holder = sqliteStore({ path: file });
        const store = sqliteStore({ path: file, busyTimeoutMs: 5_000 });
        try {
          holder.migrate();
          holder.database.exec("BEGIN IMMEDIATE");
          // The other connection commits on a timer of this very thread. A claim that blocked the thread in
          // SQLite's busy handler would keep that timer from firing until it gave up; one that failed at the
          // first refusal would not wait at all. Only a claim that waits on timers gets the row, soon after.
          let committedAt: number | undefined;
          const commit = setTimeout(() => {
            holder.database.exec("COMMIT");
            committedAt = performance.now();
          }, 100);
          try {
            const claimed = await store.claim(claimOf("token-a"));
            const landedAt = performance.now();
            assert.ok(committedAt !== undefined, "the claim landed while the other connection held the lock");
            assert.equal(claimed.claimed, true);
            // The retries back off to 50 ms at most: far less than a second, however loaded the machine.
            assert.ok(
              landedAt - committedAt < 1_000,
              `claimed ${(landedAt - committedAt).toFixed(0)} ms after`,
            );
          } finally {
            clearTimeout(commit);
          }
        } finally {
          await store.close();
          await holder.close();
        }
      },
    },
  ];
  for (const other of otherDrivers) {
    cases.push({
      name: `sqliteStore: ${ownDriver} and ${other} write one file format: a record made by one holds for the other`,
      run: async () => {
        const file = tempFile();
        // One after the other: within one process, a file is open with one driver at a time (docs/stores.md).
        const one = sqliteStore({ path: file, driver: ownDriver });
        assert.equal((await one.claim(claimOf("token-a"))).claimed, true);
        await one.close();
        const two = sqliteStore({ path: file, driver: other });
        try {
          assert.equal(two.driver, other);
          const seen = await two.claim(claimOf("token-b", t0 + 1));
          assert.equal(seen.claimed, false);
          assert.equal(seen.record.token, "token-a");
        } finally {
          await two.close();
        }
      },
    });
  }
  if (runtime.name === "Bun") cases.push(...bunDatabaseCases());
  return cases;
}

type BunDatabase = new (
  file: string,
  options?: { strict?: boolean; safeIntegers?: boolean },
) => AnySqliteDatabase;

/** A bun:sqlite `Database` the caller opened, as `{ database }`. */
function bunDatabaseCases(): RuntimeCase[] {
  const { Database } = require("bun:sqlite") as { Database: BunDatabase };
  return [
    {
      name: "sqliteStore: takes a bun:sqlite Database opened with { strict: true }, and leaves it open",
      run: async () => {
        const database = new Database(tempFile(), { strict: true });
        const store = sqliteStore({ database });
        assert.equal(store.driver, "bun:sqlite");
        assert.equal((await store.claim(claimOf("token-a"))).claimed, true);
        assert.equal((await store.get({ scope: "tenant-a", key: "order-1" }, t0 + 1))?.token, "token-a");
        await store.close();
        assert.deepEqual(database.prepare("SELECT count(*) AS n FROM idempotool_records").get(), { n: 1 });
        database.close();
      },
    },
    {
      name: "sqliteStore: takes a bun:sqlite Database opened with { strict: true, safeIntegers: true }, reading numbers",
      run: async () => {
        // The caller's BigInt default is theirs: the store reads its own columns as numbers on any handle.
        const database = new Database(tempFile(), { strict: true, safeIntegers: true });
        try {
          const store = sqliteStore({ database });
          assert.equal((await store.claim(claimOf("token-a"))).claimed, true);
          const record = await store.get({ scope: "tenant-a", key: "order-1" }, t0 + 1);
          assert.equal(record?.createdAt, t0);
          assert.equal(record?.attempts, 1);
        } finally {
          database.close();
        }
      },
    },
    {
      name: "sqliteStore: refuses a bun:sqlite Database opened without { strict: true }, with invalid_options",
      run: async () => {
        const database = new Database(tempFile());
        try {
          assert.throws(() => sqliteStore({ database }), {
            code: "invalid_options",
            message: /open the bun:sqlite Database with \{ strict: true \}/,
          });
        } finally {
          database.close();
        }
      },
    },
  ];
}

/** Every store case for the running runtime. */
export function storeCases(): RuntimeCase[] {
  return [
    ...conformance("memoryStore", () => ({ store: memoryStore(), clock: fakeClock() })),
    ...conformance("tieredStore", () => ({
      store: tieredStore({ store: memoryStore(), maxEntries: 4 }),
      clock: fakeClock(),
    })),
    ...runtimeSqliteDrivers[runtime.name].flatMap(sqliteConformance),
    ...sqliteCases(),
  ];
}
