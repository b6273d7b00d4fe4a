/**
 * postgresStore through postgres.js (the `postgres` package) against the real PostgreSQL on this machine:
 * the conformance suite with the client's defaults and with settings that rename, reparse and transform
 * everything, then the server clock, prepared statements, outages and timeouts. Every case gets a fresh
 * table, dropped afterwards. A missing server fails; nothing skips.
 */
import postgres, { type Sql, type TransactionSql } from "postgres";
import { afterAll, afterEach, describe, expect, expectTypeOf, it } from "vitest";
import { type ClaimRequest, idempotent, isIdempotencyError } from "../src/index.js";
import { type PostgresJsClient, type PostgresStore, postgresStore } from "../src/postgres/index.js";
import { fakeClock, storeConformanceCases } from "../src/testing/index.js";
import { claimRequest as baseClaim } from "./fixtures/claim-request.js";
import {
  dropTable,
  eventually,
  freshTable,
  pgUrl,
  type TcpProxy,
  tablesDroppedAfterEach,
  tcpProxy,
  testPool,
} from "./fixtures/pg-helpers.js";
import { countedTool, rejection } from "./fixtures/tools.js";

const t0 = Date.parse("2026-01-01T00:00:00.000Z");
/** pg, for the tables' setup and cleanup, and for reading what the store wrote. */
const admin = testPool({ max: 4 });
const table = tablesDroppedAfterEach(admin);

const clients: Sql[] = [];
/** A postgres.js client on the test server; `options` overrides any of its settings. */
function testSql(options: postgres.Options<Record<string, postgres.PostgresType>> = {}): Sql {
  const sql = postgres(pgUrl, { onnotice: () => {}, ...options }) as unknown as Sql;
  clients.push(sql);
  return sql;
}
afterAll(async () => {
  await Promise.all(clients.map((sql) => sql.end({ timeout: 1 })));
  await admin.end();
});

const sql = testSql({ max: 10 });
const claimRequest = (overrides: Partial<ClaimRequest> = {}) => baseClaim({ now: t0, ...overrides });

/**
 * Every setting of a shared instance that could change what the store reads: columns renamed, every value
 * and row transformed, the store's types parsed into something else, one connection, no prepared
 * statements, no type fetching.
 */
const hostile = testSql({
  max: 1,
  prepare: false,
  fetch_types: false,
  transform: {
    column: { from: postgres.toPascal },
    value: { from: () => "transformed" },
    row: { from: (row: object) => ({ wrapped: row }) },
  },
  types: {
    reparsed: {
      to: 1,
      from: [16, 20, 21, 23, 25, 700, 701],
      // Sends text as it is: a serializer that changed it is refused (see below).
      serialize: (value: unknown) => String(value),
      parse: (raw: string) => `parsed ${raw}`,
    },
  },
});

describe("PostgreSQL on this machine, through postgres.js", () => {
  it("is reachable (the tests below need it; CI fails rather than skips without it)", async () => {
    expect(await sql`SELECT 1 AS one`).toEqual([{ one: 1 }]);
  });
});

for (const [what, client] of [
  ["its default settings", sql],
  ["settings that rename, reparse and transform everything, on one connection", hostile],
] as const) {
  describe(`postgresStore conformance through postgres.js with ${what} (request clock)`, () => {
    for (const c of storeConformanceCases({
      name: "postgres.js",
      create: () => {
        const name = freshTable();
        return {
          store: postgresStore({ client, table: name, clock: "request" }),
          clock: fakeClock(),
          cleanup: () => dropTable(admin, name),
        };
      },
    })) {
      it(c.name, c.run);
    }
  });
}

