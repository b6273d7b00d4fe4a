/**
 * mysqlStore against the real MariaDB on this machine (MySQL's protocol and SQL): the conformance suite
 * on the request clock (the cross-process scenarios run it on the server's), then what only this store has: keys compared as bytes, the
 * server's clock, its options, the CLI's mysql:// URL. Every case gets a fresh table, dropped afterwards.
 * A missing server fails; nothing skips.
 */
import { createServer, type Socket } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { parseStoreUrl } from "../src/cli/store-url.js";
import { type ClaimRequest, idempotent, StoreUnavailableError } from "../src/index.js";
import { type MysqlQueryable, type MysqlStoreOptions, mysqlStore } from "../src/mysql/index.js";
import { fakeClock, storeConformanceCases } from "../src/testing/index.js";
import { claimRequest as baseClaim } from "./fixtures/claim-request.js";
import { dropMysqlTable, freshMysqlTable, testMysqlPool } from "./fixtures/mysql-helpers.js";

const t0 = Date.parse("2026-01-01T00:00:00.000Z");
const pool = testMysqlPool({ connectionLimit: 10 });
const tables: string[] = [];
afterAll(async () => {
  for (const name of tables) await dropMysqlTable(pool, name);
  await pool.end();
});

/** A store on a fresh table, dropped after the file. */
function freshStore(options: Omit<MysqlStoreOptions, "client"> = {}) {
  const table = freshMysqlTable();
  tables.push(table);
  return mysqlStore({ client: pool, table, ...options });
}

const claimRequest = (overrides: Partial<ClaimRequest> = {}) => baseClaim({ now: t0, ...overrides });

describe("MariaDB on this machine", () => {
  it("is reachable (the tests below need it; CI fails rather than skips without it)", async () => {
    const [rows] = await pool.query("SELECT 1 AS one");
    expect(rows).toEqual([{ one: 1 }]);
  });
});

describe("mysqlStore conformance (request clock)", () => {
  for (const c of storeConformanceCases({
    name: "mysql",
    create: () => {
      const table = freshMysqlTable();
      return {
        store: mysqlStore({ client: pool, table, clock: "request" }),
        clock: fakeClock(),
        cleanup: () => dropMysqlTable(pool, table),
      };
    },
  })) {
    it(c.name, c.run);
  }
});

