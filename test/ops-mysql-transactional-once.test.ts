import type mysql from "mysql2/promise";
import { afterAll, afterEach, beforeEach, describe, expect, expectTypeOf, it } from "vitest";
import { isIdempotencyError, KeyConflictError } from "../src/core/errors.js";
import {
  type MysqlPoolLike,
  mysqlDedupTableSql,
  mysqlTransactionalOnce,
  type TransactionalOnceOptions,
} from "../src/ops/index.js";
import { dropMysqlTable, freshMysqlTable, testMysqlPool } from "./fixtures/mysql-helpers.js";

describe("mysqlTransactionalOnce (OP-2)", () => {
  const pool = testMysqlPool({ connectionLimit: 6 });
  let dedup = "";
  let orders = "";
  let runs = 0;
  beforeEach(async () => {
    runs = 0;
    dedup = freshMysqlTable();
    orders = freshMysqlTable();
    await pool.query(mysqlDedupTableSql(dedup));
    await pool.query(
      `CREATE TABLE \`${orders}\` (id INT AUTO_INCREMENT PRIMARY KEY, item VARCHAR(64) NOT NULL)`,
    );
  });
  afterEach(async () => {
    await dropMysqlTable(pool, dedup);
    await dropMysqlTable(pool, orders);
  });
  afterAll(() => pool.end());

  const count = async (table = orders) => {
    const [rows] = await pool.query(`SELECT count(*) AS n FROM \`${table}\``);
    return Number((rows as { n: number }[])[0]!.n);
  };
  const placeOrder =
    (item: string, delayMs = 0) =>
    async (tx: mysql.PoolConnection) => {
      runs++;
      const [inserted] = await tx.query(`INSERT INTO \`${orders}\` (item) VALUES (?)`, [item]);
      if (delayMs) await new Promise((resolve) => setTimeout(resolve, delayMs));
      return { orderId: (inserted as mysql.ResultSetHeader).insertId };
    };
  const options = (key = "k1", args: unknown = { item: "book" }): TransactionalOnceOptions => ({
    table: dedup,
    tool: "place_order",
    key,
    args,
  });

  it("commits the business write and the key together, and replays the stored result without running", async () => {
    const first = await mysqlTransactionalOnce(pool, options(), placeOrder("book"));
    const again = await mysqlTransactionalOnce(pool, options(), placeOrder("book"));
    expect(first.was_replay).toBe(false);
    expect(again).toEqual({ ...first, was_replay: true });
    expect(runs).toBe(1);
    expect(await count()).toBe(1);
  });

  it("leaves neither the write nor the key when the write throws, so a retry runs once", async () => {
    await expect(
      mysqlTransactionalOnce(pool, options(), async (tx) => {
        await placeOrder("book")(tx);
        throw new Error("boom after the write");
      }),
    ).rejects.toThrow("boom after the write");
    expect(await count()).toBe(0);
    expect((await mysqlTransactionalOnce(pool, options(), placeOrder("book"))).was_replay).toBe(false);
    expect(await count()).toBe(1);
  });

  it("refuses the same key with other arguments, or committed by another tool, without running", async () => {
    await mysqlTransactionalOnce(pool, options(), placeOrder("book"));
    const other = await mysqlTransactionalOnce(pool, options("k1", { item: "pen" }), placeOrder("pen")).catch(
      (e: unknown) => e,
    );
    expect(isIdempotencyError(other, "idempotency_key_conflict")).toBe(true);
    const refund = await mysqlTransactionalOnce(
      pool,
      { ...options(), tool: "refund" },
      placeOrder("refund"),
    ).catch((e: unknown) => e);
    expect(refund).toBeInstanceOf(KeyConflictError);
    expect(refund).toMatchObject({ originalTool: "place_order", tool: "refund" });
    expect(runs).toBe(1);
    expect(await count()).toBe(1);
  });

  it("runs concurrent repeats on several connections once: the others wait on the key, then replay", async () => {
    const calls = await Promise.all(
      [0, 1, 2].map(() => mysqlTransactionalOnce(pool, options(), placeOrder("book", 150))),
    );
    expect(calls.filter((c) => !c.was_replay)).toHaveLength(1);
    expect(new Set(calls.map((c) => JSON.stringify(c.result))).size).toBe(1);
    expect(await count()).toBe(1);
  });

  it("lets a waiting repeat run when the first rolls back", async () => {
    const failing = mysqlTransactionalOnce(pool, options(), async (tx) => {
      await placeOrder("book", 150)(tx);
      throw new Error("rolled back");
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    const second = mysqlTransactionalOnce(pool, options(), placeOrder("book"));
    await expect(failing).rejects.toThrow("rolled back");
    expect((await second).was_replay).toBe(false);
    expect(await count()).toBe(1);
  });

  it("takes over an expired row, judged by the server's clock", async () => {
    await mysqlTransactionalOnce(pool, options(), placeOrder("book"));
    await pool.query(`UPDATE \`${dedup}\` SET expires_at = 0`);
    const later = await mysqlTransactionalOnce(pool, options("k1", { item: "pen" }), placeOrder("pen"));
    expect(later.was_replay).toBe(false);
    expect(await count()).toBe(2);
    expect(await count(dedup)).toBe(1);
    expect(
      (await mysqlTransactionalOnce(pool, options("k1", { item: "pen" }), placeOrder("pen"))).was_replay,
    ).toBe(true);
  });

  it("keeps keys and results apart byte for byte, whatever the connection's character set", async () => {
    // On a latin1 connection, text the character set cannot hold would reach the server as "?".
    const latin1 = testMysqlPool({ connectionLimit: 1, charset: "LATIN1_SWEDISH_CI" });
    try {
      const write = (item: string) => async (tx: mysql.PoolConnection) => {
        await placeOrder(item)(tx);
        return { item };
      };
      const a = await mysqlTransactionalOnce(latin1, { ...options("order-漢"), args: {} }, write("漢"));
      const b = await mysqlTransactionalOnce(latin1, { ...options("order-字"), args: {} }, write("字"));
      expect([a.was_replay, b.was_replay]).toEqual([false, false]);
      const replay = await mysqlTransactionalOnce(latin1, { ...options("order-漢"), args: {} }, write("漢"));
      expect(replay).toMatchObject({ was_replay: true, result: { item: "漢" } });
      expect(runs).toBe(2);
    } finally {
      await latin1.end();
    }
  });

  it("rejects a scope longer than a key column holds before touching the database", async () => {
    await expect(
      mysqlTransactionalOnce(pool, { ...options(), scope: "s".repeat(256) }, placeOrder("book")),
    ).rejects.toMatchObject({ code: "invalid_arguments" });
    expect(runs).toBe(0);
  });

  it("accepts a mysql2 promise pool and hands the write its pool connection", () => {
    expectTypeOf<mysql.Pool>().toExtend<MysqlPoolLike<mysql.PoolConnection>>();
    expectTypeOf(mysqlTransactionalOnce<mysql.PoolConnection, number>)
      .parameter(2)
      .toEqualTypeOf<(tx: mysql.PoolConnection) => Promise<number>>();
  });
});
