/**
 * What the settle's RETURNING costs, client side, as the store runs it: pg.Pool (max 16), named (prepared)
 * statements, the store's exact settle text (postgresStatements(…).settle on pgcost.idem, server clock) and
 * three variants that differ only in RETURNING: the 4 columns a settle's request lacks plus the instant it
 * judged by (status, token, updatedAt, leaseExpiresAt and expiresAt follow from the request and that
 * instant), `RETURNING 1 AS settled`, and none (rowCount tells a fenced
 * settle that matched). Each round first inserts `calls` in_progress records in one statement (untimed),
 * then times `calls` settles of them, `concurrency` at a time; variants interleaved (A B C, C B A, …).
 * Prints calls/s and this process's CPU µs per settle, medians of --reps rounds.
 *
 *   scripts/node.sh 24 --import tsx bench/pg/setup.ts
 *   scripts/node.sh 24 --import tsx bench/pg/settle-returning.ts [--calls 3000] [--reps 5] [--concurrency 1,16]
 *     [--synchronous-commit on|off]
 */
import { parseArgs } from "node:util";
import pg from "pg";
import { postgresStatements } from "../../src/postgres/postgres-statements.js";
import { median } from "../lib/measure.js";

const { values: opts } = parseArgs({
  options: {
    calls: { type: "string", default: "3000" },
    reps: { type: "string", default: "5" },
    concurrency: { type: "string", default: "1,16" },
    url: { type: "string", default: "postgres://postgres@127.0.0.1:5432/test" },
    // "off" takes the commit's flush out of each settle (this session only), leaving what the statement costs.
    "synchronous-commit": { type: "string", default: "on" },
  },
});
const calls = Number(opts.calls);
const reps = Number(opts.reps);
const pool = new pg.Pool({
  connectionString: opts.url,
  max: 16,
  options: `-c synchronous_commit=${opts["synchronous-commit"] === "off" ? "off" : "on"}`,
});
pool.on("error", () => {});
const s = postgresStatements({ schema: "pgcost", table: "idem" }, "server");
const full = s.settle.text;
const cut = full.slice(0, full.indexOf("RETURNING"));
const variants = [
  { name: "RETURNING 9 columns (store)", text: full },
  {
    name: "RETURNING 5: tool, fingerprint, createdAt, attempts, now",
    text: `${cut}RETURNING tool, fingerprint, created_at::float8 AS "createdAt", attempts, updated_at::float8 AS now`,
  },
  { name: "RETURNING 1", text: `${cut}RETURNING 1 AS settled` },
  { name: "no RETURNING", text: cut.trimEnd() },
].map((v, i) => ({ ...v, statementName: `pgcost_settle_${i}` }));
const result = JSON.stringify({ queued: true, to: "alice@example.com", messageId: "m-1" });
const run = `${process.pid}`;

async function round(variant: (typeof variants)[number], concurrency: number, tag: string) {
  const prefix = `${run}-${tag}-`;
  await pool.query(
    `INSERT INTO pgcost.idem (scope, key, tool, fingerprint, status, token, created_at, updated_at,
       lease_expires_at, expires_at, attempts)
     SELECT 'default', $1 || i, 'send_email', repeat('ab', 32), 'in_progress', $1 || i, t, t, t + 60000,
       t + 60000 + 86400000, 1
     FROM generate_series(0, $2::int - 1) AS i, (SELECT floor(extract(epoch FROM now()) * 1000)::bigint AS t) c`,
    [prefix, calls],
  );
  const perLane = Math.ceil(calls / concurrency);
  const cpu = process.cpuUsage();
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, lane) => {
      for (let i = lane * perLane; i < Math.min(calls, (lane + 1) * perLane); i++) {
        const key = `${prefix}${i}`;
        const request = {
          scope: "default",
          key,
          token: key,
          status: "completed" as const,
          result,
          error: null,
          ttlMs: 86_400_000,
          now: 0,
        };
        const answer = await pool.query({
          name: variant.statementName,
          text: variant.text,
          values: s.settle.values(request, 0),
        });
        if (answer.rowCount !== 1)
          throw new Error(`${variant.name}: settle of ${key} matched ${answer.rowCount} rows`);
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  const used = process.cpuUsage(cpu);
  return { perSecond: calls / seconds, cpuUs: (used.user + used.system) / calls };
}

console.log(
  `node ${process.version} · ${calls} settles per round · median of ${reps} rounds · synchronous_commit ${opts["synchronous-commit"]}`,
);
console.log("\n| in flight | settle | settles/s | CPU µs/settle (node) | ÷ store's |");
console.log("|--:|---|--:|--:|--:|");
try {
  for (const concurrency of opts.concurrency.split(",").map(Number)) {
    const rounds = new Map(variants.map((v) => [v.name, [] as { perSecond: number; cpuUs: number }[]]));
    for (const v of variants) await round(v, concurrency, `warm${concurrency}-${v.statementName}`);
    for (let rep = 0; rep < reps; rep++) {
      const order = rep % 2 === 0 ? variants : [...variants].reverse();
      for (const v of order)
        rounds.get(v.name)!.push(await round(v, concurrency, `c${concurrency}-r${rep}-${v.statementName}`));
      process.stderr.write(`c${concurrency} round ${rep + 1} of ${reps}\n`);
    }
    const base = median(rounds.get(variants[0]!.name)!.map((r) => r.perSecond));
    for (const v of variants) {
      const rate = median(rounds.get(v.name)!.map((r) => r.perSecond));
      const cpu = median(rounds.get(v.name)!.map((r) => r.cpuUs));
      console.log(
        `| ${concurrency} | ${v.name} | ${Math.round(rate).toLocaleString("en-US")} | ${cpu.toFixed(1)} | ${(rate / base).toFixed(2)} |`,
      );
    }
  }
} finally {
  await pool.query("DELETE FROM pgcost.idem WHERE length(key) > 5");
  await pool.end();
}
