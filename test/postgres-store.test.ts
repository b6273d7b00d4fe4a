/**
 * postgresStore against the real PostgreSQL on this machine: the conformance suite, then what only
 * PostgreSQL has (a server clock, READ COMMITTED, a schema, timeouts) and the round trips each
 * operation costs. Every case gets a fresh table, dropped afterwards. A missing server fails; nothing skips.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from "vitest";
import { type ClaimRequest, type Effect, idempotent, isIdempotencyError } from "../src/index.js";
import { type PgQueryable, type PostgresStoreOptions, postgresStore } from "../src/postgres/index.js";
import { fakeClock, storeConformanceCases } from "../src/testing/index.js";
import { claimRequest as baseClaim } from "./fixtures/claim-request.js";
import {
  countingClient,
  dropTable,
  eventually,
  freshTable,
  pgUrl,
  tablesDroppedAfterEach,
  testPool,
} from "./fixtures/pg-helpers.js";
import { rejection } from "./fixtures/tools.js";

const t0 = Date.parse("2026-01-01T00:00:00.000Z");
const pool = testPool({ max: 10 });
/** A fresh table's name, dropped after the case. */
const table = tablesDroppedAfterEach(pool);
afterAll(async () => {
  await pool.end();
});

const claimRequest = (overrides: Partial<ClaimRequest> = {}) => baseClaim({ now: t0, ...overrides });

describe("PostgreSQL on this machine", () => {
  it("is reachable (the tests below need it; CI fails rather than skips without it)", async () => {
    const { rows } = await pool.query<{ one: number }>("SELECT 1 AS one");
    expect(rows).toEqual([{ one: 1 }]);
  });
});

describe("postgresStore conformance (request clock)", () => {
  for (const c of storeConformanceCases({
    name: "postgres",
    create: () => {
      const name = freshTable();
      return {
        store: postgresStore({ client: pool, table: name, clock: "request" }),
        clock: fakeClock(),
        cleanup: () => dropTable(pool, name),
      };
    },
  })) {
    it(c.name, c.run);
  }
});

