import { readFileSync } from "node:fs";
import pg from "pg";
import type { Library } from "../library.js";
import {
  AlreadyClaimed,
  countedTool,
  type Subject,
  SubjectName,
  type ToolArgs,
  waitingFlight,
} from "../subject.js";
import { BackendName, type BackendSetup, Skip } from "./backend.js";
import { idempotoolSubject } from "./memory.js";

const dayMs = 24 * 60 * 60 * 1000;
const leaseMs = 60_000;
/** Issue 7 asks for concurrency 16 on PostgreSQL beside 1 and 32; the pool holds 16 connections. */
export const postgresConcurrencies = [1, 16, 32] as const;
export const poolSize = 16;

/** Drops the claim functions a store's migrate() made beside `tables`. */
export function dropClaimFunctionsSql(tables: readonly string[]): string {
  return `DROP FUNCTION IF EXISTS ${tables.map((t) => `"${t}_claim_v1"`).join(", ")}`;
}

/** The floor table: the store's columns, collation, primary key and expiry index. */
export function floorTableSql(table: string): string {
  return `CREATE TABLE ${table} (
    scope text COLLATE "C" NOT NULL, key text COLLATE "C" NOT NULL, tool text NOT NULL,
    fingerprint text NOT NULL, status text NOT NULL, token text NOT NULL, created_at bigint NOT NULL,
    updated_at bigint NOT NULL, lease_expires_at bigint NOT NULL, expires_at bigint NOT NULL,
    attempts integer NOT NULL, result text, error text, PRIMARY KEY (scope, key));
  CREATE INDEX ${table}_expires_at ON ${table} (expires_at)`;
}

/**
 * The floor on the same pool: a first call is one INSERT … ON CONFLICT DO NOTHING (claim) and one UPDATE
 * (settle), each its own autocommit transaction (two commits, as the design needs: the claim must be
 * durable before the tool runs); a replay is one SELECT by primary key. Named (prepared) statements.
 */
export async function postgresFloor(
  pool: pg.Pool,
  table: string,
  fingerprint: string,
  create = true,
): Promise<Subject> {
  if (create) await pool.query(floorTableSql(table));
  const tool = countedTool();
  const claim = {
    name: `${table}_claim`,
    text: `INSERT INTO ${table} (scope, key, tool, fingerprint, status, token, created_at, updated_at,
        lease_expires_at, expires_at, attempts) VALUES ($1, $2, 'send_email', $3, 'in_progress', $4, $5, $5, $6, $7, 1)
      ON CONFLICT DO NOTHING`,
  };
  const settle = {
    name: `${table}_settle`,
    text: `UPDATE ${table} SET status = 'completed', result = $1, updated_at = $2, lease_expires_at = $2,
        expires_at = $3 WHERE scope = $4 AND key = $5 AND token = $6`,
  };
  const read = {
    name: `${table}_read`,
    text: `SELECT status, fingerprint, result FROM ${table} WHERE scope = $1 AND key = $2 AND expires_at > $3`,
  };
  const first = async (key: string, args: ToolArgs) => {
    const now = Date.now();
    const claimed = await pool.query({
      ...claim,
      values: ["default", key, fingerprint, key, now, now + leaseMs, now + dayMs],
    });
    if (claimed.rowCount !== 1) throw new AlreadyClaimed("postgres", key);
    const result = await tool.fn(args);
    const at = Date.now();
    await pool.query({ ...settle, values: [JSON.stringify(result), at, at + dayMs, "default", key, key] });
    return result;
  };
  const replay = async (key: string) => {
    const { rows } = await pool.query({ ...read, values: ["default", key, Date.now()] });
    const row = rows[0] as { status: string; fingerprint: string; result: string | null } | undefined;
    if (row?.status !== "completed" || row.fingerprint !== fingerprint || row.result === null) {
      throw new Error(`postgres floor: ${key} holds no completed record`);
    }
    return JSON.parse(row.result) as unknown;
  };
  return {
    name: SubjectName.floor,
    description: `pg.Pool (max ${poolSize}), same pool: INSERT … ON CONFLICT DO NOTHING + UPDATE (named statements); replay: SELECT by primary key`,
    first,
    replay,
    contended: waitingFlight(first, replay),
    validatesPayload: false,
    runs: tool.runs,
  };
}