describe("mysqlStore, what only it has", () => {
  it("keeps keys apart that a collation would fold together: case, trailing spaces, accents", async () => {
    const store = freshStore({ clock: "request" });
    const keys = ["k", "K", "k ", "ḱ", "k\u0000"];
    for (const [i, key] of keys.entries()) {
      const result = await store.claim(claimRequest({ key, token: `token-${i}` }));
      expect(result.claimed, JSON.stringify(key)).toBe(true);
      expect(result.record.key).toBe(key);
    }
  });

  it("judges by the server's clock by default: a request's own now is ignored", async () => {
    const store = freshStore();
    const before = Date.now();
    const result = await store.claim(claimRequest({ now: 0 }));
    expect(result.claimed).toBe(true);
    // The server's clock is this machine's here.
    expect(result.now).toBeGreaterThanOrEqual(before - 1_000);
    expect(result.now).toBeLessThanOrEqual(Date.now() + 1_000);
  });

  it("takes over a lease only once the server's clock has passed it (clockOffsetMs moves that clock)", async () => {
    let offset = 0;
    const store = freshStore({ clockOffsetMs: () => offset });
    const claimed = await store.claim(claimRequest({ leaseMs: 60_000, token: "first" }));
    const takeover = {
      scope: claimed.record.scope,
      key: claimed.record.key,
      fromToken: "first",
      token: "second",
      leaseMs: 60_000,
      ttlMs: 60_000,
      now: 0,
    };
    expect(await store.takeover(takeover)).toBeNull();
    offset = 61_000;
    expect(await store.takeover(takeover)).toMatchObject({ token: "second", attempts: 2 });
  });

  it("runs a tool once for two calls with one key", async () => {
    const store = freshStore();
    let runs = 0;
    const send = idempotent(
      async (args: { to: string }) => {
        runs++;
        return { sent: args.to };
      },
      { name: "send_email", store },
    );
    const first = await send({ to: "ada" }, { key: "k-1" });
    const second = await send({ to: "ada" }, { key: "k-1" });
    expect(first.was_replay).toBe(false);
    expect(second.was_replay).toBe(true);
    expect(second.result).toEqual({ sent: "ada" });
    expect(runs).toBe(1);
  });

  it("fails closed when the server cannot be reached: store_unavailable, and the tool does not run", async () => {
    const unreachable = testMysqlPool({ port: 1, connectTimeout: 1_000, connectionLimit: 1 });
    let runs = 0;
    const send = idempotent(
      async () => {
        runs++;
        return "sent";
      },
      { name: "send_email", store: mysqlStore({ client: unreachable, table: freshMysqlTable() }) },
    );
    await expect(send({}, { key: "k-1" })).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(runs).toBe(0);
    await unreachable.end();
  });

  it("gives up on a server that accepts and never answers after statementTimeoutMs; the tool does not run", async () => {
    // A server that takes the connection and says nothing, not even the handshake.
    const sockets: Socket[] = [];
    const silent = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const port = (silent.address() as { port: number }).port;
    const pool = testMysqlPool({ port, connectTimeout: 60_000, connectionLimit: 1 });
    let runs = 0;
    const send = idempotent(
      async () => {
        runs++;
        return "sent";
      },
      {
        name: "send_email",
        store: mysqlStore({ client: pool, table: freshMysqlTable(), statementTimeoutMs: 300 }),
      },
    );
    const error = await send({}, { key: "k-1" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(String((error as Error).cause)).toContain("statementTimeoutMs");
    expect(runs).toBe(0);
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => silent.close(resolve));
    await pool.end().catch(() => undefined);
  });

  describe("refuses a table it cannot trust, before any claim (the tool does not run)", () => {
    const columns =
      "tool VARBINARY(1020) NOT NULL, fingerprint VARBINARY(255) NOT NULL, status VARBINARY(16) NOT NULL, " +
      "token VARBINARY(255) NOT NULL, created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, " +
      "lease_expires_at BIGINT NOT NULL, expires_at BIGINT NOT NULL, attempts INT NOT NULL, " +
      "result LONGBLOB NULL, error LONGBLOB NULL";
    const cases = [
      {
        what: "on an engine that may lose a committed claim in a crash",
        ddl: `scope VARBINARY(255) NOT NULL, \`key\` VARBINARY(255) NOT NULL, ${columns}, PRIMARY KEY (scope, \`key\`)) ENGINE = MyISAM`,
        says: /MyISAM engine.*InnoDB/,
      },
      {
        what: "whose keys compare as text under a collation",
        ddl: `scope VARCHAR(255) NOT NULL, \`key\` VARCHAR(255) COLLATE utf8mb4_general_ci NOT NULL, ${columns}, PRIMARY KEY (scope, \`key\`)) ENGINE = InnoDB`,
        says: /keeps key varchar,scope varchar as text/,
      },
      {
        what: "whose primary key is not (scope, key)",
        ddl: `scope VARBINARY(1020) NOT NULL, \`key\` VARBINARY(1020) NOT NULL, ${columns}, PRIMARY KEY (\`key\`)) ENGINE = InnoDB`,
        says: /primary key \(key\)/,
      },
    ];
    for (const c of cases) {
      it(c.what, async () => {
        const table = freshMysqlTable();
        tables.push(table);
        await pool.query(`CREATE TABLE \`${table}\` (${c.ddl}`);
        const store = mysqlStore({ client: pool, table });
        await expect(store.migrate()).rejects.toMatchObject({ code: "invalid_options", message: c.says });
        let runs = 0;
        const send = idempotent(
          async () => {
            runs++;
            return "sent";
          },
          { name: "send_email", store },
        );
        await expect(send({}, { key: "k-1" })).rejects.toThrow(c.says);
        expect(runs).toBe(0);
        const [rows] = await pool.query(`SELECT COUNT(*) AS n FROM \`${table}\``);
        expect(rows).toEqual([{ n: 0 }]);
      });
    }
  });

  it("gives a key back when the claim that took it is answered after its caller gave up", async () => {
    let delayClaims = true;
    const answered: Promise<unknown>[] = [];
    // Mock only to inject the delay: the statement runs on the real server at once; its answer is held back.
    const slow: MysqlQueryable = {
      query(sql, values) {
        const answer = pool.query(sql, values) as unknown as Promise<readonly [unknown, unknown?]>;
        if (!delayClaims || !sql.startsWith("INSERT")) return answer;
        const late = answer.then(
          (result) => new Promise<typeof result>((r) => setTimeout(() => r(result), 1_500)),
        );
        answered.push(late);
        return late;
      },
    };
    const table = freshMysqlTable();
    tables.push(table);
    const store = mysqlStore({ client: slow, table, statementTimeoutMs: 1_000 });
    await store.migrate();
    await expect(store.claim(claimRequest({ token: "gave-up" }))).rejects.toThrow(/statementTimeoutMs/);
    await Promise.all(answered);
    // The release goes out when the late answer arrives; the next claim finds the key free.
    delayClaims = false;
    await expect.poll(() => store.get({ scope: "tenant-a", key: "order-1" }, t0)).toBeUndefined();
    const next = await store.claim(claimRequest({ token: "next" }));
    expect(next).toMatchObject({ claimed: true, record: { token: "next" } });
  });

  it("gives a key back when the read after its claim fails (the caller never runs the tool)", async () => {
    let failNextRead = false;
    const flaky: MysqlQueryable = {
      query(sql, values) {
        if (failNextRead && sql.startsWith("SELECT")) {
          failNextRead = false;
          return Promise.reject(new Error("connection lost"));
        }
        if (sql.startsWith("INSERT")) failNextRead = true;
        return pool.query(sql, values) as unknown as Promise<readonly [unknown, unknown?]>;
      },
    };
    const table = freshMysqlTable();
    tables.push(table);
    const store = mysqlStore({ client: flaky, table });
    await store.migrate();
    await expect(store.claim(claimRequest({ token: "lost" }))).rejects.toThrow(/connection lost/);
    await expect.poll(() => store.get({ scope: "tenant-a", key: "order-1" }, t0)).toBeUndefined();
  });

  it("rejects bad options, naming the option", () => {
    for (const table of ["", "1records", "a-b", "records; DROP TABLE x", "a".repeat(53)]) {
      expect(() => mysqlStore({ client: pool, table }), table).toThrow(/table/);
    }
    expect(() => mysqlStore({ client: {} as never })).toThrow(/client/);
    expect(() => mysqlStore({ client: pool, clock: "wall" as never })).toThrow(/clock/);
    expect(() => mysqlStore({ client: pool, clock: "request", clockOffsetMs: 5 })).toThrow(/clockOffsetMs/);
    expect(() => mysqlStore({ client: pool, statementTimeoutMs: 0 })).toThrow(/statementTimeoutMs/);
  });

  it("is named by mysql:// and mariadb:// URLs on the command line", () => {
    expect(parseStoreUrl("mysql://app@db:3306/agents?table=calls")).toEqual({
      kind: "mysql",
      url: "mysql://app@db:3306/agents?table=calls",
      table: "calls",
    });
    expect(parseStoreUrl("mariadb://app@db/agents")).toMatchObject({ kind: "mysql", table: undefined });
  });
});
