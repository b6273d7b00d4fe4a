/**
 * Review of the PostgreSQL claim function (`<table>_claim_v1`, made by migrate()): the cases where it
 * changes what a user sees compared with the plain claim statement it replaced. Real server, fresh tables.
 */
import pg from "pg";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { ClaimRequest } from "../src/index.js";
import { postgresStore } from "../src/postgres/index.js";
import { claimRequest as baseClaim } from "./fixtures/claim-request.js";
import { dropTable, freshTable, pgUrl, testPool } from "./fixtures/pg-helpers.js";

const t0 = Date.parse("2026-01-01T00:00:00.000Z");
const pool = testPool({ max: 4 });
const tables: string[] = [];
const cleanups: (() => Promise<unknown>)[] = [];

function table(): string {
  const name = freshTable();
  tables.push(name);
  return name;
}

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  for (const name of tables.splice(0)) await dropTable(pool, name);
});
afterAll(async () => {
  await pool.end();
});

const claimRequest = (overrides: Partial<ClaimRequest> = {}) => baseClaim({ now: t0, ...overrides });

/** A table an earlier version made: the table and its index, no claim function. */
async function tableOfAnEarlierVersion(name: string): Promise<void> {
  await postgresStore({ client: pool, table: name }).migrate();
  await pool.query(`DROP FUNCTION "${name}_claim_v1"`);
}