describe("postgresStore conformance (request clock, a role that may not create the claim function)", () => {
  // A table an earlier version made, used by a role without CREATE rights in its schema: the migration
  // cannot add the claim function, and every claim runs as one plain statement.
  const role = `${freshTable()}_app`;
  const rolePool = testPool({ max: 4 });
  rolePool.on("connect", (client) => {
    client.query(`SET ROLE "${role}"`).catch(() => {});
  });
  beforeAll(async () => {
    await pool.query(`CREATE ROLE "${role}" NOLOGIN`);
  });
  afterAll(async () => {
    await rolePool.end();
    await pool.query(`DROP OWNED BY "${role}"`);
    await pool.query(`DROP ROLE "${role}"`);
  });
  for (const c of storeConformanceCases({
    name: "postgres",
    create: async () => {
      const name = freshTable();
      await postgresStore({ client: pool, table: name }).migrate();
      await pool.query(`DROP FUNCTION "${name}_claim_v1"`);
      await pool.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON "${name}" TO "${role}"`);
      return {
        store: postgresStore({ client: rolePool, table: name, clock: "request" }),
        clock: fakeClock(),
        cleanup: async () => {
          await expect(
            pool.query("SELECT to_regprocedure($1) AS fn", [
              `"${name}_claim_v1"(text, text, text, text, text, bigint, bigint, bigint)`,
            ]),
          ).resolves.toMatchObject({ rows: [{ fn: null }] });
          await dropTable(pool, name);
        },
      };
    },
  })) {
    it(c.name, c.run);
  }
});

describe("postgresStore options", () => {
  it("accepts pg.Pool and pg.Client as its client shape", () => {
    expectTypeOf<pg.Pool>().toExtend<PgQueryable>();
    expectTypeOf<pg.Client>().toExtend<PgQueryable>();
    expectTypeOf<pg.PoolClient>().toExtend<PgQueryable>();
    // Neither connects until used.
    const fromPool: PgQueryable = new pg.Pool({ connectionString: pgUrl });
    const fromClient: PgQueryable = new pg.Client({ connectionString: pgUrl });
    expect(postgresStore({ client: fromPool }).client).toBe(fromPool);
    expect(postgresStore({ client: fromClient }).table).toBe("idempotool_records");
  });

  it("rejects a table name that is not a plain, optionally schema-qualified identifier, naming the option", () => {
    for (const name of [
      "",
      "1records",
      "records; DROP TABLE x",
      'a"b',
      "a-b",
      "a.b.c",
      ".records",
      "schema.",
      "x".repeat(53),
      `${"s".repeat(64)}.records`,
    ]) {
      let thrown: unknown;
      try {
        postgresStore({ client: pool, table: name });
      } catch (error) {
        thrown = error;
      }
      expect(isIdempotencyError(thrown, "invalid_options"), `table ${JSON.stringify(name)}`).toBe(true);
      expect((thrown as Error).message).toContain("`table`");
    }
    expect(postgresStore({ client: pool, table: "_Tool_records_2" }).table).toBe("_Tool_records_2");
    expect(postgresStore({ client: pool, table: "ops.records" }).table).toBe("ops.records");
    expect(() => postgresStore({ client: pool, table: "x".repeat(52) })).not.toThrow();
  });

  it("rejects bad clients, timeouts, clocks and offsets, naming the option", () => {
    const cases: [string, unknown][] = [
      ["client", { client: undefined }],
      ["client", { client: { query: 1 } }],
      ["statementTimeoutMs", { client: pool, statementTimeoutMs: 0 }],
      ["statementTimeoutMs", { client: pool, statementTimeoutMs: 1.5 }],
      ["statementTimeoutMs", { client: pool, statementTimeoutMs: Number.POSITIVE_INFINITY }],
      ["clock", { client: pool, clock: "local" }],
      ["clockOffsetMs", { client: pool, clockOffsetMs: 0.5 }],
      ["clockOffsetMs", { client: pool, clock: "request", clockOffsetMs: 1_000 }],
      ["preparedStatements", { client: pool, preparedStatements: "yes" }],
    ];
    for (const [option, options] of cases) {
      let thrown: unknown;
      try {
        postgresStore(options as PostgresStoreOptions);
      } catch (error) {
        thrown = error;
      }
      expect(isIdempotencyError(thrown, "invalid_options"), option).toBe(true);
      expect((thrown as Error).message).toContain(`\`${option}\``);
    }
  });

  it("runs the example from its documentation", async () => {
    const name = table();
    const store = postgresStore({ client: pool, table: name });
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

describe("postgresStore without prepared statements (for poolers that cannot keep them)", () => {
  it("claims, settles and replays the same way", async () => {
    const store = postgresStore({ client: pool, table: table(), preparedStatements: false });
    let runs = 0;
    const tool = idempotent(
      async () => {
        runs++;
        return "done";
      },
      { name: "t", store },
    );
    expect(await tool({}, { key: "k" })).toMatchObject({ result: "done", was_replay: false });
    expect(await tool({}, { key: "k" })).toMatchObject({ result: "done", was_replay: true });
    expect(runs).toBe(1);
  });
});

describe("postgresStore schema", () => {
  it("creates an ordinary logged table with its expiry index on first use", async () => {
    const name = table();
    const store = postgresStore({ client: pool, table: name, clock: "request" });
    expect((await store.claim(claimRequest())).claimed).toBe(true);
    const { rows } = await pool.query<{ relpersistence: string }>(
      "SELECT relpersistence FROM pg_class WHERE oid = to_regclass($1)",
      [`"${name}"`],
    );
    expect(rows).toEqual([{ relpersistence: "p" }]);
    const indexes = await pool.query<{ indexdef: string }>(
      "SELECT indexdef FROM pg_indexes WHERE tablename = $1 ORDER BY indexname",
      [name],
    );
    expect(indexes.rows.map((r) => r.indexdef.replace(/^.* USING /, ""))).toEqual([
      "btree (expires_at)",
      "btree (scope, key)",
    ]);
  });

  it("migrates idempotently, and concurrently from many workers at once without failing", async () => {
    const name = table();
    const clients = await Promise.all(
      Array.from({ length: 6 }, async () => {
        const client = new pg.Client({ connectionString: pgUrl });
        await client.connect();
        return client;
      }),
    );
    try {
      await Promise.all(clients.map((client) => postgresStore({ client, table: name }).migrate()));
      await Promise.all(clients.map((client) => postgresStore({ client, table: name }).migrate()));
      const store = postgresStore({ client: pool, table: name });
      await store.migrate();
      await store.migrate();
      expect((await store.claim(claimRequest())).claimed).toBe(true);
    } finally {
      await Promise.all(clients.map((client) => client.end()));
    }
  });

  it("matches the DDL that docs/stores.md gives people who manage their schema", async () => {
    const docs = readFileSync(join(import.meta.dirname, "..", "docs", "stores.md"), "utf8");
    const ddl = /## PostgreSQL[\s\S]*?```sql\n([\s\S]*?)```/.exec(docs)?.[1];
    expect(ddl, "a sql block in the PostgreSQL section").toBeDefined();
    const documented = table();
    await pool.query(ddl!.replaceAll("idempotool_records", documented));
    const migrated = table();
    await postgresStore({ client: pool, table: migrated }).migrate();

    const shape = async (name: string) => {
      const columns = await pool.query(
        `SELECT column_name, data_type, collation_name, is_nullable FROM information_schema.columns
         WHERE table_name = $1 ORDER BY ordinal_position`,
        [name],
      );
      const indexes = await pool.query(
        "SELECT indexdef FROM pg_indexes WHERE tablename = $1 ORDER BY indexname",
        [name],
      );
      const checks = await pool.query(
        "SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = to_regclass($1) ORDER BY 1",
        [`"${name}"`],
      );
      return {
        columns: columns.rows,
        indexes: indexes.rows.map((r: { indexdef: string }) => r.indexdef.replaceAll(name, "T")),
        constraints: checks.rows,
      };
    };
    expect(await shape(documented)).toEqual(await shape(migrated));
    const store = postgresStore({ client: pool, table: documented, clock: "request" });
    expect((await store.claim(claimRequest())).claimed).toBe(true);
  });

  it("works in a schema of its own", async () => {
    const schema = freshTable();
    await pool.query(`CREATE SCHEMA "${schema}"`);
    try {
      const store = postgresStore({ client: pool, table: `${schema}.records`, clock: "request" });
      expect((await store.claim(claimRequest())).claimed).toBe(true);
      const { rows } = await pool.query(`SELECT key FROM "${schema}"."records"`);
      expect(rows).toEqual([{ key: "order-1" }]);
    } finally {
      await pool.query(`DROP SCHEMA "${schema}" CASCADE`);
    }
  });

  it("refuses an UNLOGGED table: a server crash would empty it and let every repeat run again", async () => {
    const name = table();
    await pool.query(`CREATE UNLOGGED TABLE "${name}" (scope text, key text)`);
    const store = postgresStore({ client: pool, table: name });
    const error = await rejection(store.migrate());
    expect(isIdempotencyError(error, "invalid_options")).toBe(true);
    expect((error as Error).message).toMatch(/UNLOGGED/);
    // On a fake clock the core's background retries of its release (the claim failed) never come due: on
    // the system clock one came after the case had dropped the table, and its migration made it again.
    const tool = idempotent(async () => "ran", { name: "t", store, clock: fakeClock() });
    expect(isIdempotencyError(await rejection(tool({}, { key: "k" })), "invalid_options")).toBe(true);
  });

  it("adds the claim function to a table an earlier version made, and claims through it in one statement", async () => {
    const name = table();
    await postgresStore({ client: pool, table: name }).migrate();
    await pool.query(`DROP FUNCTION "${name}_claim_v1"`);
    const counting = countingClient(pool);
    const store = postgresStore({ client: counting, table: name, clock: "request" });
    await store.migrate();
    const { rows } = await pool.query<{ fn: string | null }>("SELECT to_regprocedure($1)::text AS fn", [
      `"${name}_claim_v1"(text, text, text, text, text, bigint, bigint, bigint)`,
    ]);
    expect(rows[0]?.fn).not.toBeNull();
    counting.reset();
    expect((await store.claim(claimRequest())).claimed).toBe(true);
    expect((await store.claim(claimRequest({ token: "token-b" }))).record.token).toBe("token-a");
    expect(counting.count).toBe(2);
  });

  it("claims as one plain statement for a role that may not execute the claim function", async () => {
    const name = table();
    const role = `${name}_app`;
    await postgresStore({ client: pool, table: name }).migrate();
    // A DBA who revokes EXECUTE from PUBLIC by default, and grants the application only the table.
    await pool.query(`REVOKE EXECUTE ON FUNCTION "${name}_claim_v1" FROM PUBLIC`);
    await pool.query(`CREATE ROLE "${role}" NOLOGIN`);
    const client = await pool.connect();
    try {
      await client.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON "${name}" TO "${role}"`);
      await client.query(`SET ROLE "${role}"`);
      const store = postgresStore({ client, table: name, clock: "request" });
      expect((await store.claim(claimRequest())).claimed).toBe(true);
      const replay = await store.claim(claimRequest({ token: "token-b" }));
      expect(replay).toMatchObject({ claimed: false, record: { token: "token-a", status: "in_progress" } });
    } finally {
      await client.query("RESET ROLE");
      client.release();
      await pool.query(`DROP OWNED BY "${role}"`);
      await pool.query(`DROP ROLE "${role}"`);
    }
  });

  it("uses a table someone else created without touching the catalog (a role without CREATE rights)", async () => {
    const name = table();
    const role = `${name}_app`;
    await postgresStore({ client: pool, table: name }).migrate();
    await pool.query(`CREATE ROLE "${role}" NOLOGIN`);
    const client = await pool.connect();
    try {
      await client.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON "${name}" TO "${role}"`);
      await client.query(`SET ROLE "${role}"`);
      const store = postgresStore({ client, table: name, clock: "request" });
      expect((await store.claim(claimRequest())).claimed).toBe(true);
    } finally {
      await client.query("RESET ROLE");
      client.release();
      await pool.query(`DROP OWNED BY "${role}"`);
      await pool.query(`DROP ROLE "${role}"`);
    }
  });
});

describe("postgresStore records", () => {
  it("returns times and attempts as JavaScript numbers, never strings", async () => {
    const store = postgresStore({ client: pool, table: table(), clock: "request" });
    const later = Date.parse("2200-01-01T00:00:00.000Z");
    const { record } = await store.claim(claimRequest({ now: later }));
    const settled = await store.settle({
      scope: "tenant-a",
      key: "order-1",
      token: "token-a",
      status: "completed",
      result: "1",
      error: null,
      ttlMs: 1_000,
      now: later,
    });
    const listed = (await store.list({})).records[0];
    for (const r of [
      record,
      settled,
      await store.get({ scope: "tenant-a", key: "order-1" }, later),
      listed,
    ]) {
      for (const field of ["createdAt", "updatedAt", "leaseExpiresAt", "expiresAt", "attempts"] as const) {
        expect(typeof r?.[field], field).toBe("number");
      }
    }
    expect(record.createdAt).toBe(later);
    expect(settled?.expiresAt).toBe(later + 1_000);
  });

  it("refuses a NUL character in a key, which PostgreSQL text cannot hold", async () => {
    const store = postgresStore({ client: pool, table: table(), clock: "request" });
    const error = await rejection(store.claim(claimRequest({ key: "a\u0000b" })));
    expect(isIdempotencyError(error, "invalid_arguments")).toBe(true);
  });

  it("lists by a literal prefix of any characters, in code point order", async () => {
    const store = postgresStore({ client: pool, table: table(), clock: "request" });
    const keys = ["é", "éa", "é\u{10ffff}", "ê", "e", "😀1", "😀", "\u{ffff}x", "Z", "a"];
    for (const key of keys) await store.claim(claimRequest({ key }));
    const listed = async (keyPrefix: string) =>
      (await store.list({ keyPrefix })).records.map((record) => record.key);
    expect(await listed("é")).toEqual(["é", "éa", "é\u{10ffff}"]);
    expect(await listed("😀")).toEqual(["😀", "😀1"]);
    expect(await listed("\u{ffff}")).toEqual(["\u{ffff}x"]);
    expect((await store.list({ limit: 1000 })).records.map((r) => r.key)).toEqual(
      [...keys].sort((a, b) => (Buffer.compare(Buffer.from(a), Buffer.from(b)) < 0 ? -1 : 1)),
    );
  });

  it("rejects a cursor it did not make", async () => {
    const store = postgresStore({ client: pool, table: table() });
    await expect(store.list({ cursor: "not-a-cursor" })).rejects.toThrow(/cursor/);
  });
});

describe("postgresStore judges leases by the server's clock", () => {
  it("reports the server's time and ignores the time in the request", async () => {
    const store = postgresStore({ client: pool, table: table() });
    const before = Date.now();
    const outcome = await store.claim(claimRequest({ now: 0 }));
    const after = Date.now();
    // The server runs on this machine: its clock agrees with ours to well within a minute.
    expect(outcome.now).toBeGreaterThan(before - 60_000);
    expect(outcome.now).toBeLessThan(after + 60_000);
    expect(outcome.record.createdAt).toBe(outcome.now);
    expect(outcome.record.leaseExpiresAt).toBe(outcome.now + 60_000);
  });

  it("never lets a worker whose clock runs hours ahead take over a live lease", async () => {
    const name = table();
    const a = postgresStore({ client: pool, table: name });
    const b = postgresStore({ client: pool, table: name });
    const { record } = await a.claim(claimRequest({ now: Date.now() }));
    const fiveHoursAhead = Date.now() + 5 * 3_600_000;
    const taken = await b.takeover({
      scope: "tenant-a",
      key: "order-1",
      fromToken: "token-a",
      token: "token-b",
      leaseMs: 60_000,
      ttlMs: 86_400_000,
      now: fiveHoursAhead,
    });
    expect(taken).toBeNull();
    expect(await b.get({ scope: "tenant-a", key: "order-1" }, fiveHoursAhead)).toEqual(record);
    // Nor can it see a live record as expired, or purge it.
    expect(await b.purge({ now: fiveHoursAhead + 86_400_000 })).toEqual({ deleted: 0 });
  });

  it("gives the same answers through idempotent() to workers whose own clocks differ by hours", async () => {
    const name = table();
    let effects = 0;
    let finish: (value: string) => void = () => {};
    const running = new Promise<string>((resolve) => {
      finish = resolve;
    });
    const worker = (offsetMs: number, effect: Effect = "native-key") =>
      idempotent(
        async () => {
          effects++;
          return running;
        },
        {
          name: "charge_card",
          store: postgresStore({ client: pool, table: name }),
          clock: fakeClock(Date.now() + offsetMs),
          effect,
          waitMs: 0,
        },
      );
    const first = worker(0)({ amount: 5 }, { key: "charge-1" });
    await eventually(async () => effects === 1, "the first worker runs the tool");
    // Three hours ahead or behind: a takeover or an outcome_unknown would show the lease judged by the
    // worker's clock. Both find a live call in flight instead.
    for (const offsetMs of [3 * 3_600_000, -3 * 3_600_000]) {
      for (const effect of ["native-key", "irreversible"] as const) {
        const error = await rejection(worker(offsetMs, effect)({ amount: 5 }, { key: "charge-1" }));
        expect(isIdempotencyError(error, "idempotency_key_in_use"), `${offsetMs} ${effect}`).toBe(true);
      }
    }
    finish("charged");
    expect(await first).toMatchObject({ result: "charged", was_replay: false });
    for (const offsetMs of [3 * 3_600_000, -3 * 3_600_000]) {
      expect(await worker(offsetMs)({ amount: 5 }, { key: "charge-1" })).toMatchObject({
        result: "charged",
        was_replay: true,
      });
    }
    expect(effects).toBe(1);
  });

  it("takes over an expired lease only once the store's clock has passed it", async () => {
    const name = table();
    // Worker A's store runs 30 s ahead of the server, worker B's 30 s behind: skewed stores.
    let bOffsetMs = -30_000;
    const a = postgresStore({ client: pool, table: name, clockOffsetMs: 30_000 });
    const b = postgresStore({ client: pool, table: name, clockOffsetMs: () => bOffsetMs });
    const claimed = await a.claim(claimRequest({ leaseMs: 45_000 }));
    const bNow = (await b.claim(claimRequest({ token: "token-b" }))).now;
    expect(claimed.now - bNow).toBeGreaterThanOrEqual(59_000);
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
    // B's clock moves on past the lease (no sleeping: the offset jumps).
    bOffsetMs = 80_000;
    const taken = await takeover();
    expect(taken).toMatchObject({ token: "token-b", attempts: 2, createdAt: claimed.record.createdAt });
    expect(taken!.updatedAt).toBeGreaterThanOrEqual(claimed.record.leaseExpiresAt);
    // The old owner is fenced out.
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

describe("postgresStore answers records as stored", () => {
  it("under the server clock, a won claim, a settle and a claim of an expired key answer what get reads back", async () => {
    const name = table();
    let offsetMs = 0;
    const store = postgresStore({ client: pool, table: name, clockOffsetMs: () => offsetMs });
    const id = { scope: "tenant-a", key: "order-1" };
    const claimed = await store.claim(claimRequest({ leaseMs: 1_000, ttlMs: 500 }));
    expect(claimed.claimed).toBe(true);
    expect(claimed.record).toEqual(await store.get(id, 0));
    expect(claimed.record.expiresAt).toBe(claimed.now + 1_500); // a window beyond the lease
    const settled = await store.settle({
      ...id,
      token: "token-a",
      status: "failed",
      result: null,
      error: '{"name":"Error","message":"declined — ☃ 𝄞"}',
      ttlMs: 2_000,
      now: 0,
    });
    expect(settled).toEqual(await store.get(id, 0));
    expect(settled).toMatchObject({ status: "failed", attempts: 1, createdAt: claimed.record.createdAt });
    // Past the ttl, by the server's clock: the expired record is replaced in place by a new claim.
    offsetMs = 5_000;
    const again = await store.claim(claimRequest({ token: "token-b", fingerprint: "e".repeat(64) }));
    expect(again.claimed).toBe(true);
    expect(again.record).toEqual(await store.get(id, 0));
    expect(again.record).toMatchObject({ token: "token-b", attempts: 1, result: null, error: null });
    expect(again.record.createdAt).toBe(again.now);
    // And a repeat now gets that holder, as stored.
    const holder = await store.claim(claimRequest({ token: "token-c" }));
    expect(holder.claimed).toBe(false);
    expect(holder.record).toEqual(again.record);
  });

  it("takes no transaction id for a claim that finds a live holder: a replay writes nothing and waits for no flush", async () => {
    const name = table();
    await postgresStore({ client: pool, table: name }).migrate();
    const client = new pg.Client({ connectionString: pgUrl });
    await client.connect();
    try {
      const store = postgresStore({ client, table: name });
      /** Runs one claim inside a transaction and says whether it took a transaction id. */
      const claimTakesXid = async (token: string) => {
        await client.query("BEGIN");
        try {
          const outcome = await store.claim(claimRequest({ token }));
          const { rows } = await client.query<{ xid: string | null }>(
            "SELECT txid_current_if_assigned() AS xid",
          );
          return { claimed: outcome.claimed, xid: rows[0]?.xid ?? null };
        } finally {
          await client.query("COMMIT");
        }
      };
      const won = await claimTakesXid("token-a");
      expect(won.claimed).toBe(true);
      expect(won.xid).not.toBeNull();
      const replay = await claimTakesXid("token-b");
      expect(replay.claimed).toBe(false);
      expect(replay.xid).toBeNull();
    } finally {
      await client.end();
    }
  });
});

describe("postgresStore round trips", () => {
  it("sends exactly one statement per operation", async () => {
    const counting = countingClient(pool);
    const store = postgresStore({ client: counting, table: table() });
    await store.migrate();
    const id = { scope: "tenant-a", key: "order-1" };
    const steps: [string, () => Promise<unknown>][] = [
      ["first claim", () => store.claim(claimRequest())],
      ["claim of a held key", () => store.claim(claimRequest({ token: "token-b" }))],
      ["renew", () => store.renew({ ...id, token: "token-a", leaseMs: 60_000, ttlMs: 86_400_000, now: 0 })],
      [
        "settle",
        () =>
          store.settle({
            ...id,
            token: "token-a",
            status: "unknown",
            result: null,
            error: "x",
            ttlMs: 86_400_000,
            now: 0,
          }),
      ],
      [
        "takeover",
        () =>
          store.takeover({
            ...id,
            fromToken: "token-a",
            token: "token-c",
            leaseMs: 1,
            ttlMs: 86_400_000,
            now: 0,
          }),
      ],
      ["get", () => store.get(id, 0)],
      ["list", () => store.list({ scope: "tenant-a", keyPrefix: "order-", limit: 10 })],
      ["release", () => store.release({ ...id, token: "token-c" })],
      ["delete", () => store.delete(id)],
      ["purge", () => store.purge({ now: 0, limit: 100 })],
    ];
    for (const [what, step] of steps) {
      counting.reset();
      await step();
      expect(counting.count, what).toBe(1);
    }
  });

  it("costs a first call through idempotent() two statements (claim, settle) and a replay one", async () => {
    const counting = countingClient(pool);
    const store = postgresStore({ client: counting, table: table() });
    await store.migrate();
    let runs = 0;
    const tool = idempotent(
      async (args: { to: string }) => {
        runs++;
        return { sent: args.to };
      },
      { name: "send_email", store },
    );
    counting.reset();
    expect(await tool({ to: "a" }, { key: "k" })).toMatchObject({ was_replay: false });
    expect(counting.count).toBe(2);
    counting.reset();
    expect(await tool({ to: "a" }, { key: "k" })).toMatchObject({ was_replay: true });
    expect(counting.count).toBe(1);
    expect(runs).toBe(1);
  });

  it("migrates once per store, on first use, in one statement", async () => {
    const counting = countingClient(pool);
    const store = postgresStore({ client: counting, table: table() });
    await Promise.all([store.get({ scope: "s", key: "a" }, 0), store.get({ scope: "s", key: "b" }, 0)]);
    expect(counting.count).toBe(3);
  });
});

// A claim runs through the table's claim function, or, where the schema has none (a role that may not create
// one), as one plain statement: each must hold up against the same races.
const claimPaths = [
  { path: "the claim function", statementsAfterLostRace: 1 },
  { path: "the plain claim statement", statementsAfterLostRace: 2 },
] as const;

describe.each(claimPaths)(
  "postgresStore under READ COMMITTED, with a second connection racing $path",
  ({ path, statementsAfterLostRace }) => {
    const insertSql = (name: string) =>
      `INSERT INTO "${name}" (scope, key, tool, fingerprint, status, token, created_at, updated_at,
       lease_expires_at, expires_at, attempts)
     VALUES ('tenant-a', 'order-1', 'send_email', $1, 'in_progress', $2, $3::bigint, $3::bigint,
       $3::bigint + 60000, $3::bigint + 86400000, 1)`;

    /** Runs `claim` while `blocker` holds an uncommitted write on the key, then ends the blocker's transaction. */
    async function race(
      name: string,
      write: (blocker: pg.Client) => Promise<unknown>,
      end: "COMMIT" | "ROLLBACK",
      request = claimRequest({ now: t0 + 1_000 }),
    ) {
      const counting = countingClient(pool);
      const store = postgresStore({ client: counting, table: name, clock: "request" });
      await store.migrate();
      if (path === "the plain claim statement") {
        // A schema without the function: the store finds it missing on its first claim and keeps to the statement.
        await pool.query(`DROP FUNCTION "${name}_claim_v1"`);
      }
      // The store's first claim checks whether it may call the function.
      expect((await store.claim(claimRequest({ key: "another-order" }))).claimed).toBe(true);
      const blocker = new pg.Client({ connectionString: pgUrl });
      await blocker.connect();
      try {
        await blocker.query("BEGIN");
        await write(blocker);
        counting.reset();
        const claiming = store.claim(request);
        // The claim's statement has started (its snapshot is taken) and waits for the blocker's row.
        await eventually(async () => {
          const { rows } = await pool.query(
            "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1",
            [`%"${name}%`],
          );
          return rows.length > 0;
        }, "the claim waits on the blocker's lock");
        await blocker.query(end);
        const outcome = await claiming;
        return { outcome, statements: counting.count };
      } finally {
        await blocker.end();
      }
    }

    it("returns the holder whose insert committed after the claim's snapshot, by looking again", async () => {
      const name = table();
      const { outcome, statements } = await race(
        name,
        (blocker) => blocker.query(insertSql(name), ["b".repeat(64), "token-blocker", t0]),
        "COMMIT",
      );
      expect(outcome.claimed).toBe(false);
      expect(outcome.record).toMatchObject({
        token: "token-blocker",
        fingerprint: "b".repeat(64),
        attempts: 1,
      });
      // The first read could not see the row the insert waited for; the next read, with a newer snapshot, did:
      // inside the function, or in a second statement.
      expect(statements).toBe(statementsAfterLostRace);
    });

    it("claims the key when the racing insert rolls back, in one statement", async () => {
      const name = table();
      const { outcome, statements } = await race(
        name,
        (blocker) => blocker.query(insertSql(name), ["b".repeat(64), "token-blocker", t0]),
        "ROLLBACK",
      );
      expect(outcome.claimed).toBe(true);
      expect(outcome.record.token).toBe("token-a");
      expect(statements).toBe(1);
    });

    it("returns the new holder when another claimant replaced an expired record first, never the expired one", async () => {
      const name = table();
      const seed = postgresStore({ client: pool, table: name, clock: "request" });
      await seed.claim(claimRequest({ token: "token-old", leaseMs: 1_000, ttlMs: 1_000 }));
      const later = t0 + 5_000;
      const { outcome, statements } = await race(
        name,
        (blocker) =>
          blocker.query(
            `UPDATE "${name}" SET token = 'token-blocker', created_at = $1::bigint,
             expires_at = $1::bigint + 86400000, lease_expires_at = $1::bigint + 60000 WHERE scope = 'tenant-a' AND key = 'order-1'`,
            [later],
          ),
        "COMMIT",
        claimRequest({ now: later + 1 }),
      );
      expect(outcome.claimed).toBe(false);
      expect(outcome.record).toMatchObject({ token: "token-blocker", createdAt: later });
      expect(statements).toBe(statementsAfterLostRace);
    });

    it("lets exactly one of many connections claim a key, each on its own connection", async () => {
      const name = table();
      await postgresStore({ client: pool, table: name }).migrate();
      if (path === "the plain claim statement") await pool.query(`DROP FUNCTION "${name}_claim_v1"`);
      const clients = await Promise.all(
        Array.from({ length: 8 }, async () => {
          const client = new pg.Client({ connectionString: pgUrl });
          await client.connect();
          return client;
        }),
      );
      try {
        for (let round = 0; round < 10; round++) {
          const outcomes = await Promise.all(
            clients.map((client, i) =>
              postgresStore({ client, table: name }).claim(
                claimRequest({ key: `key-${round}`, token: `token-${i}` }),
              ),
            ),
          );
          const winners = outcomes.filter((o) => o.claimed);
          expect(winners).toHaveLength(1);
          for (const o of outcomes) expect(o.record.token).toBe(winners[0]!.record.token);
        }
      } finally {
        await Promise.all(clients.map((client) => client.end()));
      }
    });
  },
);

describe("postgresStore timeouts", () => {
  let blocker: pg.Client;
  beforeAll(async () => {
    blocker = new pg.Client({ connectionString: pgUrl });
    await blocker.connect();
  });
  afterAll(async () => {
    await blocker.end();
  });

  it("fails a statement stuck behind a lock within statementTimeoutMs, and the tool does not run", async () => {
    const name = table();
    const store = postgresStore({ client: pool, table: name, statementTimeoutMs: 300 });
    await store.migrate();
    await blocker.query("BEGIN");
    try {
      await blocker.query(`LOCK TABLE "${name}" IN ACCESS EXCLUSIVE MODE`);
      const started = Date.now();
      const error = await rejection(store.get({ scope: "s", key: "k" }, 0));
      expect((error as Error).message).toMatch(/timeout|statementTimeoutMs/i);
      let runs = 0;
      const tool = idempotent(
        async () => {
          runs++;
          return "ran";
        },
        { name: "t", store },
      );
      const failure = await rejection(tool({}, { key: "k" }));
      expect(isIdempotencyError(failure, "store_unavailable")).toBe(true);
      expect(runs).toBe(0);
      // Far below "forever", with room for a loaded machine.
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      await blocker.query("ROLLBACK");
    }
  });

  it("gives the key back when a claim it gave up on lands late, so no phantom claim blocks the key", async () => {
    const name = table();
    const single = testPool({ max: 1 });
    try {
      const answers: unknown[] = [];
      const watched: PgQueryable = {
        query: async (config) => {
          const result = await single.query(config);
          answers.push(...result.rows);
          return result;
        },
      };
      const store = postgresStore({ client: watched, table: name, statementTimeoutMs: 300 });
      // The store's first claim checks whether it may call the claim function; the next ones call it.
      await store.claim(claimRequest({ key: "another-order" }));
      answers.length = 0;
      // The only connection is busy: the claim waits in the pool's queue past its timeout.
      const busy = await single.connect();
      const error = await rejection(store.claim(claimRequest()));
      expect((error as Error).message).toMatch(/statementTimeoutMs/);
      busy.release();
      // Now the queued claim runs and lands, and the store releases it.
      await eventually(async () => answers.length === 2, "the late claim lands and is released");
      expect(JSON.parse((answers[0] as { claim: string }).claim)).toMatchObject({ claimed: true });
      expect(answers[1]).toEqual({ released: 1 });
      expect((await pool.query(`SELECT token FROM "${name}" WHERE key = 'order-1'`)).rows).toEqual([]);
      const fresh = postgresStore({ client: pool, table: name, clock: "request" });
      expect((await fresh.claim(claimRequest({ token: "token-b" }))).claimed).toBe(true);
    } finally {
      await single.end();
    }
  });
});
