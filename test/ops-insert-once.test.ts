import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { isIdempotencyError, KeyConflictError } from "../src/index.js";
import { postgresInsertOnce, sqliteInsertOnce } from "../src/ops/index.js";
import { freshTable, testPool } from "./fixtures/pg-helpers.js";
import { type SqliteTestDatabase, type SqliteTestDriver, sqliteDrivers } from "./fixtures/sqlite-drivers.js";

interface Order {
  id: number;
  idempotency_key: string;
  item: string;
}

describe("postgresInsertOnce (OP-4)", () => {
  const pool = testPool({ max: 6 });
  let table = "";
  beforeEach(async () => {
    table = freshTable();
    await pool.query(
      `CREATE TABLE "${table}" (id serial PRIMARY KEY, idempotency_key text UNIQUE NOT NULL, item text)`,
    );
  });
  afterEach(() => pool.query(`DROP TABLE IF EXISTS "${table}"`));
  afterAll(() => pool.end());

  it("inserts the first time and hands back the existing row on a repeat", async () => {
    const request = { table, values: { idempotency_key: "k1", item: "book" }, conflict: ["idempotency_key"] };
    const first = await postgresInsertOnce<Order>(pool, request);
    const again = await postgresInsertOnce<Order>(pool, request);
    expect(first).toMatchObject({ inserted: true, row: { idempotency_key: "k1", item: "book" } });
    expect(again).toEqual({ inserted: false, row: first.row });
  });

  it("refuses the same key with other values as a conflict, and leaves the row as it was", async () => {
    const request = { table, values: { idempotency_key: "k1", item: "book" }, conflict: ["idempotency_key"] };
    const first = await postgresInsertOnce<Order>(pool, request);
    const repeat = postgresInsertOnce<Order>(pool, {
      ...request,
      values: { idempotency_key: "k1", item: "pen" },
    });
    await expect(repeat).rejects.toBeInstanceOf(KeyConflictError);
    const error: unknown = await repeat.catch((e: unknown) => e);
    expect(isIdempotencyError(error, "idempotency_key_conflict")).toBe(true);
    expect(error).toMatchObject({ key: "k1", tool: table, httpStatus: 422, originalCalledAt: "" });
    expect((error as Error).message).toMatch(
      /^Idempotency key "k1" was already used for \S+ with different arguments\./,
    );
    const { rows } = await pool.query(`SELECT * FROM "${table}"`);
    expect(rows).toEqual([first.row]);
    // A value turned into null is a change too.
    await expect(
      postgresInsertOnce(pool, { ...request, values: { idempotency_key: "k1", item: null } }),
    ).rejects.toMatchObject({ code: "idempotency_key_conflict" });
  });

  it("compares values as the column's type does, so another spelling of the same value is a repeat", async () => {
    const typed = freshTable();
    await pool.query(
      `CREATE TABLE "${typed}" (idempotency_key text PRIMARY KEY, amount numeric, due timestamptz, note text, tags jsonb)`,
    );
    try {
      const values = {
        idempotency_key: "k1",
        amount: 12.5,
        due: new Date("2025-03-01T10:00:00Z"),
        note: null,
        tags: JSON.stringify({ a: 1, b: [2] }),
      };
      const first = await postgresInsertOnce(pool, { table: typed, values, conflict: ["idempotency_key"] });
      const again = await postgresInsertOnce(pool, {
        table: typed,
        values: { ...values, amount: "12.50", due: "2025-03-01T11:00:00+01:00", tags: '{"b":[2],"a":1}' },
        conflict: ["idempotency_key"],
      });
      expect(again).toEqual({ inserted: false, row: first.row });
      await expect(
        postgresInsertOnce(pool, {
          table: typed,
          values: { ...values, amount: 12.51 },
          conflict: ["idempotency_key"],
        }),
      ).rejects.toMatchObject({ code: "idempotency_key_conflict" });
    } finally {
      await pool.query(`DROP TABLE IF EXISTS "${typed}"`);
    }
  });

  it("compares only the compare columns when given, so a value made per attempt may differ", async () => {
    const stamped = freshTable();
    await pool.query(
      `CREATE TABLE "${stamped}" (idempotency_key text PRIMARY KEY, item text, asked_at bigint)`,
    );
    try {
      const request = (item: string, askedAt: number) => ({
        table: stamped,
        values: { idempotency_key: "k1", item, asked_at: askedAt },
        conflict: ["idempotency_key"],
        compare: ["item"],
      });
      const first = await postgresInsertOnce(pool, request("book", 1));
      expect(await postgresInsertOnce(pool, request("book", 2))).toEqual({ inserted: false, row: first.row });
      await expect(postgresInsertOnce(pool, request("pen", 3))).rejects.toMatchObject({
        code: "idempotency_key_conflict",
      });
      await expect(
        postgresInsertOnce(pool, { ...request("book", 1), compare: ["price"] }),
      ).rejects.toMatchObject({ code: "invalid_arguments" });
    } finally {
      await pool.query(`DROP TABLE IF EXISTS "${stamped}"`);
    }
  });

  it("inserts once when many callers race on one key", async () => {
    const request = { table, values: { idempotency_key: "k1", item: "book" }, conflict: ["idempotency_key"] };
    const results = await Promise.all(
      Array.from({ length: 8 }, () => postgresInsertOnce<Order>(pool, request)),
    );
    expect(results.filter((r) => r.inserted)).toHaveLength(1);
    expect(new Set(results.map((r) => r.row.id)).size).toBe(1);
  });

  it("waits for an uncommitted insert of the same key and then returns it", async () => {
    const tx = await pool.connect();
    await tx.query("BEGIN");
    const request = { table, values: { idempotency_key: "k1", item: "book" }, conflict: ["idempotency_key"] };
    expect((await postgresInsertOnce<Order>(tx, request)).inserted).toBe(true);
    const waiting = postgresInsertOnce<Order>(pool, request);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await tx.query("COMMIT");
    tx.release();
    expect(await waiting).toMatchObject({ inserted: false, row: { item: "book" } });
  });

  it("refuses unsafe identifiers and keeps values parameterized", async () => {
    await expect(
      postgresInsertOnce(pool, { table: "orders; DROP TABLE x", values: { a: 1 }, conflict: ["a"] }),
    ).rejects.toMatchObject({ code: "invalid_options" });
    await expect(
      postgresInsertOnce(pool, { table, values: { 'item" text': 1 }, conflict: ['item" text'] }),
    ).rejects.toMatchObject({ code: "invalid_options" });
    const sneaky = "k'); DROP TABLE orders; --";
    const { row } = await postgresInsertOnce<Order>(pool, {
      table,
      values: { idempotency_key: sneaky, item: "x" },
      conflict: ["idempotency_key"],
    });
    expect(row.idempotency_key).toBe(sneaky);
  });

  it("requires the conflict columns among the values", async () => {
    await expect(
      postgresInsertOnce(pool, { table, values: { item: "x" }, conflict: ["idempotency_key"] }),
    ).rejects.toMatchObject({
      code: "invalid_arguments",
    });
  });
});

