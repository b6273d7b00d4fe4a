/**
 * Crash proofs for the operation models that test/ops-*.test.ts prove only in-process or only on
 * PostgreSQL: each child process (test/fixtures/ops-crash-*.ts) is SIGKILLed at a chosen point, by
 * itself, so no timing is involved; the test then checks what it left and that a retry resolves it.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  contentBytes,
  contentKey,
  fileSystemTarget,
  postgresInsertOnce,
  sqliteDedupTableSql,
  sqliteInsertOnce,
  sqliteTransactionalOnce,
  writeContentOnce,
} from "../src/ops/index.js";
import { fakeClock } from "../src/testing/index.js";
import { dropTable, freshTable, testPool } from "./fixtures/pg-helpers.js";
import { type SqliteTestDatabase, type SqliteTestDriver, sqliteDrivers } from "./fixtures/sqlite-drivers.js";

interface Crash {
  readonly stdout: string;
  readonly signal: NodeJS.Signals | null;
}

/** Runs a fixture to its end (it kills itself) and returns what it printed and the signal it died of. */
async function runToCrash(fixture: string, args: readonly string[]): Promise<Crash> {
  const path = fileURLToPath(new URL(`./fixtures/${fixture}`, import.meta.url));
  const child = spawn(process.execPath, ["--import", "tsx", path, ...args], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let stdout = "";
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (chunk: string) => {
    stdout += chunk;
  });
  const [, signal] = (await once(child, "close")) as [number | null, NodeJS.Signals | null];
  return { stdout, signal };
}

