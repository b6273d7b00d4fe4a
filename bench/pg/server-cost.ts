/**
 * What each statement of a PostgreSQL first call costs the server: the CPU time of the backends that ran
 * it (/proc/<pid>/schedstat, ns), per statement, for the floor's claim and settle, the store's, and
 * variants of the store's with one part changed. Client CPU is not counted, so the figures hold whatever
 * the client does; load on the machine still moves them (the backends' caches), so the variants run in
 * interleaved rounds (the order reversed every other round) and the medians are the figures.
 *
 *   scripts/node.sh 24 --import tsx bench/pg/server-cost.ts [--calls 2000] [--reps 7] [--connections 1]
 *     [--sync off] [--only claim,settle] [postgres://postgres@127.0.0.1:5432/test]
 *
 * --connections K runs each round on K connections at once (K backends summed), as a pool at K in flight
 * does; --sync on keeps the commit flush in each statement (the bench runs with it on; off leaves what the
 * statements themselves cost, with less noise); --only keeps the variants whose name contains one of the
 * words. Each variant writes new keys, appended in key order as the bench's lanes do. Tables `srvcost_*`
 * and the store's claim function are made at the start and dropped at the end. The server must run on
 * this machine (its /proc entries readable).
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import pg from "pg";
import { postgresStore } from "../../src/postgres/index.js";
import { postgresStatements } from "../../src/postgres/postgres-statements.js";
import { dropClaimFunctionsSql, floorTableSql } from "../lib/backends/postgres.js";
import { median } from "../lib/measure.js";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    calls: { type: "string", default: "2000" },
    reps: { type: "string", default: "7" },
    connections: { type: "string", default: "1" },
    sync: { type: "string", default: "off" },
    only: { type: "string" },
  },
});
const url = positionals[0] ?? process.env.IDEMPOTOOL_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const calls = Number(values.calls);
const reps = Number(values.reps);
const connections = Number(values.connections);
if (values.sync !== "on" && values.sync !== "off") throw new Error("--sync must be on or off");

const clients = await Promise.all(
  Array.from({ length: connections }, async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query(`SET synchronous_commit = ${values.sync}`);
    return client;
  }),
);
const admin = clients[0]!;
const pids = await Promise.all(
  clients.map(async (c) => (await c.query("SELECT pg_backend_pid() AS pid")).rows[0].pid as number),
);
/** The backends' CPU time so far, µs. */
const serverUs = () =>
  pids.reduce(
    (sum, pid) => sum + Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[0]) / 1000,
    0,
  );

const store = "srvcost_idem";
const floor = "srvcost_floor";
const checked = "srvcost_floor_checked";
const cleanUp = async () => {
  await admin.query(`DROP TABLE IF EXISTS ${store}, ${floor}, ${checked}`);
  await admin.query(dropClaimFunctionsSql([store]));
  await admin.query("DROP FUNCTION IF EXISTS srvcost_insert_only, srvcost_nothing");
};
await cleanUp();
await admin.query(floorTableSql(floor));
await admin.query(floorTableSql(checked));
// The store's CHECK on status, on the floor's table.
await admin.query(
  `ALTER TABLE ${checked} ADD CHECK (status IN ('in_progress', 'completed', 'failed', 'unknown'))`,
);
await postgresStore({ client: admin, table: store }).migrate();
const s = postgresStatements({ schema: undefined, table: store }, "server");

const parameters = `(p_scope text, p_key text, p_tool text, p_fingerprint text, p_token text, p_now bigint,
    p_lease_ms bigint, p_ttl_ms bigint) RETURNS text LANGUAGE plpgsql VOLATILE`;
const columns = `(scope, key, tool, fingerprint, status, token, created_at, updated_at, lease_expires_at,
    expires_at, attempts)`;
const doUpdate = `ON CONFLICT (scope, key) DO UPDATE SET tool = excluded.tool, fingerprint = excluded.fingerprint,
    status = excluded.status, token = excluded.token, created_at = excluded.created_at,
    updated_at = excluded.updated_at, lease_expires_at = excluded.lease_expires_at,
    expires_at = excluded.expires_at, attempts = excluded.attempts, result = NULL, error = NULL
    WHERE held.expires_at <= excluded.created_at`;