describe("postgresStore options with a postgres.js client", () => {
  it("takes postgres.js's sql as its client", () => {
    expectTypeOf<Sql>().toExtend<PostgresJsClient>();
    expectTypeOf<TransactionSql>().not.toExtend<PostgresJsClient>();
    expect(postgresStore({ client: sql }).client).toBe(sql);
  });

  it("refuses an instance whose custom types change how text or bigint values are sent, naming what to change", () => {
    for (const oid of [25, 20]) {
      const changing = testSql({
        types: { changed: { to: oid, from: [oid], serialize: (value: unknown) => `x${String(value)}` } },
      });
      let thrown: unknown;
      try {
        postgresStore({ client: changing });
      } catch (error) {
        thrown = error;
      }
      expect(isIdempotencyError(thrown, "invalid_options"), String(oid)).toBe(true);
      expect((thrown as Error).message).toMatch(/`client`.*`types`/);
      expect((thrown as Error).message).toContain(`oid ${oid}`);
    }
  });

  it("refuses a postgres.js older than 4.2, whose queries cannot take parsers of their own", () => {
    // The shape of 3.x's sql: unsafe() answers a query without parsers() or transform(false).
    const older = Object.assign(() => {}, {
      unsafe: () => Object.assign(Promise.resolve([]), { cancel: async () => {} }),
      options: { serializers: {} },
    });
    let thrown: unknown;
    try {
      postgresStore({ client: older as unknown as PostgresJsClient });
    } catch (error) {
      thrown = error;
    }
    expect(isIdempotencyError(thrown, "invalid_options")).toBe(true);
    expect((thrown as Error).message).toMatch(/4\.2 or later/);
  });

  it("runs the example from its documentation", async () => {
    const store = postgresStore({ client: sql, table: table() });
    const sendEmail = idempotent(async (args: { to: string }) => ({ sent: args.to }), {
      name: "send_email",
      store,
    });
    const first = await sendEmail({ to: "alice@example.com" }, { key: "turn-7-alice" });
    const again = await sendEmail({ to: "alice@example.com" }, { key: "turn-7-alice" });
    expect(first).toMatchObject({ result: { sent: "alice@example.com" }, was_replay: false });
    expect(again).toMatchObject({ result: first.result, was_replay: true });
  });
});

describe("postgresStore through postgres.js: schema and statements", () => {
  it("migrates the table, its index and the claim function, and claims through the function", async () => {
    const name = table();
    const store = postgresStore({ client: sql, table: name });
    await store.migrate();
    const { rows } = await admin.query<{ fn: string | null; index: string | null }>(
      "SELECT to_regprocedure($1)::text AS fn, to_regclass($2)::text AS index",
      [`"${name}_claim_v1"(text, text, text, text, text, bigint, bigint, bigint)`, `"${name}_expires_at"`],
    );
    expect(rows[0]?.fn).not.toBeNull();
    expect(rows[0]?.index).not.toBeNull();
    const won = await store.claim(claimRequest());
    expect(won.claimed).toBe(true);
    const held = await store.claim(claimRequest({ token: "token-b" }));
    expect(held).toMatchObject({ claimed: false, record: won.record });
  });

  it("prepares its statements on the connection with preparedStatements, and none without", async () => {
    const prepared = async (preparedStatements: boolean) => {
      const one = testSql({ max: 1 });
      const store = postgresStore({ client: one, table: table(), preparedStatements });
      await store.claim(claimRequest());
      await store.get({ scope: "tenant-a", key: "order-1" }, 0);
      const rows = await one<{ statement: string }[]>`SELECT statement FROM pg_prepared_statements`;
      return rows.map((row) => row.statement).filter((text) => text.includes("idempotool_t_"));
    };
    expect((await prepared(true)).length).toBeGreaterThanOrEqual(2);
    expect(await prepared(false)).toEqual([]);
  });
});

describe("postgresStore through postgres.js judges leases by the server's clock", () => {
  it("reports the server's time and ignores the time in the request", async () => {
    const store = postgresStore({ client: sql, table: table() });
    const before = Date.now();
    const outcome = await store.claim(claimRequest({ now: 0 }));
    const after = Date.now();
    expect(outcome.now).toBeGreaterThan(before - 60_000);
    expect(outcome.now).toBeLessThan(after + 60_000);
    expect(outcome.record).toEqual(await store.get({ scope: "tenant-a", key: "order-1" }, 0));
  });

  it("takes over an expired lease only once the store's clock has passed it, and fences the old owner out", async () => {
    const name = table();
    let bOffsetMs = -30_000;
    const a = postgresStore({ client: sql, table: name, clockOffsetMs: 30_000 });
    const b = postgresStore({ client: hostile, table: name, clockOffsetMs: () => bOffsetMs });
    const claimed = await a.claim(claimRequest({ leaseMs: 45_000 }));
    const takeover = () =>
      b.takeover({
        scope: "tenant-a",
        key: "order-1",
        fromToken: "token-a",
        token: "token-b",
        leaseMs: 60_000,
        ttlMs: 86_400_000,
        now: Date.now() + 3_600_000,
      });
    // By B's clock the lease has about 105 s to run, whatever B's request says.
    expect(await takeover()).toBeNull();
    bOffsetMs = 80_000;
    const taken = await takeover();
    expect(taken).toMatchObject({ token: "token-b", attempts: 2, createdAt: claimed.record.createdAt });
    expect(taken!.updatedAt).toBeGreaterThanOrEqual(claimed.record.leaseExpiresAt);
    const late = await a.settle({
      scope: "tenant-a",
      key: "order-1",
      token: "token-a",
      status: "completed",
      result: "1",
      error: null,
      ttlMs: 86_400_000,
      now: Date.now(),
    });
    expect(late).toBeNull();
  });
});