export function connectPool(url: string, applicationName?: string): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    connectionTimeoutMillis: 10_000,
    ...(applicationName === undefined ? {} : { application_name: applicationName }),
  });
  pool.on("error", () => {});
  return pool;
}

/**
 * The server's CPU time so far (µs) in the backends serving connections named `applicationName`, read from
 * /proc/<pid>/schedstat (nanoseconds, not the 10 ms ticks of /proc/<pid>/stat): on a server on this machine,
 * what a call costs PostgreSQL beside what it costs the client. Undefined when the backends' /proc entries
 * cannot be read (the server runs elsewhere, or as a user whose /proc this one cannot see).
 */
export async function serverCpuUs(pool: pg.Pool, applicationName: string): Promise<number | undefined> {
  const { rows } = await pool.query({
    text: "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
    values: [applicationName],
  });
  let totalNs = 0;
  for (const { pid } of rows as { pid: number }[]) {
    try {
      totalNs += Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[0]);
    } catch {
      return undefined;
    }
  }
  return totalNs / 1000;
}

export async function postgresBackends(
  lib: Library,
  options: { readonly url: string; readonly tag: string; readonly fingerprint: string },
  candidate?: Library,
): Promise<BackendSetup> {
  const pool = connectPool(options.url);
  let settings: Record<string, string>;
  try {
    const { rows } = await pool.query(
      "SELECT current_setting('server_version') AS version, current_setting('synchronous_commit') AS sync, " +
        "current_setting('fsync') AS fsync",
    );
    settings = rows[0] as Record<string, string>;
  } catch (error) {
    await pool.end();
    throw new Skip(`PostgreSQL (${options.url}) is not reachable: ${(error as Error).message}`);
  }
  if (settings.sync !== "on") {
    await pool.end();
    throw new Skip(`PostgreSQL runs with synchronous_commit=${settings.sync}; issue 7 measures it on`);
  }
  const storeTable = `bench_${options.tag}_idem`;
  const floorTable = `bench_${options.tag}_floor`;
  const subjects: Subject[] = [];
  if (lib.postgres) {
    const store = lib.postgres.postgresStore({ client: pool, table: storeTable });
    await store.migrate();
    subjects.push(idempotoolSubject(lib, () => store, `postgresStore({ client: pg.Pool(max ${poolSize}) })`));
  }
  subjects.push(await postgresFloor(pool, floorTable, options.fingerprint));
  const candidateTable = `bench_${options.tag}_cand`;
  if (candidate?.postgres) {
    const store = candidate.postgres.postgresStore({ client: pool, table: candidateTable });
    await store.migrate();
    subjects.push(
      idempotoolSubject(
        candidate,
        () => store,
        `postgresStore from ${candidate.dir}`,
        false,
        SubjectName.candidate,
      ),
    );
  }
  return {
    backends: [
      {
        name: BackendName.postgres,
        description: `PostgreSQL ${settings.version}, synchronous_commit=${settings.sync}, fsync=${settings.fsync}, pg.Pool max ${poolSize}`,
        concurrencies: postgresConcurrencies,
        subjects,
      },
    ],
    info: { postgres: settings.version ?? "?", synchronousCommit: settings.sync ?? "?" },
    async close() {
      await pool.query(`DROP TABLE IF EXISTS ${storeTable}, ${floorTable}, ${candidateTable}`);
      // The claim functions the stores' migrations made beside their tables.
      await pool.query(dropClaimFunctionsSql([storeTable, candidateTable]));
      await pool.end();
    },
  };
}
