/**
 * transactionalOnce (OP-2) inside the transaction an ORM opened: Kysely, knex and Drizzle, each on
 * PostgreSQL, MySQL (MariaDB here) and SQLite, against the real libraries and servers.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { drizzle as drizzleSqliteSync } from "drizzle-orm/better-sqlite3";
import { int as mysqlInt, mysqlTable, varchar } from "drizzle-orm/mysql-core";
import { drizzle as drizzleMysql } from "drizzle-orm/mysql2";
import { drizzle as drizzlePg } from "drizzle-orm/node-postgres";
import { pgTable, text as pgText, serial } from "drizzle-orm/pg-core";
import { integer, sqliteTable, text as sqliteText } from "drizzle-orm/sqlite-core";
import { drizzle as drizzleSqliteProxy } from "drizzle-orm/sqlite-proxy";
import createKnex from "knex";
import {
  CamelCasePlugin,
  Kysely,
  MysqlDialect,
  ParseJSONResultsPlugin,
  PostgresDialect,
  SqliteDialect,
} from "kysely";
import { createPool as createCallbackPool } from "mysql2";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { isIdempotencyError } from "../src/core/errors.js";
import {
  mysqlDedupTableSql,
  postgresDedupTableSql,
  sqliteDedupTableSql,
  type TransactionalOnceOptions,
  transactionalOnce,
} from "../src/ops/index.js";
import { dropMysqlTable, freshMysqlTable, mysqlUrl, testMysqlPool } from "./fixtures/mysql-helpers.js";
import { freshTable, pgUrl, testPool } from "./fixtures/pg-helpers.js";

type Dialect = "postgres" | "mysql" | "sqlite";

/** One ORM on one database, as the specs drive it. */
interface Harness {
  /** Runs `body` in a transaction the ORM opens; the body gets the ORM's transaction object. */
  transaction<R>(body: (tx: object) => Promise<R>): Promise<R>;
  /** The business write, through the ORM's query builder on `tx`. */
  insertOrder(tx: object, item: string): Promise<void>;
  /** The ORM's database object, outside any transaction. */
  readonly base: object;
}

/** The raw client that made the tables, to count what committed and to clean up. */
interface Database_ {
  readonly dedup: string;
  readonly orders: string;
  count(table: string): Promise<number>;
  expireAll(): Promise<void>;
  close(): Promise<void>;
}

interface Backend {
  readonly orm: "Kysely" | "knex" | "Drizzle";
  readonly dialect: Dialect;
  open(db: Database_): { harness: Harness; close(): Promise<void> };
}

