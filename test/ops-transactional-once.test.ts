import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type Database from "better-sqlite3";
import type pg from "pg";
import { afterAll, afterEach, beforeEach, describe, expect, expectTypeOf, it } from "vitest";
import { isIdempotencyError, KeyConflictError } from "../src/core/errors.js";
import { fingerprint } from "../src/core/fingerprint.js";
import {
  type PgPoolLike,
  type PgTransactionClient,
  postgresDedupTableSql,
  postgresTransactionalOnce,
  type SqliteDatabaseLike,
  sqliteDedupTableSql,
  sqliteTransactionalOnce,
  type TransactionalOnceOptions,
} from "../src/ops/index.js";
import { freshTable, pgUrl, testPool } from "./fixtures/pg-helpers.js";
import { type SqliteTestDatabase, type SqliteTestDriver, sqliteDrivers } from "./fixtures/sqlite-drivers.js";

describe("postgresTransactionalOnce (OP-2)", () => {
  const pool = testPool({ max: 6 });
  let dedup = "";
  let orders = "";
  beforeEach(async () => {
    dedup = freshTable();
    orders = freshTable();
    await pool.query(postgresDedupTableSql(dedup));
    await pool.query(`CREATE TABLE "${orders}" (id serial PRIMARY KEY, item text NOT NULL)`);
  });
  afterEach(async () => {
    await pool.query(`DROP TABLE IF EXISTS "${dedup}"`);
    await pool.query(`DROP TABLE IF EXISTS "${orders}"`);
  });
  afterAll(() => pool.end());

  const countOrders = async () =>
    Number((await pool.query(`SELECT count(*) AS n FROM "${orders}"`)).rows[0].n);
  const placeOrder =
    (item: string, delayMs = 0) =>
    async (tx: PgTransactionClient) => {
      const { rows } = await tx.query(`INSERT INTO "${orders}" (item) VALUES ($1) RETURNING id`, [item]);
      if (delayMs) await new Promise((resolve) => setTimeout(resolve, delayMs));
      return { orderId: (rows[0] as { id: number }).id };
    };

  it("commits the business write and the key together, and replays the stored result without running", async () => {
    const first = await postgresTransactionalOnce(
      pool,
      { table: dedup, tool: "place_order", key: "k1", args: { item: "book" } },
      placeOrder("book"),
    );
    const again = await postgresTransactionalOnce(
      pool,
      { table: dedup, tool: "place_order", key: "k1", args: { item: "book" } },
      placeOrder("book"),
    );
    expect(first.was_replay).toBe(false);
    expect(again).toMatchObject({
      was_replay: true,
      result: first.result,
      original_called_at: first.original_called_at,
    });
    expect(await countOrders()).toBe(1);
  });

  it("leaves neither the write nor the key when the write throws, so a retry runs once", async () => {
    await expect(
      postgresTransactionalOnce(
        pool,
        { table: dedup, tool: "place_order", key: "k1", args: {} },
        async (tx) => {
          await placeOrder("book")(tx);
          throw new Error("boom after the write");
        },
      ),
    ).rejects.toThrow("boom after the write");
    expect(await countOrders()).toBe(0);
    const retry = await postgresTransactionalOnce(
      pool,
      { table: dedup, tool: "place_order", key: "k1", args: {} },
      placeOrder("book"),
    );
    expect(retry.was_replay).toBe(false);
    expect(await countOrders()).toBe(1);
  });

  it("refuses the same key with different arguments, without running", async () => {
    await postgresTransactionalOnce(
      pool,
      { table: dedup, tool: "place_order", key: "k1", args: { item: "book" } },
      placeOrder("book"),
    );
    const error = await postgresTransactionalOnce(
      pool,
      { table: dedup, tool: "place_order", key: "k1", args: { item: "pen" } },
      placeOrder("pen"),
    ).catch((e: unknown) => e);
    expect(isIdempotencyError(error, "idempotency_key_conflict")).toBe(true);
    expect(await countOrders()).toBe(1);
  });

  it("runs concurrent repeats on two connections once: the second waits on the key, then replays", async () => {
    const calls = await Promise.all(
      [0, 1, 2].map(() =>
        postgresTransactionalOnce(
          pool,
          { table: dedup, tool: "place_order", key: "k1", args: { item: "book" } },
          placeOrder("book", 150),
        ),
      ),
    );
    expect(calls.filter((c) => !c.was_replay)).toHaveLength(1);
    expect(new Set(calls.map((c) => JSON.stringify(c.result))).size).toBe(1);
    expect(await countOrders()).toBe(1);
  });

  it("lets a concurrent repeat run when the first rolls back", async () => {
    const failing = postgresTransactionalOnce(
      pool,
      { table: dedup, tool: "place_order", key: "k1", args: {} },
      async (tx) => {
        await placeOrder("book", 150)(tx);
        throw new Error("rolled back");
      },
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    const second = postgresTransactionalOnce(
      pool,
      { table: dedup, tool: "place_order", key: "k1", args: {} },
      placeOrder("book"),
    );
    await expect(failing).rejects.toThrow("rolled back");
    expect((await second).was_replay).toBe(false);
    expect(await countOrders()).toBe(1);
  });

  it("leaves neither the write nor the key when the process is killed before commit", async () => {
    const ops = fileURLToPath(new URL("../src/ops/index.ts", import.meta.url));
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        "--input-type=module",
        "-e",
        `import pg from "pg";
         import { postgresTransactionalOnce } from ${JSON.stringify(ops)};
         const pool = new pg.Pool({ connectionString: ${JSON.stringify(pgUrl)} });
         await postgresTransactionalOnce(pool, { table: ${JSON.stringify(dedup)}, tool: "place_order", key: "k1", args: {} }, async (tx) => {
           await tx.query('INSERT INTO "${orders}" (item) VALUES ($1)', ["book"]);
           process.stdout.write("written\\n");
           await new Promise(() => setInterval(() => {}, 1000));
         });`,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    const [line] = (await once(child.stdout, "data")) as [Buffer];
    expect(line.toString()).toBe("written\n");
    child.kill("SIGKILL");
    await once(child, "exit");
    // The server rolls the dead session back; the retry may wait on the key until it has.
    const retry = await postgresTransactionalOnce(
      pool,
      { table: dedup, tool: "place_order", key: "k1", args: {} },
      placeOrder("book"),
    );
    expect(retry.was_replay).toBe(false);
    expect(await countOrders()).toBe(1);
  });

  it("keeps a key in its scope", async () => {
    await postgresTransactionalOnce(
      pool,
      { table: dedup, tool: "place_order", key: "k1", scope: "a", args: {} },
      placeOrder("x"),
    );
    const other = await postgresTransactionalOnce(
      pool,
      { table: dedup, tool: "place_order", key: "k1", scope: "b", args: {} },
      placeOrder("x"),
    );
    expect(other.was_replay).toBe(false);
    expect(await countOrders()).toBe(2);
  });

  it("refuses a key another tool committed, naming both tools, and runs nothing", async () => {
    // A charge and its refund, both keyed by the order id, share one dedup table.
    const charge = await postgresTransactionalOnce(
      pool,
      { table: dedup, tool: "charge", key: "order-7", args: { order: 7 } },
      placeOrder("charge"),
    );
    const refund = await postgresTransactionalOnce(
      pool,
      { table: dedup, tool: "refund", key: "order-7", args: { order: 7 } },
      placeOrder("refund"),
    ).catch((e: unknown) => e);
    expect(refund).toBeInstanceOf(KeyConflictError);
    expect(refund).toMatchObject({
      code: "idempotency_key_conflict",
      key: "order-7",
      originalTool: "charge",
      tool: "refund",
      originalCalledAt: charge.original_called_at,
    });
    expect((refund as Error).message).toContain("by the tool charge; this call is refund");
    expect(await countOrders()).toBe(1);
    // The charge itself still replays.
    const again = await postgresTransactionalOnce(
      pool,
      { table: dedup, tool: "charge", key: "order-7", args: { order: 7 } },
      placeOrder("charge"),
    );
    expect(again).toMatchObject({ was_replay: true, result: charge.result });
  });

  it("refuses a call without a tool before touching the database", async () => {
    let writes = 0;
    for (const tool of [undefined, "", "  ", 7]) {
      const options = {
        table: "no_such_table",
        key: "k1",
        args: {},
        tool,
      } as unknown as TransactionalOnceOptions;
      await expect(
        postgresTransactionalOnce(pool, options, async () => {
          writes++;
        }),
      ).rejects.toMatchObject({ code: "invalid_options", message: expect.stringContaining("`tool`") });
    }
    expect(writes).toBe(0);
  });

  it("on a table made before the tool column, says the ALTER TABLE to run, then refuses the rows made before", async () => {
    const legacy = freshTable();
    try {
      await pool.query(
        `CREATE TABLE "${legacy}" (scope text NOT NULL, key text NOT NULL, fingerprint text NOT NULL, result text, ` +
          "created_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL, PRIMARY KEY (scope, key))",
      );
      // A row an earlier build committed: it does not say which tool made it.
      await pool.query(
        `INSERT INTO "${legacy}" (scope, key, fingerprint, result, expires_at) ` +
          "VALUES ('default', 'order-7', $1, '{\"orderId\":1}', now() + interval '1 hour')",
        [fingerprint({ order: 7 })],
      );
      const once = (key: string) =>
        postgresTransactionalOnce(
          pool,
          { table: legacy, tool: "refund", key, args: { order: 7 } },
          placeOrder("refund"),
        );
      const missing = await once("order-8").catch((e: unknown) => e);
      expect(missing).toMatchObject({ code: "invalid_options" });
      const alter = /ALTER TABLE \S+ ADD COLUMN tool text/.exec((missing as Error).message)?.[0];
      expect(alter).toBe(`ALTER TABLE "${legacy}" ADD COLUMN tool text`);
      expect(await countOrders()).toBe(0);

      await pool.query(alter!);
      const old = await once("order-7").catch((e: unknown) => e);
      expect(old).toBeInstanceOf(KeyConflictError);
      expect(old).toMatchObject({ originalTool: "", tool: "refund", key: "order-7" });
      expect(await countOrders()).toBe(0);
      const fresh = await once("order-8");
      expect(fresh.was_replay).toBe(false);
      expect((await once("order-8")).was_replay).toBe(true);
      expect(await countOrders()).toBe(1);
    } finally {
      await pool.query(`DROP TABLE IF EXISTS "${legacy}"`);
    }
  });

  it("rejects an unsafe table name before touching the database", async () => {
    await expect(
      postgresTransactionalOnce(
        pool,
        { table: 'x"; DROP TABLE y; --', tool: "place_order", key: "k", args: {} },
        async () => 1,
      ),
    ).rejects.toMatchObject({ code: "invalid_options" });
  });
});

for (const driver of sqliteDrivers) sqliteTransactionalOnceSpecs(driver);

function sqliteTransactionalOnceSpecs(driver: SqliteTestDriver) {
  describe(`sqliteTransactionalOnce (OP-2) on ${driver.name}`, () => {
    let dir = "";
    let file = "";
    beforeEach(() => {
      dir = mkdtempSync(join(tmpdir(), "idempotool-op2-"));
      file = join(dir, "app.db");
      const db = driver.open(file);
      db.exec("PRAGMA journal_mode = WAL");
      db.exec(sqliteDedupTableSql("dedup"));
      db.exec("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)");
      db.close();
    });
    afterEach(() => rmSync(dir, { recursive: true, force: true }));

    const open = () => driver.open(file, { timeoutMs: 5_000 });
    const count = (db: SqliteTestDatabase) =>
      (db.prepare("SELECT count(*) AS n FROM orders").get() as { n: number }).n;
    const placeOrder = (item: string) => (tx: SqliteTestDatabase) => {
      const inserted = tx.prepare("INSERT INTO orders (item) VALUES (?)").run(item) as unknown as {
        lastInsertRowid: number | bigint;
      };
      return { orderId: Number(inserted.lastInsertRowid) };
    };

    it("commits the business write and the key together, and replays the stored result without running", async () => {
      const db = open();
      const first = await sqliteTransactionalOnce(
        db,
        { table: "dedup", tool: "place_order", key: "k1", args: { item: "book" } },
        placeOrder("book"),
      );
      const again = await sqliteTransactionalOnce(
        db,
        { table: "dedup", tool: "place_order", key: "k1", args: { item: "book" } },
        placeOrder("book"),
      );
      expect(first.was_replay).toBe(false);
      expect(again).toMatchObject({ was_replay: true, result: first.result });
      expect(count(db)).toBe(1);
      db.close();
    });

    it("replays on a connection that reads integers as BigInt, as the first call committed it", async () => {
      const db = driver.open(file, { timeoutMs: 5_000, bigInts: true });
      const options = { table: "dedup", tool: "place_order", key: "k1", args: { item: "book" } };
      const first = await sqliteTransactionalOnce(db, options, placeOrder("book"));
      const again = await sqliteTransactionalOnce(db, options, placeOrder("book"));
      expect(again).toEqual({ ...first, was_replay: true });
      expect(Number(count(db))).toBe(1);
      db.close();
    });

    it("leaves neither the write nor the key when an async write throws, so a retry runs once", async () => {
      const db = open();
      await expect(
        sqliteTransactionalOnce(
          db,
          { table: "dedup", tool: "place_order", key: "k1", args: {} },
          async (tx) => {
            placeOrder("book")(tx);
            await new Promise((resolve) => setTimeout(resolve, 5));
            throw new Error("boom");
          },
        ),
      ).rejects.toThrow("boom");
      expect(count(db)).toBe(0);
      expect(
        (
          await sqliteTransactionalOnce(
            db,
            { table: "dedup", tool: "place_order", key: "k1", args: {} },
            placeOrder("book"),
          )
        ).was_replay,
      ).toBe(false);
      expect(count(db)).toBe(1);
      db.close();
    });

    it("refuses the same key with different arguments", async () => {
      const db = open();
      await sqliteTransactionalOnce(
        db,
        { table: "dedup", tool: "place_order", key: "k1", args: { item: "book" } },
        placeOrder("book"),
      );
      await expect(
        sqliteTransactionalOnce(
          db,
          { table: "dedup", tool: "place_order", key: "k1", args: { item: "pen" } },
          placeOrder("pen"),
        ),
      ).rejects.toMatchObject({ code: "idempotency_key_conflict" });
      expect(count(db)).toBe(1);
      db.close();
    });

    it("runs concurrent repeats once, on one connection and across two", async () => {
      const a = open();
      const b = open();
      const slow = async (tx: SqliteTestDatabase) => {
        const out = placeOrder("book")(tx);
        await new Promise((resolve) => setTimeout(resolve, 50));
        return out;
      };
      const onOne = await Promise.all(
        [0, 1, 2].map(() =>
          sqliteTransactionalOnce(a, { table: "dedup", tool: "place_order", key: "k1", args: {} }, slow),
        ),
      );
      expect(onOne.filter((c) => !c.was_replay)).toHaveLength(1);
      // A second connection in the same process cannot wait for a's async write (the driver blocks the
      // event loop while it waits on the lock): it fails busy without writing, and replays once a committed.
      const busy = driver.open(file, { timeoutMs: 50 });
      const first = sqliteTransactionalOnce(
        a,
        { table: "dedup", tool: "place_order", key: "k2", args: {} },
        slow,
      );
      await expect(
        sqliteTransactionalOnce(
          busy,
          { table: "dedup", tool: "place_order", key: "k2", args: {} },
          placeOrder("book"),
        ),
      ).rejects.toMatchObject(driver.lockBusy);
      expect((await first).was_replay).toBe(false);
      expect(
        (
          await sqliteTransactionalOnce(
            b,
            { table: "dedup", tool: "place_order", key: "k2", args: {} },
            placeOrder("book"),
          )
        ).was_replay,
      ).toBe(true);
      expect(count(a)).toBe(2);
      busy.close();
      a.close();
      b.close();
    });

    it("refuses a key another tool committed, naming both tools, and runs nothing", async () => {
      const db = open();
      const charge = await sqliteTransactionalOnce(
        db,
        { table: "dedup", tool: "charge", key: "order-7", args: { order: 7 } },
        placeOrder("charge"),
      );
      const refund = await sqliteTransactionalOnce(
        db,
        { table: "dedup", tool: "refund", key: "order-7", args: { order: 7 } },
        placeOrder("refund"),
      ).catch((e: unknown) => e);
      expect(refund).toBeInstanceOf(KeyConflictError);
      expect(refund).toMatchObject({
        code: "idempotency_key_conflict",
        key: "order-7",
        originalTool: "charge",
        tool: "refund",
        originalCalledAt: charge.original_called_at,
      });
      expect(count(db)).toBe(1);
      const again = await sqliteTransactionalOnce(
        db,
        { table: "dedup", tool: "charge", key: "order-7", args: { order: 7 } },
        placeOrder("charge"),
      );
      expect(again).toMatchObject({ was_replay: true, result: charge.result });
      db.close();
    });

    it("refuses a call without a tool before touching the database", async () => {
      const db = open();
      const options = { table: "dedup", key: "k1", args: {} } as unknown as TransactionalOnceOptions;
      await expect(sqliteTransactionalOnce(db, options, placeOrder("book"))).rejects.toMatchObject({
        code: "invalid_options",
        message: expect.stringContaining("`tool`"),
      });
      expect(count(db)).toBe(0);
      db.close();
    });

    it("on a table made before the tool column, says the ALTER TABLE to run, then refuses the rows made before", async () => {
      const db = open();
      db.exec(
        "CREATE TABLE legacy (scope TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL, result TEXT, " +
          "created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, PRIMARY KEY (scope, key)) WITHOUT ROWID",
      );
      // A row an earlier build committed: it does not say which tool made it.
      db.prepare("INSERT INTO legacy VALUES ('default', 'order-7', ?, '{\"orderId\":1}', ?, ?)").run(
        fingerprint({ order: 7 }),
        Date.now(),
        Date.now() + 3_600_000,
      );
      const once = (key: string) =>
        sqliteTransactionalOnce(
          db,
          { table: "legacy", tool: "refund", key, args: { order: 7 } },
          placeOrder("refund"),
        );
      const missing = await once("order-8").catch((e: unknown) => e);
      expect(missing).toMatchObject({ code: "invalid_options" });
      const alter = /ALTER TABLE \S+ ADD COLUMN tool text/.exec((missing as Error).message)?.[0];
      expect(alter).toBe('ALTER TABLE "legacy" ADD COLUMN tool text');
      expect(driver.inTransaction(db)).toBe(false);

      db.exec(alter!);
      const old = await once("order-7").catch((e: unknown) => e);
      expect(old).toBeInstanceOf(KeyConflictError);
      expect(old).toMatchObject({ originalTool: "", tool: "refund", key: "order-7" });
      expect((await once("order-8")).was_replay).toBe(false);
      expect((await once("order-8")).was_replay).toBe(true);
      expect(count(db)).toBe(1);
      db.close();
    });

    it("frees the key once its window passes", async () => {
      const db = open();
      let now = 1_000_000;
      const clock = { now: () => now, sleep: async () => {} };
      await sqliteTransactionalOnce(
        db,
        { table: "dedup", tool: "place_order", key: "k1", args: {}, ttlMs: 1000, clock },
        placeOrder("a"),
      );
      now += 1001;
      const later = await sqliteTransactionalOnce(
        db,
        { table: "dedup", tool: "place_order", key: "k1", args: {}, ttlMs: 1000, clock },
        placeOrder("a"),
      );
      expect(later.was_replay).toBe(false);
      expect(count(db)).toBe(2);
      db.close();
    });
  });
}

describe("shapes", () => {
  it("accepts a pg.Pool and hands the write a pg.PoolClient", () => {
    expectTypeOf<pg.Pool>().toExtend<PgPoolLike<pg.PoolClient>>();
    expectTypeOf<Database.Database>().toExtend<SqliteDatabaseLike>();
    expectTypeOf(postgresTransactionalOnce<pg.PoolClient, number>)
      .parameter(2)
      .toEqualTypeOf<(tx: pg.PoolClient) => Promise<number>>();
  });
});