/**
 * Runs every statement a call through `tool` sends (both claims, settle, release, get) once, so that
 * postgres.js knows each: the first run of a statement on a pool describes it first, and a statement still
 * being described is not cancelled on the server, only never run (see docs/stores.md).
 */
async function learnStatements(
  store: PostgresStore,
  tool: (args: { n: number }, o: { key: string }) => unknown,
) {
  await tool({ n: 0 }, { key: "learn-1" });
  await tool({ n: 0 }, { key: "learn-2" });
  await store.release({ scope: "default", key: "learn-3", token: "none" });
  await store.get({ scope: "default", key: "learn-3" }, 0);
}

describe("postgresStore through postgres.js: the server unreachable", () => {
  let proxy: TcpProxy | undefined;
  afterEach(async () => {
    await proxy?.stop();
    proxy = undefined;
  });

  /** A postgres.js client through the proxy. */
  function viaProxy(port: number, options: postgres.Options<Record<string, postgres.PostgresType>> = {}) {
    const url = new URL(pgUrl);
    url.hostname = "127.0.0.1";
    url.port = String(port);
    return postgres(url.toString(), { onnotice: () => {}, max: 2, connect_timeout: 2, ...options });
  }

  it("fails closed with store_unavailable on a closed port, and the tool does not run", async () => {
    const closed = viaProxy(1, { connect_timeout: 1 });
    try {
      const { tool, runs } = countedTool(postgresStore({ client: closed, table: table() }));
      const error = await rejection(tool({ n: 1 }, { key: "k" }));
      expect(isIdempotencyError(error, "store_unavailable")).toBe(true);
      expect(runs()).toBe(0);
    } finally {
      await closed.end({ timeout: 0 });
    }
  });

  it("fails closed while the server is gone, and proceeds once it is back", async () => {
    const name = table();
    proxy = await tcpProxy();
    const client = viaProxy(proxy.port);
    try {
      const { tool, runs } = countedTool(postgresStore({ client, table: name, statementTimeoutMs: 3_000 }));
      expect(await tool({ n: 1 }, { key: "before" })).toMatchObject({ result: 1, was_replay: false });
      await proxy.stop();
      for (const key of ["before", "during"]) {
        const error = await rejection(tool({ n: 1 }, { key }));
        expect(isIdempotencyError(error, "store_unavailable"), key).toBe(true);
      }
      expect(runs()).toBe(1);
      await proxy.start();
      await eventually(
        () =>
          tool({ n: 1 }, { key: "during" }).then(
            () => true,
            () => false,
          ),
        "calls proceed once the server is back",
      );
      expect(await tool({ n: 1 }, { key: "before" })).toMatchObject({ result: 1, was_replay: true });
      expect(runs()).toBe(2);
    } finally {
      await client.end({ timeout: 0 });
    }
  });

  it("gives up on a query that never gets an answer within statementTimeoutMs, and recovers", async () => {
    const name = table();
    await postgresStore({ client: admin, table: name }).migrate();
    proxy = await tcpProxy();
    // One connection, which goes silent. The cancel request the store sends cannot get through either:
    // postgres.js closes the silent connection after cancel_timeout, and the next call connects afresh.
    const client = viaProxy(proxy.port, { max: 1, cancel_timeout: 1 });
    try {
      const store = postgresStore({ client, table: name, statementTimeoutMs: 500 });
      const { tool, runs } = countedTool(store);
      await learnStatements(store, tool);
      proxy.freeze();
      for (let i = 0; i < 3; i++) {
        const started = Date.now();
        const error = await rejection(tool({ n: 1 }, { key: "frozen" }));
        expect(isIdempotencyError(error, "store_unavailable")).toBe(true);
        expect(Date.now() - started).toBeLessThan(10_000);
      }
      expect(runs()).toBe(2);
      proxy.thaw();
      await eventually(
        () =>
          tool({ n: 1 }, { key: "after" }).then(
            () => true,
            () => false,
          ),
        "calls proceed after the network recovers",
      );
      expect(runs()).toBe(3);
    } finally {
      await client.end({ timeout: 0 });
    }
  });
});

/**
 * `sql`, and a wait until every statement sent through it has its answer. A statement the store gave up on
 * still gets one (its rows, or the error of a cancel), and the store undoes a claim whose late rows show it
 * landed by sending a release from that answer's handler: once everything is answered, with a turn of the
 * event loop for such a release to be sent, nothing the store sent can still change a row.
 */