/** A writer stopped in the middle of its write, still alive: `resume()` lets it finish. */
async function startPausedWriter(directory: string, content: string) {
  const path = fileURLToPath(new URL("./fixtures/ops-crash-content.ts", import.meta.url));
  const child = spawn(process.execPath, ["--import", "tsx", path, directory, content, "pause"], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  let stdout = "";
  child.stdout.setEncoding("utf8");
  const halfway = new Promise<void>((resolve) => {
    child.stdout.on("data", (chunk: string) => {
      stdout += chunk;
      if (stdout.includes("half\n")) resolve();
    });
  });
  const closed = once(child, "close");
  await halfway;
  return {
    async resume() {
      child.stdin.write("go\n");
      const [code] = (await closed) as [number | null];
      return { code, stdout };
    },
  };
}

let dir = "";
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "idempotool-ops-crash-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

for (const driver of sqliteDrivers) opTwoCrashSpecs(driver);

function opTwoCrashSpecs(driver: SqliteTestDriver) {
  describe(`OP-2 on SQLite (${driver.name}), when the process is killed between the business write and the commit`, () => {
    it("leaves neither the business row nor the dedup row, and a retry completes once", async () => {
      const file = join(dir, "app.db");
      const setup = driver.open(file);
      setup.exec("PRAGMA journal_mode = WAL");
      setup.exec(sqliteDedupTableSql("dedup"));
      setup.exec("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)");
      setup.close();

      const crash = await runToCrash("ops-crash-transactional.ts", [file, "turn-7-order", driver.name]);
      expect(crash).toEqual({ stdout: "written\n", signal: "SIGKILL" });

      const db = driver.open(file, { timeoutMs: 10_000 });
      try {
        const count = (table: string) =>
          (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
        expect(count("orders")).toBe(0);
        expect(count("dedup")).toBe(0);

        let runs = 0;
        const write = (tx: SqliteTestDatabase) => {
          runs++;
          const inserted = tx.prepare("INSERT INTO orders (item) VALUES (?)").run("book") as unknown as {
            lastInsertRowid: number | bigint;
          };
          return { orderId: Number(inserted.lastInsertRowid) };
        };
        const options = { table: "dedup", tool: "place_order", key: "turn-7-order", args: { item: "book" } };
        const retry = await sqliteTransactionalOnce(db, options, write);
        const again = await sqliteTransactionalOnce(db, options, write);
        expect(retry.was_replay).toBe(false);
        expect(again).toMatchObject({ was_replay: true, result: retry.result });
        expect(runs).toBe(1);
        expect(count("orders")).toBe(1);
        expect(count("dedup")).toBe(1);
      } finally {
        db.close();
      }
    });
  });
}

describe("OP-3 on the file system, when the process is killed in the middle of a write", () => {
  it("leaves no partial file under the content key, and a retry creates it once", async () => {
    const content = "quarterly report\n".repeat(4096);
    const key = contentKey(content);
    const target = fileSystemTarget({ directory: dir });

    const crash = await runToCrash("ops-crash-content.ts", [dir, content]);
    expect(crash).toEqual({ stdout: "half\n", signal: "SIGKILL" });

    // The crash is real: half the bytes sit in a private temp file, and nothing is at the key's name.
    const shard = join(dir, key.slice(0, 2));
    const leftovers = readdirSync(shard);
    expect(leftovers).toHaveLength(1);
    expect(leftovers[0]).toMatch(/^\.tmp-/);
    expect(statSync(join(shard, leftovers[0]!)).size).toBe(Math.floor(contentBytes(content).length / 2));
    expect(existsSync(target.pathOf(key))).toBe(false);

    const retry = await writeContentOnce(target, content);
    const again = await writeContentOnce(target, content);
    expect(retry).toEqual({ key, created: true });
    expect(again).toEqual({ key, created: false });
    expect(readFileSync(target.pathOf(key), "utf8")).toBe(content);
    expect(readdirSync(shard).filter((name) => !name.startsWith("."))).toEqual([key]);
  });
});

describe("OP-3 on the file system, the temp file a killed write left behind", () => {
  const content = "quarterly report\n".repeat(4096);
  const key = contentKey(content);
  const shard = () => join(dir, key.slice(0, 2));
  const temps = () => readdirSync(shard()).filter((name) => name.startsWith(".tmp-"));

  it("is removed by a later write into its directory once it is older than orphanAfterMs", async () => {
    const crash = await runToCrash("ops-crash-content.ts", [dir, content]);
    expect(crash).toEqual({ stdout: "half\n", signal: "SIGKILL" });
    const [orphan] = temps();
    expect(orphan).toBeDefined();

    const clock = fakeClock(Date.now());
    const target = fileSystemTarget({ directory: dir, clock, orphanAfterMs: 60 * 60 * 1000 });
    // Just written to: for all anyone can tell, its writer is still at work.
    expect(await writeContentOnce(target, content)).toEqual({ key, created: true });
    expect(temps()).toEqual([orphan]);

    await clock.advance(60 * 60 * 1000 + 1);
    expect(await writeContentOnce(target, content)).toEqual({ key, created: false });
    expect(readdirSync(shard())).toEqual([key]);
    expect(readFileSync(target.pathOf(key), "utf8")).toBe(content);
  });

  it("is removed by the next write and by sweep(), but a temp file still being written is not", async () => {
    const crash = await runToCrash("ops-crash-content.ts", [dir, content]);
    expect(crash.signal).toBe("SIGKILL");
    const [orphan] = temps();
    // The crash was two hours ago.
    const twoHoursAgo = new Date(Date.now() - 2 * 60 * 60 * 1000);
    utimesSync(join(shard(), orphan!), twoHoursAgo, twoHoursAgo);

    // A second writer of the same content, halfway through its temp file and alive.
    const writer = await startPausedWriter(dir, content);
    const [live] = temps().filter((name) => name !== orphan);
    expect(live).toBeDefined();

    const target = fileSystemTarget({ directory: dir });
    expect(await writeContentOnce(target, content)).toEqual({ key, created: true });
    expect(temps()).toEqual([live]);
    expect(await target.sweep()).toBe(0);
    expect(temps()).toEqual([live]);

    // The live writer finishes: the object was there first, and its own temp file goes.
    const finished = await writer.resume();
    expect(finished.code).toBe(0);
    expect(JSON.parse(finished.stdout.split("\n")[1]!)).toEqual({ key, created: false });
    expect(readdirSync(shard())).toEqual([key]);
    expect(readFileSync(target.pathOf(key), "utf8")).toBe(content);
  });

  it("is removed everywhere by sweep() once old enough, objects untouched", async () => {
    const other = "another report\n".repeat(1024);
    for (const text of [content, other]) {
      expect((await runToCrash("ops-crash-content.ts", [dir, text])).signal).toBe("SIGKILL");
    }
    const clock = fakeClock(Date.now());
    const target = fileSystemTarget({ directory: dir, clock, orphanAfterMs: 10 * 60 * 1000 });
    await writeContentOnce(target, "a stored object");
    expect(await target.sweep()).toBe(0);
    await clock.advance(10 * 60 * 1000 + 1);
    expect(await target.sweep()).toBe(2);
    const left = readdirSync(dir).flatMap((name) => readdirSync(join(dir, name)));
    expect(left).toEqual([contentKey("a stored object")]);
    expect(readFileSync(target.pathOf(contentKey("a stored object")), "utf8")).toBe("a stored object");
  });
});

describe("OP-4, when the process is killed right after the insert committed", () => {
  interface Order {
    id: number;
    idempotency_key: string;
    item: string;
  }
  const request = (table: string) => ({
    table,
    values: { idempotency_key: "turn-7-order", item: "book" },
    conflict: ["idempotency_key"],
  });

  it.each(sqliteDrivers)(
    "on SQLite ($name), a repeat returns inserted: false with the row, never a second row",
    async (driver) => {
      const file = join(dir, "app.db");
      const setup = driver.open(file);
      setup.exec("PRAGMA journal_mode = WAL");
      setup.exec(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, idempotency_key TEXT UNIQUE NOT NULL, item TEXT)",
      );
      setup.close();

      const crash = await runToCrash("ops-crash-insert-once.ts", [
        "sqlite",
        file,
        "turn-7-order",
        driver.name,
      ]);
      expect(crash.signal).toBe("SIGKILL");
      const first = JSON.parse(crash.stdout) as { inserted: boolean; row: Order };
      expect(first).toMatchObject({ inserted: true, row: { idempotency_key: "turn-7-order", item: "book" } });

      const db = driver.open(file, { timeoutMs: 10_000 });
      try {
        const repeat = sqliteInsertOnce<Order>(db, request("orders"));
        expect(repeat).toEqual({ inserted: false, row: first.row });
        expect(db.prepare("SELECT count(*) AS n FROM orders").get()).toEqual({ n: 1 });
      } finally {
        db.close();
      }
    },
  );

  describe("on PostgreSQL", () => {
    const pool = testPool({ max: 2 });
    let table = "";
    beforeEach(async () => {
      table = freshTable();
      await pool.query(
        `CREATE TABLE "${table}" (id serial PRIMARY KEY, idempotency_key text UNIQUE NOT NULL, item text)`,
      );
    });
    afterEach(async () => dropTable(pool, table));
    afterAll(async () => pool.end());

    it("a repeat returns inserted: false with the row, never a second row", async () => {
      const crash = await runToCrash("ops-crash-insert-once.ts", ["postgres", table, "turn-7-order"]);
      expect(crash.signal).toBe("SIGKILL");
      const first = JSON.parse(crash.stdout) as { inserted: boolean; row: Order };
      expect(first).toMatchObject({ inserted: true, row: { idempotency_key: "turn-7-order", item: "book" } });

      const repeat = await postgresInsertOnce<Order>(pool, request(table));
      expect(repeat).toEqual({ inserted: false, row: first.row });
      const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "${table}"`);
      expect(rows).toEqual([{ n: 1 }]);
    });
  });
});
