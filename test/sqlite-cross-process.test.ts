import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { sqliteStore } from "../src/sqlite/index.js";
import { type SqliteTestDriver, sqliteDrivers } from "./fixtures/sqlite-drivers.js";
import { startWorker, type WorkerProcess } from "./fixtures/worker-process.js";

const PROCESSES = 4;
const CLAIMS_PER_PROCESS = 50;
const KEYS = 20;

interface WorkerReport {
  pid: number;
  won: { key: string; token: string }[];
  lost: number;
}

interface Worker extends WorkerProcess {
  report: Promise<WorkerReport>;
}

function startClaimWorker(file: string, driver: SqliteTestDriver, now: number): Worker {
  const worker = startWorker("sqlite-claim-worker.ts", [
    file,
    driver.name,
    String(CLAIMS_PER_PROCESS),
    String(KEYS),
    String(now),
  ]);
  const report = worker.exited.then(({ code, stdout, stderr }) => {
    const lines = stdout.trim().split("\n");
    if (code !== 0 || lines[0] !== "ready" || lines.length !== 2) {
      throw new Error(`worker exited with ${code}\nstdout: ${stdout}\nstderr: ${stderr}`);
    }
    return JSON.parse(lines[1]!) as WorkerReport;
  });
  // Observed here too: when a worker fails before it is ready, the test fails on that and never awaits this.
  report.catch(() => {});
  return { ...worker, report };
}

/**
 * Starts the workers, releases them at once, and collects every claim each one won. With more than one
 * driver, the workers take turns, so processes on different drivers race on one file.
 */
async function race(
  file: string,
  drivers: readonly SqliteTestDriver[],
  now: number,
): Promise<WorkerReport[]> {
  const workers = Array.from({ length: PROCESSES }, (_, i) =>
    startClaimWorker(file, drivers[i % drivers.length]!, now),
  );
  try {
    await Promise.all(workers.map((w) => w.waitFor("ready")));
    // Every worker spins until the same instant, shortly after all of them have read the signal.
    const startAt = performance.timeOrigin + performance.now() + 100;
    for (const w of workers) w.child.stdin.end(`${startAt}\n`);
    return await Promise.all(workers.map((w) => w.report));
  } finally {
    for (const w of workers) if (w.child.exitCode === null) w.child.kill();
  }
}

const directories: string[] = [];
afterEach(() => {
  for (const directory of directories.splice(0)) fs.rmSync(directory, { recursive: true, force: true });
});

function tempFile(): string {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "idempotool-xproc-"));
  directories.push(directory);
  return path.join(directory, "race.db");
}

async function expectOneWinnerPerKey(file: string, reports: WorkerReport[], now: number): Promise<void> {
  expect(reports.reduce((sum, r) => sum + r.won.length + r.lost, 0)).toBe(PROCESSES * CLAIMS_PER_PROCESS);
  const winners = reports.flatMap((r) => r.won);
  const keys = winners.map((w) => w.key).sort();
  expect(keys).toEqual(Array.from({ length: KEYS }, (_, i) => `key-${i}`).sort());

  const store = sqliteStore({ path: file });
  try {
    for (const { key, token } of winners) {
      const record = await store.get({ scope: "race", key }, now);
      expect(record, key).toMatchObject({ status: "in_progress", token, attempts: 1, createdAt: now });
    }
  } finally {
    await store.close();
  }
}

// Each driver on its own, and both together where this Node has both.
const driverSets =
  sqliteDrivers.length > 1 ? [...sqliteDrivers.map((d) => [d]), sqliteDrivers] : [sqliteDrivers];

for (const drivers of driverSets) {
  describe(`sqliteStore across processes (${drivers.map((d) => d.name).join(" + ")})`, () => {
    it(`claims each of ${KEYS} keys exactly once when ${PROCESSES} processes race ${CLAIMS_PER_PROCESS} claims each`, async () => {
      const file = tempFile();
      const now = Date.now();
      const reports = await race(file, drivers, now);
      expect(new Set(reports.map((r) => r.pid)).size).toBe(PROCESSES);
      await expectOneWinnerPerKey(file, reports, now);
    });

    it("replaces each expired record exactly once when processes race to claim it", async () => {
      const file = tempFile();
      const then = Date.now() - 10_000;
      const seed = sqliteStore({ path: file, driver: drivers[0]!.name });
      for (let i = 0; i < KEYS; i++) {
        const claim = await seed.claim({
          scope: "race",
          key: `key-${i}`,
          tool: "race_tool",
          fingerprint: "0".repeat(64),
          token: `expired-${i}`,
          leaseMs: 1_000,
          ttlMs: 1_000,
          now: then,
        });
        expect(claim.claimed).toBe(true);
      }
      await seed.close();

      const now = then + 5_000;
      const reports = await race(file, drivers, now);
      await expectOneWinnerPerKey(file, reports, now);
    });
  });
}