for (const driver of sqliteDrivers) sqliteInsertOnceSpecs(driver);

function sqliteInsertOnceSpecs(driver: SqliteTestDriver) {
  describe(`sqliteInsertOnce (OP-4) on ${driver.name}`, () => {
    let db: SqliteTestDatabase;
    beforeEach(() => {
      db = driver.open(":memory:");
      db.exec(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, idempotency_key TEXT UNIQUE NOT NULL, item TEXT, paid INTEGER)",
      );
    });
    afterEach(() => db.close());

    it("inserts the first time and hands back the existing row on a repeat", () => {
      const request = {
        table: "orders",
        values: { idempotency_key: "k1", item: "book", paid: true },
        conflict: ["idempotency_key"],
      };
      const first = sqliteInsertOnce<Order>(db, request);
      const again = sqliteInsertOnce<Order>(db, request);
      expect(first).toMatchObject({ inserted: true, row: { idempotency_key: "k1", item: "book", paid: 1 } });
      expect(again).toEqual({ inserted: false, row: first.row });
      expect(db.prepare("SELECT count(*) AS n FROM orders").get()).toEqual({ n: 1 });
    });

    it("hands back the existing row on a repeat when the database reads integers as BigInt", () => {
      const bigInts = driver.open(":memory:", { bigInts: true });
      try {
        bigInts.exec("CREATE TABLE orders (id INTEGER PRIMARY KEY, idempotency_key TEXT UNIQUE, item TEXT)");
        const request = {
          table: "orders",
          values: { idempotency_key: "k1", item: "book" },
          conflict: ["idempotency_key"],
        };
        const first = sqliteInsertOnce(bigInts, request);
        expect(sqliteInsertOnce(bigInts, request)).toEqual({ inserted: false, row: first.row });
        expect(() =>
          sqliteInsertOnce(bigInts, { ...request, values: { idempotency_key: "k1", item: "pen" } }),
        ).toThrow(KeyConflictError);
      } finally {
        bigInts.close();
      }
    });

    it("refuses the same key with other values as a conflict, and leaves the row as it was", () => {
      const request = {
        table: "orders",
        values: { idempotency_key: "k1", item: "book", paid: true },
        conflict: ["idempotency_key"],
      };
      const first = sqliteInsertOnce<Order>(db, request);
      const conflicting = () =>
        sqliteInsertOnce(db, { ...request, values: { idempotency_key: "k1", item: "pen", paid: true } });
      expect(conflicting).toThrow(KeyConflictError);
      expect(conflicting).toThrow(expect.objectContaining({ code: "idempotency_key_conflict", key: "k1" }));
      expect(() =>
        sqliteInsertOnce(db, { ...request, values: { idempotency_key: "k1", item: "book", paid: null } }),
      ).toThrow(KeyConflictError);
      expect(db.prepare("SELECT * FROM orders").all()).toEqual([first.row]);
      // true is stored as 1: the same value, so a repeat.
      expect(
        sqliteInsertOnce(db, { ...request, values: { idempotency_key: "k1", item: "book", paid: 1 } }),
      ).toEqual({ inserted: false, row: first.row });
    });

    it("compares only the compare columns when given", () => {
      const request = (item: string, paid: boolean) => ({
        table: "orders",
        values: { idempotency_key: "k1", item, paid },
        conflict: ["idempotency_key"],
        compare: ["item"],
      });
      const first = sqliteInsertOnce<Order>(db, request("book", false));
      expect(sqliteInsertOnce(db, request("book", true))).toEqual({ inserted: false, row: first.row });
      expect(() => sqliteInsertOnce(db, request("pen", false))).toThrow(KeyConflictError);
    });

    it("refuses unsafe identifiers", () => {
      expect(() => sqliteInsertOnce(db, { table: "orders--", values: { a: 1 }, conflict: ["a"] })).toThrow(
        /safe SQL identifier/,
      );
      expect(() => sqliteInsertOnce(db, { table: "main.orders", values: { a: 1 }, conflict: ["a"] })).toThrow(
        /safe SQL identifier/,
      );
    });
  });
}
