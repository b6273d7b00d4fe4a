/**
 * DBOS steps are at-least-once: a worker killed in the middle of a step runs that step again when DBOS
 * recovers the workflow. A real DBOS worker (test/fixtures/dbos-worker.ts, its system database a fresh
 * PostgreSQL database) sends an email through an "external API" that records every send, and the test
 * SIGKILLs it at each point of the step; a second worker then recovers the workflow.
 */
import { randomBytes } from "node:crypto";
import type pg from "pg";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { dropTable, freshTable, pgUrl, testPool } from "./fixtures/pg-helpers.js";
import { startWorker, type WorkerProcess } from "./fixtures/worker-process.js";

type Mode = "plain" | "verify" | "no-verify";
type Point = "before-effect" | "after-effect" | "after-settle";

let admin: pg.Pool;
let database: string;
let sentTable: string;
let recordsTable: string;
let workflowId: string;
const started: WorkerProcess[] = [];

beforeAll(() => {
  admin = testPool({ max: 2 });
});
afterAll(async () => {
  await admin.end();
});
beforeEach(async () => {
  database = `dbos_${randomBytes(6).toString("hex")}`;
  sentTable = freshTable();
  recordsTable = freshTable();
  workflowId = `welcome-${randomBytes(4).toString("hex")}`;
  await admin.query(
    `CREATE TABLE ${sentTable} (id serial PRIMARY KEY, recipient text NOT NULL, idempotency_key text)`,
  );
});
afterEach(async () => {
  for (const worker of started.splice(0)) {
    if (worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill("SIGKILL");
    await worker.exited;
  }
  await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await dropTable(admin, sentTable);
  await dropTable(admin, recordsTable);
});

function systemDatabaseUrl(): string {
  const url = new URL(pgUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

function worker(mode: Mode, phase: "run" | "recover", stopAt: Point | "none", offsetMs = 0) {
  const process = startWorker("dbos-worker.ts", [
    systemDatabaseUrl(),
    sentTable,
    recordsTable,
    mode,
    phase,
    workflowId,
    stopAt,
    String(offsetMs),
  ]);
  started.push(process);
  return process;
}

/** Runs the workflow and SIGKILLs its worker once it reaches `point`. */
async function killAt(mode: Mode, point: Point): Promise<void> {
  const first = worker(mode, "run", point);
  await first.waitFor(`at ${point}`);
  first.child.kill("SIGKILL");
  expect((await first.exited).signal).toBe("SIGKILL");
}

/** A new worker recovers the workflow; what it printed when the workflow ended. */
async function recover(mode: Mode): Promise<string> {
  // Its store's clock runs past the dead worker's lease (30 s), as a restart after that long would see it.
  const second = worker(mode, "recover", "none", 60_000);
  const exited = await second.exited;
  expect(exited.code, exited.stderr).toBe(0);
  const line = exited.stdout.split("\n").find((l) => l.startsWith("result ") || l.startsWith("error "));
  if (line === undefined) throw new Error(`the recovering worker printed no outcome\n${exited.stdout}`);
  return line;
}

async function sent(): Promise<{ id: number; idempotency_key: string | null }[]> {
  const { rows } = await admin.query<{ id: number; idempotency_key: string | null }>(
    `SELECT id, idempotency_key FROM ${sentTable} ORDER BY id`,
  );
  return rows;
}

const resultOf = (line: string) => JSON.parse(line.slice("result ".length)) as { messageId: string };

// Each test starts two Node processes that each launch DBOS: seconds apiece on a busy machine.
describe("a DBOS worker killed in the middle of a step that sends an email", () => {
  it("without idempotool, sends the email twice once the workflow recovers (the step runs again)", async () => {
    await killAt("plain", "after-effect");
    expect(await sent()).toHaveLength(1);

    const outcome = await recover("plain");
    const rows = await sent();
    expect(rows).toHaveLength(2);
    expect(resultOf(outcome).messageId).toBe(`msg-${rows[1]?.id}`);
  }, 60_000);

  it("killed before the effect: the recovered step sends the email, once", async () => {
    await killAt("verify", "before-effect");
    expect(await sent()).toHaveLength(0);

    const outcome = await recover("verify");
    const rows = await sent();
    expect(rows).toHaveLength(1);
    expect(resultOf(outcome).messageId).toBe(`msg-${rows[0]?.id}`);
  }, 60_000);

  it("killed after the effect, before idempotool recorded it: verify finds the email, nothing is sent again, and the workflow returns the original message id", async () => {
    await killAt("verify", "after-effect");
    const before = await sent();
    expect(before).toHaveLength(1);

    const outcome = await recover("verify");
    expect(await sent()).toEqual(before);
    expect(resultOf(outcome).messageId).toBe(`msg-${before[0]?.id}`);
  }, 60_000);

  it("killed after idempotool recorded the outcome, before DBOS recorded the step: the re-run step replays it", async () => {
    await killAt("verify", "after-settle");
    const before = await sent();
    expect(before).toHaveLength(1);

    const outcome = await recover("verify");
    expect(await sent()).toEqual(before);
    expect(resultOf(outcome).messageId).toBe(`msg-${before[0]?.id}`);
  }, 60_000);

  it("killed after the effect with no way to verify: the recovered step fails closed with outcome_unknown instead of sending again", async () => {
    await killAt("no-verify", "after-effect");
    const before = await sent();
    expect(before).toHaveLength(1);

    const outcome = await recover("no-verify");
    expect(outcome).toMatch(/^error outcome_unknown /);
    expect(await sent()).toEqual(before);
  }, 60_000);
});