// The claim function's INSERT alone (no read before it), and a function that does nothing: what calling
// PL/pgSQL costs.
await admin.query(`CREATE FUNCTION srvcost_insert_only${parameters} AS $f$
  BEGIN
    INSERT INTO ${store} AS held ${columns} VALUES (p_scope, p_key, p_tool, p_fingerprint, 'in_progress', p_token,
      p_now, p_now, p_now + p_lease_ms, p_now + p_lease_ms + p_ttl_ms, 1) ${doUpdate};
    IF FOUND THEN RETURN json_build_object('claimed', true, 'now', p_now)::text; END IF;
    RETURN NULL;
  END $f$`);
await admin.query(`CREATE FUNCTION srvcost_nothing${parameters} AS $f$
  BEGIN RETURN '{"claimed":true}'; END $f$`);

const dayMs = 86_400_000;
const leaseMs = 60_000;
const fingerprint = "ab".repeat(32);
const result = JSON.stringify({ queued: true, to: "alice@example.com", messageId: "m-1" });
const serverClock = "(floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint + $6::bigint)";
const settleClock = serverClock.replace("$6", "$7");

type Run = (client: pg.Client, key: string, token: string) => Promise<unknown>;
interface Variant {
  readonly name: string;
  /** Run untimed before the timed statement, for the same key: the claim a settle settles. */
  readonly before?: Run;
  readonly run: Run;
}
const named = (name: string, text: string, values: unknown[]) => ({ name: `srvcost_${name}`, text, values });
const claimValues = (key: string, token: string) =>
  s.claim.values(
    { scope: "default", key, tool: "send_email", fingerprint, token, leaseMs, ttlMs: dayMs, now: 0 },
    0,
  );
const settleValues = (key: string, token: string) =>
  s.settle.values(
    { scope: "default", key, token, status: "completed", result, error: null, ttlMs: dayMs, now: 0 },
    0,
  );
const floorClaim = (table: string) => `INSERT INTO ${table} ${columns}
    VALUES ($1, $2, 'send_email', $3, 'in_progress', $4, $5, $5, $6, $7, 1) ON CONFLICT DO NOTHING`;
const floorSettle = (
  table: string,
) => `UPDATE ${table} SET status = 'completed', result = $1, updated_at = $2,
    lease_expires_at = $2, expires_at = $3 WHERE scope = $4 AND key = $5 AND token = $6`;
const floorClaimValues = (key: string, token: string) => {
  const now = Date.now();
  return ["default", key, fingerprint, token, now, now + leaseMs, now + dayMs];
};
// A later instant than the claim's, as in the bench: the settle changes expires_at (no HOT update).
const floorSettleValues = (key: string, token: string) => {
  const at = Date.now() + 1;
  return [result, at, at + dayMs, "default", key, token];
};
const storeClaim: Run = (c, key, token) => c.query(named("claim", s.claim.text, claimValues(key, token)));
const callFunction = (fn: string) =>
  `SELECT ${fn}($1, $2, $3, $4, $5, ${serverClock}, $7::bigint, $8::bigint) AS claim`;
const settleWith = (
  set: string,
  returning: string,
) => `UPDATE ${store} SET status = $4, result = $5, error = $6,
    ${set} WHERE scope = $1 AND key = $2 AND token = $3 AND status IN ('in_progress', 'unknown') ${returning}`;
const settleSet = (clock: string) =>
  `updated_at = ${clock}, lease_expires_at = ${clock}, expires_at = ${clock} + $8::bigint`;
const returning = s.settle.text.slice(s.settle.text.indexOf("RETURNING"));
const settleRequestClock: Run = (c, key, token) => {
  const v = settleValues(key, token);
  v[6] = Date.now();
  return c.query(named("settle_request_clock", settleWith(settleSet("$7::bigint"), returning), v));
};