const databases: Record<Dialect, () => Promise<Database_ & { file?: string }>> = {
  async postgres() {
    const pool = testPool({ max: 2 });
    const dedup = freshTable();
    const orders = freshTable();
    await pool.query(postgresDedupTableSql(dedup));
    await pool.query(`CREATE TABLE "${orders}" (id serial PRIMARY KEY, item text NOT NULL)`);
    return {
      dedup,
      orders,
      count: async (table) => Number((await pool.query(`SELECT count(*) AS n FROM "${table}"`)).rows[0].n),
      expireAll: async () => {
        await pool.query(`UPDATE "${dedup}" SET expires_at = now() - interval '1 second'`);
      },
      close: async () => {
        await pool.query(`DROP TABLE IF EXISTS "${dedup}", "${orders}"`);
        await pool.end();
      },
    };
  },
  async mysql() {
    const pool = testMysqlPool({ connectionLimit: 2 });
    const dedup = freshMysqlTable();
    const orders = freshMysqlTable();
    await pool.query(mysqlDedupTableSql(dedup));
    await pool.query(
      `CREATE TABLE \`${orders}\` (id INT AUTO_INCREMENT PRIMARY KEY, item VARCHAR(64) NOT NULL)`,
    );
    return {
      dedup,
      orders,
      count: async (table) => {
        const [rows] = await pool.query(`SELECT count(*) AS n FROM \`${table}\``);
        return Number((rows as { n: number }[])[0]!.n);
      },
      expireAll: async () => {
        await pool.query(`UPDATE \`${dedup}\` SET expires_at = 0`);
      },
      close: async () => {
        await dropMysqlTable(pool, dedup);
        await dropMysqlTable(pool, orders);
        await pool.end();
      },
    };
  },
  async sqlite() {
    const dir = mkdtempSync(join(tmpdir(), "idempotool-orm-"));
    const file = join(dir, "app.db");
    const db = new Database(file);
    db.exec("PRAGMA journal_mode = WAL");
    db.exec(sqliteDedupTableSql("dedup"));
    db.exec("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)");
    return {
      file,
      dedup: "dedup",
      orders: "orders",
      count: async (table) => (db.prepare(`SELECT count(*) AS n FROM "${table}"`).get() as { n: number }).n,
      expireAll: async () => {
        db.exec("UPDATE dedup SET expires_at = 0");
      },
      close: async () => {
        db.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  },
};

const mysqlConnection = () => {
  const url = new URL(mysqlUrl);
  return {
    host: url.hostname,
    port: Number(url.port || 3306),
    user: decodeURIComponent(url.username || "root"),
    database: decodeURIComponent(url.pathname.slice(1)),
  };
};

// biome-ignore lint/suspicious/noExplicitAny: each ORM's own tables, typed by the ORM at the call sites.
type Any = any;

const kysely = (dialect: Dialect, db: Database_ & { file?: string }) => {
  const orm: Kysely<Any> = new Kysely<Any>({
    // Plugins users commonly add: one parses JSON text in results, one renames snake_case columns.
    plugins: [new ParseJSONResultsPlugin(), new CamelCasePlugin()],
    dialect:
      dialect === "postgres"
        ? new PostgresDialect({ pool: testPool({ max: 3 }) })
        : dialect === "mysql"
          ? new MysqlDialect({ pool: createCallbackPool({ ...mysqlConnection(), connectionLimit: 3 }) })
          : new SqliteDialect({ database: new Database(db.file!, { timeout: 5_000 }) }),
  });
  return {
    harness: {
      transaction: (body) => orm.transaction().execute((trx) => body(trx)),
      insertOrder: async (tx: object, item: string) => {
        await (tx as Kysely<Any>).insertInto(db.orders).values({ item }).execute();
      },
      base: orm,
    } satisfies Harness,
    close: () => orm.destroy(),
  };
};

const knexOf = (dialect: Dialect, db: Database_ & { file?: string }) => {
  const orm = createKnex(
    dialect === "postgres"
      ? { client: "pg", connection: pgUrl, pool: { min: 0, max: 3 } }
      : dialect === "mysql"
        ? { client: "mysql2", connection: mysqlConnection(), pool: { min: 0, max: 3 } }
        : { client: "better-sqlite3", connection: { filename: db.file! }, useNullAsDefault: true },
  );
  return {
    harness: {
      transaction: (body) => orm.transaction((trx) => body(trx)),
      insertOrder: async (tx: object, item: string) => {
        await (tx as typeof orm)(db.orders).insert({ item });
      },
      base: orm,
    } satisfies Harness,
    close: () => orm.destroy(),
  };
};

const drizzleOf = (dialect: Dialect, db: Database_ & { file?: string }) => {
  if (dialect === "postgres") {
    const pool = testPool({ max: 3 });
    const orders = pgTable(db.orders, { id: serial("id").primaryKey(), item: pgText("item").notNull() });
    const orm = drizzlePg(pool);
    return {
      harness: {
        transaction: (body) => orm.transaction((tx) => body(tx)),
        insertOrder: async (tx: object, item: string) => {
          await (tx as typeof orm).insert(orders).values({ item });
        },
        base: orm,
      } satisfies Harness,
      close: () => pool.end(),
    };
  }
  if (dialect === "mysql") {
    const pool = testMysqlPool({ connectionLimit: 3 });
    const orders = mysqlTable(db.orders, {
      id: mysqlInt("id").autoincrement().primaryKey(),
      item: varchar("item", { length: 64 }).notNull(),
    });
    const orm = drizzleMysql(pool);
    return {
      harness: {
        transaction: (body) => orm.transaction((tx) => body(tx)),
        insertOrder: async (tx: object, item: string) => {
          await (tx as typeof orm).insert(orders).values({ item });
        },
        base: orm,
      } satisfies Harness,
      close: () => pool.end(),
    };
  }
  // Drizzle's asynchronous SQLite path, through its proxy driver (as for a remote SQLite) over one
  // better-sqlite3 connection; the proxy answers rows as arrays, as that driver's contract says.
  const sqlite = new Database(db.file!, { timeout: 5_000 });
  const orders = sqliteTable(db.orders, {
    id: integer("id").primaryKey(),
    item: sqliteText("item").notNull(),
  });
  const orm = drizzleSqliteProxy(async (sql, params, method) => {
    const statement = sqlite.prepare(sql);
    if (method === "run" || !statement.reader) return { rows: [statement.run(...params)] };
    const rows = statement.raw().all(...params) as unknown[][];
    return { rows: method === "get" ? (rows[0] ?? []) : rows };
  });
  return {
    harness: {
      transaction: (body) => orm.transaction((tx) => body(tx)),
      insertOrder: async (tx: object, item: string) => {
        await (tx as typeof orm).insert(orders).values({ item });
      },
      base: orm,
    } satisfies Harness,
    close: async () => {
      sqlite.close();
    },
  };
};

const backends: Backend[] = (["postgres", "mysql", "sqlite"] as const).flatMap((dialect) => [
  { orm: "Kysely" as const, dialect, open: (db: Database_) => kysely(dialect, db) },
  { orm: "knex" as const, dialect, open: (db: Database_) => knexOf(dialect, db) },
  { orm: "Drizzle" as const, dialect, open: (db: Database_) => drizzleOf(dialect, db) },
]);

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves once `n` parties have arrived: two transactions meet here before their next step. */
function barrier(n: number): () => Promise<void> {
  let arrived = 0;
  let release!: () => void;
  const all = new Promise<void>((resolve) => {
    release = resolve;
  });
  return () => {
    if (++arrived === n) release();
    return all;
  };
}

for (const backend of backends) {
  describe(`transactionalOnce (OP-2) in a ${backend.orm} transaction on ${backend.dialect}`, () => {
    let db: Database_;
    let orm: { harness: Harness; close(): Promise<void> };
    let h: Harness;
    let runs = 0;
    beforeEach(async () => {
      runs = 0;
      db = await databases[backend.dialect]();
      orm = backend.open(db);
      h = orm.harness;
    });
    afterEach(async () => {
      await orm.close();
      await db.close();
    });

    const options = (key = "k1", args: unknown = { item: "book" }): TransactionalOnceOptions => ({
      table: db.dedup,
      tool: "place_order",
      key,
      args,
    });
    /** The guarded write: one order, through the ORM, counted. */
    const placeOrder =
      (tx: object, item = "book", delayMs = 0) =>
      async () => {
        runs++;
        await h.insertOrder(tx, item);
        if (delayMs > 0) await pause(delayMs);
        return { placed: item };
      };
    const once = (o = options(), item = "book") =>
      h.transaction((tx) => transactionalOnce(tx, o, placeOrder(tx, item)));

    it("commits the dedup row with the write, and a repeat replays without running", async () => {
      const first = await once();
      const again = await once();
      expect(first).toMatchObject({ was_replay: false, result: { placed: "book" } });
      expect(again).toEqual({ ...first, was_replay: true });
      expect(runs).toBe(1);
      expect(await db.count(db.orders)).toBe(1);
    });

    it("frees the key when the caller's transaction rolls back, so the next call runs", async () => {
      await expect(
        h.transaction(async (tx) => {
          await transactionalOnce(tx, options(), placeOrder(tx));
          throw new Error("the caller's next step failed");
        }),
      ).rejects.toThrow("the caller's next step failed");
      expect(await db.count(db.orders)).toBe(0);
      expect(await db.count(db.dedup)).toBe(0);
      expect((await once()).was_replay).toBe(false);
      expect(await db.count(db.orders)).toBe(1);
    });

    it("undoes the write and the dedup row when the write throws, even if the caller commits the rest", async () => {
      await h.transaction(async (tx) => {
        const failed = transactionalOnce(tx, options(), async () => {
          await h.insertOrder(tx, "half");
          throw new Error("boom after the write");
        });
        await expect(failed).rejects.toThrow("boom after the write");
        // The transaction is still usable, and what the caller writes next commits.
        await h.insertOrder(tx, "unrelated");
      });
      expect(await db.count(db.orders)).toBe(1);
      expect(await db.count(db.dedup)).toBe(0);
      expect((await once()).was_replay).toBe(false);
    });

    it("nests a call with another key inside a write, and a repeat replays the outer one alone", async () => {
      const nested = () =>
        h.transaction((tx) =>
          transactionalOnce(tx, options("outer"), async () => {
            runs++;
            const inner = await transactionalOnce(tx, options("inner"), placeOrder(tx, "inner"));
            return { inner: inner.result };
          }),
        );
      const first = await nested();
      expect(first).toMatchObject({ was_replay: false, result: { inner: { placed: "inner" } } });
      expect((await nested()).was_replay).toBe(true);
      expect(runs).toBe(2);
      expect(await db.count(db.orders)).toBe(1);
      expect(await db.count(db.dedup)).toBe(2);
    });

    it("refuses a call nested in its own write under the same key, rather than replay a result not yet made", async () => {
      const selfNested = h.transaction((tx) =>
        transactionalOnce(tx, options(), async () => {
          runs++;
          await transactionalOnce(tx, options(), placeOrder(tx));
          return { placed: "never" };
        }),
      );
      await expect(selfNested).rejects.toMatchObject({ code: "idempotency_key_in_use" });
      expect(runs).toBe(1);
      expect(await db.count(db.orders)).toBe(0);
      expect(await db.count(db.dedup)).toBe(0);
      expect((await once()).was_replay).toBe(false);
    });

    if (backend.orm === "Kysely") {
      it("refuses the same key nested through another object on the same transaction", async () => {
        const nested = h.transaction((tx) =>
          transactionalOnce(tx, options(), async () => {
            runs++;
            const same = (tx as { withoutPlugins(): object }).withoutPlugins();
            await transactionalOnce(same, options(), placeOrder(same));
            return { placed: "never" };
          }),
        );
        await expect(nested).rejects.toMatchObject({ code: "idempotency_key_in_use" });
        expect(runs).toBe(1);
        expect(await db.count(db.orders)).toBe(0);
      });
    }

    it("refuses a call started while another runs on the same transaction; the first commits alone", async () => {
      const [first, second] = await h.transaction((tx) =>
        Promise.allSettled([
          transactionalOnce(tx, options("a"), placeOrder(tx, "a")),
          transactionalOnce(tx, options("b"), placeOrder(tx, "b")),
        ]),
      );
      expect(first).toMatchObject({ status: "fulfilled", value: { was_replay: false } });
      expect(second).toMatchObject({ status: "rejected", reason: { code: "invalid_options" } });
      expect(runs).toBe(1);
      expect(await db.count(db.orders)).toBe(1);
      expect(await db.count(db.dedup)).toBe(1);
      expect((await once(options("a"), "a")).was_replay).toBe(true);
    });

    it("refuses the same key with other arguments, without running", async () => {
      await once(options("k1", { item: "book" }), "book");
      const error = await once(options("k1", { item: "pen" }), "pen").catch((e: unknown) => e);
      expect(isIdempotencyError(error, "idempotency_key_conflict")).toBe(true);
      expect(runs).toBe(1);
      expect(await db.count(db.orders)).toBe(1);
    });

    it("refuses the database object outside a transaction before writing anything", async () => {
      const error = await transactionalOnce(h.base, options(), placeOrder(h.base)).catch((e: unknown) => e);
      expect(error).toMatchObject({
        code: "invalid_options",
        message: expect.stringContaining("not a transaction"),
      });
      expect(runs).toBe(0);
      expect(await db.count(db.orders)).toBe(0);
      expect(await db.count(db.dedup)).toBe(0);
    });

    it("runs again once the key's window has passed", async () => {
      await once();
      await db.expireAll();
      expect((await once()).was_replay).toBe(false);
      expect(await db.count(db.orders)).toBe(2);
      expect(await db.count(db.dedup)).toBe(1);
      expect((await once()).was_replay).toBe(true);
    });

    // Kysely and knex queue SQLite transactions on their one connection; Drizzle's proxy driver does not.
    if (backend.orm !== "Drizzle" || backend.dialect !== "sqlite") {
      it("runs two transactions racing with one key once: one writes, the other replays", async () => {
        const calls = await Promise.all(
          [0, 1].map(() =>
            h.transaction((tx) => transactionalOnce(tx, options(), placeOrder(tx, "book", 100))),
          ),
        );
        expect(calls.filter((c) => c.was_replay)).toHaveLength(1);
        expect(calls[0]!.result).toEqual(calls[1]!.result);
        expect(runs).toBe(1);
        expect(await db.count(db.orders)).toBe(1);
      });
    }

    if (backend.dialect !== "sqlite") {
      it("lets a waiting repeat run when the first transaction rolls back", async () => {
        const first = h.transaction(async (tx) => {
          await transactionalOnce(tx, options(), placeOrder(tx, "book", 150));
          throw new Error("rolled back");
        });
        await pause(50);
        const second = h.transaction((tx) => transactionalOnce(tx, options(), placeOrder(tx)));
        await expect(first).rejects.toThrow("rolled back");
        expect((await second).was_replay).toBe(false);
        expect(await db.count(db.orders)).toBe(1);
      });

      it("tells the deadlock victim that its whole transaction is gone and to retry it", async () => {
        const meet = barrier(2);
        const crossed = (mine: string, theirs: string) =>
          h.transaction(async (tx) => {
            await transactionalOnce(tx, options(mine), placeOrder(tx, mine));
            await meet();
            await transactionalOnce(tx, options(theirs), placeOrder(tx, theirs));
          });
        const settled = await Promise.allSettled([crossed("a", "b"), crossed("b", "a")]);
        const failed = settled.filter((s) => s.status === "rejected");
        expect(failed).toHaveLength(1);
        expect((failed[0] as PromiseRejectedResult).reason).toMatchObject({
          code: "store_unavailable",
          message: expect.stringContaining("retry the whole transaction"),
        });
        // The winner's two writes committed; nothing of the victim's did.
        expect(await db.count(db.orders)).toBe(2);
        expect(await db.count(db.dedup)).toBe(2);
      });
    }
  });
}

describe("transactionalOnce refuses what it cannot make atomic", () => {
  const options = { table: "dedup", tool: "place_order", key: "k1", args: {} };

  it("refuses Drizzle on a synchronous SQLite driver, whose transaction cannot wait for an async write", async () => {
    const dir = mkdtempSync(join(tmpdir(), "idempotool-orm-"));
    const sqlite = new Database(join(dir, "app.db"));
    try {
      sqlite.exec(sqliteDedupTableSql("dedup"));
      const orm = drizzleSqliteSync(sqlite);
      let runs = 0;
      let refused: unknown;
      orm.transaction((tx) => {
        // Drizzle runs this callback synchronously; the refusal comes before any statement.
        void transactionalOnce(tx, options, () => runs++).catch((e: unknown) => {
          refused = e;
        });
      });
      await pause(0);
      expect(refused).toMatchObject({
        code: "invalid_options",
        message: expect.stringContaining("synchronous"),
      });
      expect(runs).toBe(0);
      expect((sqlite.prepare("SELECT count(*) AS n FROM dedup").get() as { n: number }).n).toBe(0);
    } finally {
      sqlite.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses a knex transaction that has already ended, and objects that are no ORM transaction", async () => {
    const orm = createKnex({ client: "pg", connection: pgUrl, pool: { min: 0, max: 1 } });
    try {
      const trx = await orm.transaction();
      await trx.commit();
      await expect(transactionalOnce(trx, options, () => 1)).rejects.toMatchObject({
        code: "invalid_options",
        message: expect.stringContaining("already committed or rolled back"),
      });
    } finally {
      await orm.destroy();
    }
    const pool = testPool();
    for (const tx of [{}, pool, new Date()]) {
      await expect(transactionalOnce(tx, options, () => 1)).rejects.toMatchObject({
        code: "invalid_options",
      });
    }
    await pool.end();
  });
});

describe("transactionalOnce on PostgreSQL in a transaction that began long before", () => {
  it("dates the call by its own statement, not by when the caller's transaction began", async () => {
    const pool = testPool({ max: 1 });
    const dedup = freshTable();
    await pool.query(postgresDedupTableSql(dedup));
    const knex = createKnex({ client: "pg", connection: pgUrl, pool: { min: 0, max: 1 } });
    try {
      await knex.transaction(async (trx) => {
        // The server's clock moves on inside the transaction; now() would stay where it began.
        await trx.raw("SELECT pg_sleep(0.2)");
        const { rows } = await trx.raw("SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint AS ms");
        const later = Number((rows as { ms: string }[])[0]!.ms);
        const out = await transactionalOnce(
          trx,
          { table: dedup, tool: "t", key: "k", args: {} },
          async () => 1,
        );
        expect(Date.parse(out.original_called_at)).toBeGreaterThanOrEqual(later);
        const window = await trx.raw(
          `SELECT (extract(epoch from expires_at - created_at) * 1000)::bigint AS ms FROM "${dedup}"`,
        );
        expect(Number((window.rows as { ms: string }[])[0]!.ms)).toBe(86_400_000);
      });
    } finally {
      await knex.destroy();
      await pool.query(`DROP TABLE IF EXISTS "${dedup}"`);
      await pool.end();
    }
  });
});
