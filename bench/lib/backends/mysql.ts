import mysql from "mysql2/promise";
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
import { poolSize, postgresConcurrencies } from "./postgres.js";

const dayMs = 24 * 60 * 60 * 1000;
const leaseMs = 60_000;

/** The floor table: the store's columns (bytes, as the store keeps them), primary key and expiry index. */
function floorTableSql(table: string): string {
  return `CREATE TABLE ${table} (
    scope VARBINARY(1020) NOT NULL, \`key\` VARBINARY(1020) NOT NULL, tool VARBINARY(1020) NOT NULL,
    fingerprint VARBINARY(255) NOT NULL, status VARBINARY(16) NOT NULL, token VARBINARY(255) NOT NULL,
    created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, lease_expires_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL, attempts INT NOT NULL, result LONGBLOB NULL, error LONGBLOB NULL,
    PRIMARY KEY (scope, \`key\`), KEY ${table}_expires_at (expires_at)) ENGINE = InnoDB`;
}

/**
 * The floor on the same pool: a first call is one INSERT IGNORE (claim) and one UPDATE fenced by the token
 * (settle), each its own autocommit transaction; a replay is one SELECT by primary key. Expired rows are
 * never replaced (the bench's keys are fresh), which the store must handle and the floor does not.
 */
async function mysqlFloor(pool: mysql.Pool, table: string, fingerprint: string): Promise<Subject> {
  await pool.query(floorTableSql(table));
  const tool = countedTool();
  const claim = `INSERT IGNORE INTO ${table} (scope, \`key\`, tool, fingerprint, status, token, created_at,
      updated_at, lease_expires_at, expires_at, attempts) VALUES (?, ?, 'send_email', ?, 'in_progress', ?, ?, ?, ?, ?, 1)`;
  const settle = `UPDATE ${table} SET status = 'completed', result = ?, updated_at = ?, lease_expires_at = ?,
      expires_at = ? WHERE scope = ? AND \`key\` = ? AND token = ?`;
  const read = `SELECT status, fingerprint, result FROM ${table} WHERE scope = ? AND \`key\` = ? AND expires_at > ?`;
  const first = async (key: string, args: ToolArgs) => {
    const now = Date.now();
    const [claimed] = await pool.query(claim, [
      "default",
      key,
      fingerprint,
      key,
      now,
      now,
      now + leaseMs,
      now + dayMs,
    ]);
    if ((claimed as mysql.ResultSetHeader).affectedRows !== 1) {
      throw new AlreadyClaimed("mysql", key);
    }
    const result = await tool.fn(args);
    const at = Date.now();
    await pool.query(settle, [JSON.stringify(result), at, at, at + dayMs, "default", key, key]);
    return result;
  };
  const replay = async (key: string) => {
    const [rows] = await pool.query(read, ["default", key, Date.now()]);
    const row = (rows as mysql.RowDataPacket[])[0] as
      | { status: Buffer; fingerprint: Buffer; result: Buffer | null }
      | undefined;
    if (
      row?.status.toString() !== "completed" ||
      row.fingerprint.toString() !== fingerprint ||
      row.result === null
    ) {
      throw new Error(`mysql floor: ${key} holds no completed record`);
    }
    return JSON.parse(row.result.toString()) as unknown;
  };
  return {
    name: SubjectName.floor,
    description: `mysql2 pool (connectionLimit ${poolSize}), same pool: INSERT IGNORE + UPDATE; replay: SELECT by primary key`,
    first,
    replay,
    contended: waitingFlight(first, replay),
    validatesPayload: false,
    runs: tool.runs,
  };
}

/** mysqlStore beside its floor on one mysql2 pool (MySQL or MariaDB at `url`). */
export async function mysqlBackends(
  lib: Library,
  options: { readonly url: string; readonly tag: string; readonly fingerprint: string },
): Promise<BackendSetup> {
  const pool = mysql.createPool({ uri: options.url, connectionLimit: poolSize, connectTimeout: 10_000 });
  let version: string;
  let durable: string;
  try {
    const [rows] = await pool.query("SELECT VERSION() AS version, @@innodb_flush_log_at_trx_commit AS flush");
    const row = (rows as mysql.RowDataPacket[])[0]!;
    version = String(row.version);
    durable = String(row.flush);
  } catch (error) {
    await pool.end();
    throw new Skip(`MySQL (${options.url}) is not reachable: ${(error as Error).message}`);
  }
  const storeTable = `bench_${options.tag}_idem`;
  const floorTable = `bench_${options.tag}_floor`;
  const subjects: Subject[] = [];
  if (lib.mysql) {
    const store = lib.mysql.mysqlStore({ client: pool, table: storeTable });
    await store.migrate();
    subjects.push(idempotoolSubject(lib, () => store, `mysqlStore({ client: mysql2 pool(${poolSize}) })`));
  }
  subjects.push(await mysqlFloor(pool, floorTable, options.fingerprint));
  return {
    backends: [
      {
        name: BackendName.mysql,
        description: `${version}, innodb_flush_log_at_trx_commit=${durable}, mysql2 pool connectionLimit ${poolSize}`,
        concurrencies: postgresConcurrencies,
        subjects,
      },
    ],
    info: { mysql: version },
    async close() {
      await pool.query(`DROP TABLE IF EXISTS ${storeTable}, ${floorTable}`);
      await pool.end();
    },
  };
}