const variants: Variant[] = [
  {
    name: "claim: the floor's INSERT … DO NOTHING",
    run: (c, k, t) => c.query(named("floor_claim", floorClaim(floor), floorClaimValues(k, t))),
  },
  {
    name: "claim: the floor's, on a table with the store's CHECK",
    run: (c, k, t) => c.query(named("checked_claim", floorClaim(checked), floorClaimValues(k, t))),
  },
  { name: "claim: the store's claim function", run: storeClaim },
  {
    name: "claim: the function's INSERT … DO UPDATE alone, in PL/pgSQL",
    run: (c, k, t) => c.query(named("insert_only", callFunction("srvcost_insert_only"), claimValues(k, t))),
  },
  {
    name: "claim: a PL/pgSQL function that does nothing",
    run: (c, k, t) => c.query(named("nothing", callFunction("srvcost_nothing"), claimValues(k, t))),
  },
  {
    name: "settle: the floor's UPDATE",
    before: (c, k, t) => c.query(named("floor_claim", floorClaim(floor), floorClaimValues(k, t))),
    run: (c, k, t) => c.query(named("floor_settle", floorSettle(floor), floorSettleValues(k, t))),
  },
  {
    name: "settle: the floor's UPDATE, on the store's table",
    before: storeClaim,
    run: (c, k, t) => c.query(named("floor_settle_store", floorSettle(store), floorSettleValues(k, t))),
  },
  {
    name: "settle: the store's settle",
    before: storeClaim,
    run: (c, k, t) => c.query(named("settle", s.settle.text, settleValues(k, t))),
  },
  {
    name: "settle: the store's, without RETURNING",
    before: storeClaim,
    run: (c, k, t) =>
      c.query(named("settle_no_returning", settleWith(settleSet(settleClock), ""), settleValues(k, t))),
  },
  { name: "settle: the store's, the request's clock", before: storeClaim, run: settleRequestClock },
  {
    name: "settle: the store's, expires_at kept (a HOT update)",
    before: storeClaim,
    run: (c, k, t) =>
      c.query(
        named(
          "settle_hot",
          settleWith(
            `updated_at = ${settleClock}, lease_expires_at = ${settleClock},
              expires_at = greatest(expires_at, ${settleClock} + $8::bigint)`,
            returning,
          ),
          settleValues(k, t),
        ),
      ),
  },
];
const words = values.only?.split(",");
const chosen = words ? variants.filter((v) => words.some((w) => v.name.includes(w))) : variants;

let sequence = 0;
/** One round of `calls` new keys: the backends' CPU per timed statement, µs. */
async function round(variant: Variant): Promise<number> {
  const perConnection = Math.ceil(calls / connections);
  const lanes = clients.map(() =>
    Array.from({ length: perConnection }, () => ({
      key: `k-${String(sequence++).padStart(10, "0")}`,
      token: randomUUID(),
    })),
  );
  if (variant.before) {
    const before = variant.before;
    await Promise.all(
      clients.map(async (c, i) => {
        for (const { key, token } of lanes[i]!) await before(c, key, token);
      }),
    );
  }
  const start = serverUs();
  await Promise.all(
    clients.map(async (c, i) => {
      for (const { key, token } of lanes[i]!) await variant.run(c, key, token);
    }),
  );
  return (serverUs() - start) / (perConnection * connections);
}

try {
  for (const variant of chosen) await round(variant);
  const rounds = new Map<Variant, number[]>(chosen.map((v) => [v, []]));
  for (let rep = 0; rep < reps; rep++) {
    for (const variant of rep % 2 === 0 ? chosen : [...chosen].reverse()) {
      rounds.get(variant)!.push(await round(variant));
    }
  }
  console.log(
    `Server CPU per statement, µs: ${calls} statements a round on ${connections} connection(s), ` +
      `synchronous_commit=${values.sync}, median of ${reps} interleaved rounds\n`,
  );
  console.log("| statement | server µs | rounds |\n|---|--:|---|");
  for (const [variant, us] of rounds) {
    console.log(`| ${variant.name} | ${median(us).toFixed(1)} | ${us.map((u) => u.toFixed(0)).join(" ")} |`);
  }
} finally {
  await cleanUp();
  await Promise.all(clients.map((c) => c.end()));
}
