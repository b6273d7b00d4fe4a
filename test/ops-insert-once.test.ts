import Database from "better-sqlite3";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { postgresInsertOnce, sqliteInsertOnce } from "../src/ops/index.js";
import { freshTable, testPool } from "./fixtures/pg-helpers.js";

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
    const again = await postgresInsertOnce<Order>(pool, {
      ...request,
      values: { idempotency_key: "k1", item: "pen" },
    });
    expect(first).toMatchObject({ inserted: true, row: { idempotency_key: "k1", item: "book" } });
    expect(again).toEqual({ inserted: false, row: first.row });
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

describe("sqliteInsertOnce (OP-4)", () => {
  let db: Database.Database;
  beforeEach(() => {
    db = new Database(":memory:");
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

  it("refuses unsafe identifiers", () => {
    expect(() => sqliteInsertOnce(db, { table: "orders--", values: { a: 1 }, conflict: ["a"] })).toThrow(
      /safe SQL identifier/,
    );
    expect(() => sqliteInsertOnce(db, { table: "main.orders", values: { a: 1 }, conflict: ["a"] })).toThrow(
      /safe SQL identifier/,
    );
  });
});
