/**
 * Scratch schema for the pgbench scripts in this folder: schema `pgcost` with
 *   - pgcost.idem: the store's own table, index and claim function (`pgcost.idem_claim_v1q`), made by the
 *     store's migrate() (src/, not dist/), so the scripts call exactly what the store installs;
 *   - pgcost.floor: the bench's floor table (bench/lib/backends/postgres.ts floorTableSql);
 *   - 10,000 completed records in each (keys '1'…'10000', token = key) for the replay scripts.
 * Nothing outside schema `pgcost` is touched. Drop it with teardown.sql.
 * It also writes claim_store_stmt.sql afresh from the store's own claim statement (src/), so that script
 * measures the statement the store sends today.
 *
 *   scripts/node.sh 24 --import tsx bench/pg/setup.ts [postgres://postgres@127.0.0.1:5432/test]
 */
import { readFileSync, writeFileSync } from "node:fs";
import pg from "pg";
import { postgresStore } from "../../src/postgres/index.js";
import { postgresStatements } from "../../src/postgres/postgres-statements.js";
import { floorTableSql } from "../lib/backends/postgres.js";

// Diagnostic functions, for the claim_diag_* and *_insfirst scripts only (the store never calls them). The
// same parameters and answer as the store's claim function (idem_claim_v1q), each with one part changed:
const insertValues = `(p_scope, p_key, p_tool, p_fingerprint, 'in_progress', p_token, p_now, p_now,
    p_now + p_lease_ms, p_now + p_lease_ms + p_ttl_ms, 1)`;
const columns = `(scope, key, tool, fingerprint, status, token, created_at, updated_at, lease_expires_at,
    expires_at, attempts)`;
const doUpdate = `ON CONFLICT (scope, key) DO UPDATE SET tool = excluded.tool, fingerprint = excluded.fingerprint,
    status = excluded.status, token = excluded.token, created_at = excluded.created_at,
    updated_at = excluded.updated_at, lease_expires_at = excluded.lease_expires_at,
    expires_at = excluded.expires_at, attempts = excluded.attempts, result = NULL, error = NULL
    WHERE held.expires_at <= excluded.created_at`;
const holder = `json_build_object('claimed', false, 'now', p_now, 'tool', live.tool, 'fingerprint',
    live.fingerprint, 'status', live.status, 'token', live.token, 'createdAt', live.created_at, 'updatedAt',
    live.updated_at, 'leaseExpiresAt', live.lease_expires_at, 'expiresAt', live.expires_at, 'attempts',
    live.attempts, 'result', live.result, 'error', live.error)::text`;
const signature = `(p_scope text, p_key text, p_tool text, p_fingerprint text, p_token text, p_now bigint,
    p_lease_ms bigint, p_ttl_ms bigint) RETURNS text LANGUAGE plpgsql VOLATILE`;
const diagnostics = [
  // - the floor's INSERT … ON CONFLICT DO NOTHING alone, in PL/pgSQL: what calling a function costs;
  `CREATE FUNCTION pgcost.diag_insert_only${signature} AS $f$
  BEGIN
    INSERT INTO pgcost.idem AS held ${columns} VALUES ${insertValues} ON CONFLICT DO NOTHING;
    IF FOUND THEN RETURN json_build_object('claimed', true, 'now', p_now)::text; END IF;
    RETURN NULL;
  END $f$`,
  // - the store's own INSERT … ON CONFLICT DO UPDATE … WHERE alone, without the read before it;
  `CREATE FUNCTION pgcost.diag_doupdate_only${signature} AS $f$
  BEGIN
    INSERT INTO pgcost.idem AS held ${columns} VALUES ${insertValues} ${doUpdate};
    IF FOUND THEN RETURN json_build_object('claimed', true, 'now', p_now)::text; END IF;
    RETURN NULL;
  END $f$`,
  // - insert first: INSERT … ON CONFLICT DO NOTHING, then (the key exists) the store's read, then (it had
  //   expired) the store's replacing insert; what a new key and a replay cost in that order.
  `CREATE FUNCTION pgcost.cand_insert_first${signature} AS $f$
  DECLARE found_holder text;
  BEGIN
    FOR attempt IN 1..3 LOOP
      INSERT INTO pgcost.idem AS held ${columns} VALUES ${insertValues} ON CONFLICT DO NOTHING;
      IF FOUND THEN RETURN json_build_object('claimed', true, 'now', p_now)::text; END IF;
      SELECT ${holder} INTO found_holder FROM pgcost.idem AS live
        WHERE live.scope = p_scope AND live.key = p_key AND live.expires_at > p_now;
      IF FOUND THEN RETURN found_holder; END IF;
      INSERT INTO pgcost.idem AS held ${columns} VALUES ${insertValues} ${doUpdate};
      IF FOUND THEN RETURN json_build_object('claimed', true, 'now', p_now)::text; END IF;
    END LOOP;
    RETURN NULL;
  END $f$`,
];

/**
 * claim_store_stmt.sql: its comment and \set lines as they are, then the store's claim statement (under the
 * server clock, as the store's default) with pgbench variables for the parameters the store sends.
 */
function writeStatementScript(): void {
  const file = new URL("claim_store_stmt.sql", import.meta.url);
  const head = readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => line.startsWith("--") || line.startsWith("\\set"));
  const { text, values } = postgresStatements({ schema: "pgcost", table: "idem" }, "server").claimStatement;
  // The SQL each parameter becomes, in the parameters' own places ($1 …).
  const pgbenchValues = {
    scope: "'default'",
    key: ":id",
    tool: "'send_email'",
    fingerprint: `'${"ab".repeat(32)}'`,
    token: ":id",
    leaseMs: ":lease",
    ttlMs: ":ttl",
  };
  const parameters = values(
    pgbenchValues as unknown as Parameters<typeof values>[0],
    ":off" as never,
  ) as string[];
  // From the last, so $1 never takes the start of $10.
  let sql = text;
  for (let i = parameters.length; i >= 1; i--) sql = sql.replaceAll(`$${i}`, parameters[i - 1]!);
  writeFileSync(file, `${head.join("\n")}\n${sql};\n`);
}

writeStatementScript();
const url = process.argv[2] ?? "postgres://postgres@127.0.0.1:5432/test";
const client = new pg.Client({ connectionString: url });
await client.connect();
try {
  await client.query("DROP SCHEMA IF EXISTS pgcost CASCADE");
  await client.query("CREATE SCHEMA pgcost");
  await postgresStore({ client, table: "pgcost.idem" }).migrate();
  for (const sql of diagnostics) await client.query(sql);
  await client.query(floorTableSql("pgcost.floor").replace("pgcost.floor_expires_at", "floor_expires_at"));
  const result = JSON.stringify({ queued: true, to: "alice@example.com", messageId: "m-1" });
  for (const table of ["pgcost.idem", "pgcost.floor"]) {
    await client.query(
      `INSERT INTO ${table} (scope, key, tool, fingerprint, status, token, created_at, updated_at,
         lease_expires_at, expires_at, attempts, result)
       SELECT 'default', i::text, 'send_email', repeat('ab', 32), 'completed', i::text, t, t, t,
         t + 365::bigint * 86400000, 1, $1
       FROM generate_series(1, 10000) AS i,
         (SELECT floor(extract(epoch FROM now()) * 1000)::bigint AS t) AS clock`,
      [result],
    );
  }
  await client.query("ANALYZE pgcost.idem; ANALYZE pgcost.floor");
  console.log("schema pgcost ready");
} finally {
  await client.end();
}