function answeredClient(sql: Sql): { client: Sql; allAnswered: () => Promise<void> } {
  let unanswered = 0;
  let waiting: (() => void)[] = [];
  const check = () => {
    if (unanswered > 0) return;
    const resolved = waiting;
    waiting = [];
    for (const resolve of resolved) resolve();
  };
  // After the answer's own handlers: a release they send is counted before the check.
  const answered = () => {
    unanswered--;
    setImmediate(check);
  };
  const client = new Proxy(sql, {
    get(target, property, receiver) {
      if (property !== "unsafe") return Reflect.get(target, property, receiver);
      return (...args: Parameters<Sql["unsafe"]>) => {
        const query = target.unsafe(...args);
        unanswered++;
        query.then(answered, answered);
        return query;
      };
    },
  });
  const allAnswered = () =>
    new Promise<void>((resolve) => {
      waiting.push(resolve);
      setImmediate(check);
    });
  return { client, allAnswered };
}

describe("postgresStore through postgres.js: timeouts", () => {
  it("gives up on a statement stuck behind a lock at statementTimeoutMs, and a claim it gave up on never holds the key", async () => {
    const name = table();
    const { client, allAnswered } = answeredClient(testSql({ max: 4 }));
    const store = postgresStore({ client, table: name, statementTimeoutMs: 500 });
    const { tool, runs } = countedTool(store);
    await learnStatements(store, tool);
    const blocker = await admin.connect();
    try {
      await blocker.query("BEGIN");
      await blocker.query(`LOCK TABLE "${name}" IN ACCESS EXCLUSIVE MODE`);
      const started = Date.now();
      const failure = await rejection(tool({ n: 1 }, { key: "k" }));
      expect(isIdempotencyError(failure, "store_unavailable")).toBe(true);
      expect(String((failure as Error).cause)).toMatch(/statementTimeoutMs/);
      expect(runs()).toBe(2);
      expect(Date.now() - started).toBeLessThan(10_000);
      // The store asked postgres.js to cancel the claim; whether the server cancelled it or ran it once the
      // lock was gone, the key ends up free.
      const error = await rejection(store.claim(claimRequest({ key: "given-up" })));
      expect((error as Error).message).toMatch(/statementTimeoutMs/);
    } finally {
      await blocker.query("ROLLBACK");
      blocker.release();
    }
    // Once the lock is gone, the claim it gave up on is either cancelled or lands and is given back. A row
    // found missing proves neither (the claim may not have landed yet), so wait for the store's answers.
    await allAnswered();
    expect((await admin.query(`SELECT 1 FROM "${name}" WHERE key = 'given-up'`)).rows).toEqual([]);
    const fresh = postgresStore({ client: admin, table: name, clock: "request" });
    expect((await fresh.claim(claimRequest({ key: "given-up", token: "token-b" }))).claimed).toBe(true);
  });

  it("gives the key back when a claim it gave up on lands late, so no phantom claim blocks the key", async () => {
    const name = table();
    await postgresStore({ client: admin, table: name }).migrate();
    // A cancel request that comes too late to stop the claim (the client can only ask): injected by
    // leaving cancel out, so the claim runs to its end once the lock is gone.
    const answers: unknown[] = [];
    const uncancellable = new Proxy(sql, {
      get(target, property, receiver) {
        if (property !== "unsafe") return Reflect.get(target, property, receiver);
        return (...args: Parameters<Sql["unsafe"]>) => {
          const query = target.unsafe(...args);
          query.then((rows) => answers.push(...rows)).catch(() => {});
          return Object.assign(query, { cancel: async () => {} });
        };
      },
    });
    const store = postgresStore({ client: uncancellable, table: name, statementTimeoutMs: 300 });
    // The store's first claim checks whether it may call the claim function; the next ones call it.
    await store.claim(claimRequest({ key: "another-order" }));
    answers.length = 0;
    const blocker = await admin.connect();
    try {
      await blocker.query("BEGIN");
      await blocker.query(`LOCK TABLE "${name}" IN ACCESS EXCLUSIVE MODE`);
      const error = await rejection(store.claim(claimRequest()));
      expect((error as Error).message).toMatch(/statementTimeoutMs/);
    } finally {
      await blocker.query("ROLLBACK");
      blocker.release();
    }
    await eventually(async () => answers.length === 2, "the late claim lands and is released");
    expect(JSON.parse((answers[0] as { claim: string }).claim)).toMatchObject({ claimed: true });
    expect(answers[1]).toEqual({ released: 1 });
    expect((await admin.query(`SELECT token FROM "${name}" WHERE key = 'order-1'`)).rows).toEqual([]);
  });
});