describe("postgresStore claim function: upgrades", () => {
  it("still reads over a read-only connection (a hot standby, default_transaction_read_only) a table an earlier version made", async () => {
    const name = table();
    await postgresStore({ client: pool, table: name, clock: "request" }).claim(claimRequest());
    await pool.query(`DROP FUNCTION "${name}_claim_v1"`);
    const client = new pg.Client({ connectionString: pgUrl });
    await client.connect();
    cleanups.push(() => client.end());
    // What a replica, or a reporting role, gives: every transaction is read-only.
    await client.query("SET default_transaction_read_only = on");
    const store = postgresStore({ client, table: name, clock: "request" });
    // `idempotool inspect` and `list` run migrate() first; before the claim function they worked here.
    await expect(store.get({ scope: "tenant-a", key: "order-1" }, t0)).resolves.toMatchObject({
      token: "token-a",
    });
    await expect(store.list({})).resolves.toMatchObject({ records: [{ key: "order-1" }] });
  });

  it("claims inside the caller's own transaction on a pg.Client, for a role that may not create the function", async () => {
    // Before the claim function, a claim was one statement that worked in the caller's transaction. A
    // first claim that calls the missing function aborts that transaction, and the fallback to the plain
    // statement then fails with "current transaction is aborted" (25P02).
    const name = table();
    const role = `${name}_app`;
    await tableOfAnEarlierVersion(name);
    await pool.query(`CREATE ROLE "${role}" NOLOGIN`);
    cleanups.push(async () => {
      await pool.query(`DROP OWNED BY "${role}"`);
      await pool.query(`DROP ROLE "${role}"`);
    });
    await pool.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON "${name}" TO "${role}"`);
    const client = new pg.Client({ connectionString: pgUrl });
    await client.connect();
    cleanups.push(() => client.end());
    await client.query(`SET ROLE "${role}"`);
    const store = postgresStore({ client, table: name, clock: "request" });
    await store.migrate();
    await client.query("BEGIN");
    try {
      expect((await store.claim(claimRequest())).claimed).toBe(true);
      await client.query("COMMIT");
    } finally {
      await client.query("ROLLBACK").catch(() => {});
    }
    const { rows } = await pool.query(`SELECT token FROM "${name}"`);
    expect(rows).toEqual([{ token: "token-a" }]);
  });
});

describe("postgresStore claim function: security", () => {
  it("never calls a claim function another role planted in the table's schema before the upgrade", async () => {
    // A role that may create in the table's schema (every role in `public` before PostgreSQL 15) makes
    // the claim function first. The migration finds a function of that signature and keeps it; calling it
    // would run that role's code with the application's privileges, and trust whatever it answers.
    const schema = `${freshTable()}_s`;
    const name = `${schema}.records`;
    const mallory = `${schema}_mallory`;
    await pool.query(`CREATE SCHEMA "${schema}"`);
    await pool.query(`CREATE ROLE "${mallory}" NOLOGIN`);
    cleanups.push(async () => {
      await pool.query(`DROP SCHEMA "${schema}" CASCADE`);
      await pool.query(`DROP OWNED BY "${mallory}"`);
      await pool.query(`DROP ROLE "${mallory}"`);
    });
    await postgresStore({ client: pool, table: name }).migrate();
    await pool.query(`DROP FUNCTION "${schema}"."records_claim_v1q"`);
    await pool.query(`GRANT USAGE, CREATE ON SCHEMA "${schema}" TO "${mallory}"`);
    const client = await pool.connect();
    try {
      await client.query(`SET ROLE "${mallory}"`);
      await client.query(`CREATE FUNCTION "${schema}"."records_claim_v1q"(
          text, text, text, text, text, bigint, bigint, bigint)
        RETURNS text LANGUAGE sql AS $$ SELECT '{"claimed": true, "now": ' || $6 || '}' $$`);
      await client.query("RESET ROLE");
    } finally {
      client.release();
    }
    const store = postgresStore({ client: pool, table: name, clock: "request" });
    expect(await store.claim(claimRequest())).toMatchObject({ claimed: true });
    expect(await store.claim(claimRequest({ token: "token-b" }))).toMatchObject({
      claimed: false,
      record: { token: "token-a" },
    });
    expect((await pool.query(`SELECT token FROM "${schema}"."records"`)).rows).toEqual([
      { token: "token-a" },
    ]);
  });
});

describe("postgresStore claim function: name resolution", () => {
  it("claims in its own table, not in another schema's table whose claim function shares the name", async () => {
    // Schema-per-tenant: each tenant's `records` (an earlier version made them), and a shared schema later
    // in search_path whose `records` a store named schema-qualified already migrated. A migration that
    // looks the function up by its unqualified name finds the shared one and keeps it: the tenant's
    // claims would land in the shared table while its get, settle and release use its own.
    const base = freshTable();
    const tenant = `${base}_tenant`;
    const shared = `${base}_shared`;
    await pool.query(`CREATE SCHEMA "${tenant}"`);
    await pool.query(`CREATE SCHEMA "${shared}"`);
    cleanups.push(() => pool.query(`DROP SCHEMA "${tenant}", "${shared}" CASCADE`));
    await postgresStore({ client: pool, table: `${tenant}.records` }).migrate();
    await pool.query(`DROP FUNCTION "${tenant}"."records_claim_v1q"`);
    const sharedStore = postgresStore({ client: pool, table: `${shared}.records`, clock: "request" });
    await sharedStore.claim(claimRequest({ token: "token-shared" }));

    const client = new pg.Client({ connectionString: pgUrl });
    await client.connect();
    cleanups.push(() => client.end());
    await client.query(`SET search_path = "${tenant}", "${shared}"`);
    const store = postgresStore({ client, table: "records", clock: "request" });
    // The tenant never claimed this key: its claim must win, not replay the shared schema's record.
    const outcome = await store.claim(claimRequest());
    expect(outcome).toMatchObject({ claimed: true });
    const { rows } = await pool.query(`SELECT token FROM "${tenant}"."records"`);
    expect(rows).toEqual([{ token: "token-a" }]);
  });
});

describe("postgresStore claim function: the table it claims in", () => {
  it("a schema-qualified store claims in its own table through a function an unqualified store made", async () => {
    // A worker names the table unqualified (search_path = home) and migrates first; another names it
    // schema-qualified, from a connection whose search_path finds a different `records` first.
    const base = freshTable();
    const home = `${base}_home`;
    const other = `${base}_other`;
    await pool.query(`CREATE SCHEMA "${home}"`);
    await pool.query(`CREATE SCHEMA "${other}"`);
    cleanups.push(() => pool.query(`DROP SCHEMA "${home}", "${other}" CASCADE`));
    await postgresStore({ client: pool, table: `${other}.records` }).migrate();

    const unqualified = new pg.Client({ connectionString: pgUrl });
    await unqualified.connect();
    cleanups.push(() => unqualified.end());
    await unqualified.query(`SET search_path = "${home}"`);
    await postgresStore({ client: unqualified, table: "records" }).migrate();

    const client = new pg.Client({ connectionString: pgUrl });
    await client.connect();
    cleanups.push(() => client.end());
    await client.query(`SET search_path = "${other}"`);
    const store = postgresStore({ client, table: `${home}.records`, clock: "request" });
    expect((await store.claim(claimRequest())).claimed).toBe(true);
    const { rows } = await pool.query(`SELECT token FROM "${home}"."records"`);
    expect(rows).toEqual([{ token: "token-a" }]);
    await expect(store.get({ scope: "tenant-a", key: "order-1" }, t0)).resolves.toMatchObject({
      token: "token-a",
    });
  });
});

describe("postgresStore claim function: a search_path that changes under the store", () => {
  it("claims in the table the connection's search_path finds, as its get and settle do", async () => {
    // Schema-per-tenant on one pool: each request sets search_path to its tenant, then a shared schema.
    // Tenant b's table is one a DBA made (no function beside it); the shared schema has its own
    // `records`, migrated by a store on the unqualified name. The store's claims must use the table its
    // other statements use: tenant b's.
    const base = freshTable();
    const [a, b, shared] = [`${base}_a`, `${base}_b`, `${base}_shared`];
    for (const schema of [a, b, shared]) await pool.query(`CREATE SCHEMA "${schema}"`);
    cleanups.push(() => pool.query(`DROP SCHEMA "${a}", "${b}", "${shared}" CASCADE`));
    await postgresStore({ client: pool, table: `${b}.records` }).migrate();
    await pool.query(`DROP FUNCTION IF EXISTS "${b}"."records_claim_v1", "${b}"."records_claim_v1q"`);

    const client = new pg.Client({ connectionString: pgUrl });
    await client.connect();
    cleanups.push(() => client.end());
    await client.query(`SET search_path = "${shared}"`);
    await postgresStore({ client, table: "records", clock: "request" }).claim(
      claimRequest({ token: "token-shared" }),
    );

    await client.query(`SET search_path = "${a}", "${shared}"`);
    await pool.query(`CREATE TABLE "${a}"."records" (LIKE "${b}"."records" INCLUDING ALL)`);
    const store = postgresStore({ client, table: "records", clock: "request" });
    expect(await store.claim(claimRequest({ key: "warm-up" }))).toMatchObject({ claimed: true });

    await client.query(`SET search_path = "${b}", "${shared}"`);
    expect(await store.claim(claimRequest())).toMatchObject({ claimed: true });
    await expect(store.get({ scope: "tenant-a", key: "order-1" }, t0)).resolves.toMatchObject({
      token: "token-a",
    });
  });
});
