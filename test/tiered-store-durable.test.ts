/**
 * tieredStore over real durable stores: a record removed through the durable store by another process
 * (or the command line) stops being replayed within `maxStalenessMs`, and a server clock ahead of the
 * caller's never lets a cached record outlive its expiry.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { idempotent, tieredStore } from "../src/index.js";
import { postgresStore } from "../src/postgres/index.js";
import { sqliteStore } from "../src/sqlite/index.js";
import { fakeClock } from "../src/testing/index.js";
import { ensureBuilt, idempotool } from "./fixtures/cli-binary.js";
import { countingClient, dropTable, freshTable, testPool } from "./fixtures/pg-helpers.js";
import { startWorker } from "./fixtures/worker-process.js";

const HOUR = 60 * 60 * 1000;

interface CallReply {
  readonly result: number;
  readonly was_replay: boolean;
  readonly durableClaims: number;
}

/** Starts a tiered-cache worker on `file` and returns a function that sends it a command and reads its reply. */
async function cacheWorker(file: string, startMs: number, maxStalenessMs: number) {
  const worker = startWorker("tiered-cache-worker.ts", [file, String(startMs), String(maxStalenessMs)]);
  workers.push(worker.child);
  const lines = createInterface({ input: worker.child.stdout })[Symbol.asyncIterator]();
  const nextLine = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`the worker ended early\n${(await worker.exited).stderr}`);
    return value as string;
  };
  expect(await nextLine()).toBe("ready");
  return {
    call: async (key: string) => {
      worker.child.stdin.write(`call ${key}\n`);
      return JSON.parse(await nextLine()) as CallReply;
    },
    advance: async (ms: number) => {
      worker.child.stdin.write(`advance ${ms}\n`);
      await nextLine();
    },
  };
}

const workers: ReturnType<typeof startWorker>["child"][] = [];
const dirs: string[] = [];
const pool = testPool({ max: 2 });
const tables: string[] = [];

beforeAll(async () => {
  await ensureBuilt();
}, 200_000);
afterEach(async () => {
  for (const child of workers.splice(0)) if (child.exitCode === null) child.kill();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  for (const name of tables.splice(0)) await dropTable(pool, name);
});
afterAll(async () => {
  await pool.end();
});

function tempFile(): string {
  const dir = mkdtempSync(join(tmpdir(), "idempotool-tiered-"));
  dirs.push(dir);
  return join(dir, "records.db");
}

describe("tieredStore over a SQLite file shared across processes", () => {
  it("stops replaying a record another process deleted once maxStalenessMs has passed", async () => {
    const file = tempFile();
    const a = await cacheWorker(file, Date.now(), 1_000);
    expect(await a.call("k")).toEqual({ result: 1, was_replay: false, durableClaims: 1 });
    expect(await a.call("k")).toEqual({ result: 1, was_replay: true, durableClaims: 1 });

    // This process is "B": an operator's delete, straight on the shared file.
    const b = sqliteStore({ path: file });
    try {
      expect(await b.delete({ scope: "default", key: "k" })).toBe(true);
    } finally {
      await b.close();
    }

    // Within the bound A may still replay from its cache; from then on it asks the file and runs again.
    await a.advance(999);
    expect(await a.call("k")).toEqual({ result: 1, was_replay: true, durableClaims: 1 });
    await a.advance(1);
    expect(await a.call("k")).toEqual({ result: 2, was_replay: false, durableClaims: 2 });
    expect(await a.call("k")).toEqual({ result: 2, was_replay: true, durableClaims: 2 });
  });

  it("stops replaying a record `idempotool purge` removed once maxStalenessMs has passed", async () => {
    const file = tempFile();
    // A's clock is 3 h behind the command line's: the record (kept 2 h) is live for A, expired for the CLI.
    const a = await cacheWorker(file, Date.now() - 3 * HOUR, 1_000);
    expect(await a.call("k")).toEqual({ result: 1, was_replay: false, durableClaims: 1 });
    expect(await a.call("k")).toEqual({ result: 1, was_replay: true, durableClaims: 1 });

    const purge = await idempotool(["purge", "--store", `sqlite://${file}`, "--json"]);
    expect(purge.code, purge.stderr).toBe(0);
    expect(JSON.parse(purge.stdout)).toMatchObject({ deleted: 1 });

    await a.advance(1_000);
    expect(await a.call("k")).toEqual({ result: 2, was_replay: false, durableClaims: 2 });
  });
});

describe("tieredStore over PostgreSQL's server clock", () => {
  it("never replays a cached record past its expiry by the server's clock when the caller's is an hour behind", async () => {
    const client = countingClient(pool);
    const table = freshTable();
    tables.push(table);
    // The caller's clock starts an hour behind the server's; the server's moves with it (no sleeping).
    const clock = fakeClock(Date.now() - HOUR);
    const start = clock.now();
    const durable = postgresStore({ client, table, clockOffsetMs: () => clock.now() - start });
    let runs = 0;
    const tool = idempotent(async () => ++runs, {
      name: "send",
      store: tieredStore({ store: durable, maxStalenessMs: 2 ** 31 - 1 }),
      clock,
      ttlMs: 2 * HOUR,
    });

    expect(await tool({}, { key: "k" })).toMatchObject({ result: 1, was_replay: false });
    const queries = client.count;
    await clock.advance(2 * HOUR - 60_000);
    expect(await tool({}, { key: "k" })).toMatchObject({ result: 1, was_replay: true });
    expect(client.count).toBe(queries);

    // Two hours on, the record has expired by the server's clock; by the caller's it has an hour to go.
    await clock.advance(60_000);
    expect(await tool({}, { key: "k" })).toMatchObject({ result: 2, was_replay: false });
  });
});
