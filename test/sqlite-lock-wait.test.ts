import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { isIdempotencyError, systemClock } from "../src/index.js";
import { sqliteStore } from "../src/sqlite/index.js";
import { type SqliteTestDriver, storeSqliteDrivers } from "./fixtures/sqlite-drivers.js";
import { emailTool } from "./fixtures/tools.js";
import { startWorker, type WorkerProcess } from "./fixtures/worker-process.js";

const holdMs = 1_500;
const tickMs = 10;

const directories: string[] = [];
const holders: WorkerProcess[] = [];
afterEach(async () => {
  for (const holder of holders.splice(0)) {
    if (holder.child.exitCode === null) holder.child.kill();
    await holder.exited;
  }
  for (const directory of directories.splice(0)) fs.rmSync(directory, { recursive: true, force: true });
});

function tempFile(): string {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "idempotool-lock-"));
  directories.push(directory);
  return path.join(directory, "records.db");
}

/** Another OS process takes the file's write lock and keeps it for `ms`; resolves once it holds it. */
async function holdWriteLock(file: string, driver: SqliteTestDriver, ms: number): Promise<WorkerProcess> {
  const holder = startWorker("sqlite-lock-holder.ts", [file, driver.name, String(ms)]);
  holders.push(holder);
  await holder.waitFor("locked");
  return holder;
}

/** Runs `work` while a timer ticks every `tickMs`: how long it took and how often the timer fired meanwhile. */
async function ticking<T>(work: () => Promise<T>) {
  let ticks = 0;
  const timer = setInterval(() => ticks++, tickMs);
  const started = performance.now();
  try {
    const [outcome] = await Promise.allSettled([work()]);
    return { outcome: outcome!, elapsedMs: performance.now() - started, ticks };
  } finally {
    clearInterval(timer);
  }
}

for (const driver of storeSqliteDrivers) {
  describe(`sqliteStore while another process holds the write lock (${driver.name})`, () => {
    it("keeps the event loop running while a claim waits, then claims and runs the tool once", async () => {
      const file = tempFile();
      const store = sqliteStore({ path: file, driver: driver.name });
      store.migrate();
      const { send: tool, sent } = emailTool({ store, clock: systemClock });
      const holder = await holdWriteLock(file, driver, holdMs);

      const waited = await ticking(() => tool({ to: "alice@example.com" }, { key: "order-1" }));

      expect(waited.outcome).toMatchObject({
        value: { result: { messageId: "m-1" }, was_replay: false },
      });
      expect(sent).toEqual([{ to: "alice@example.com" }]);
      // The claim could only land once the other process committed.
      expect(waited.elapsedMs).toBeGreaterThan(holdMs / 2);
      expect(waited.ticks).toBeGreaterThanOrEqual(waited.elapsedMs / tickMs / 2);
      expect((await holder.exited).code).toBe(0);
      await store.close();
    });

    it("fails closed with store_unavailable after busyTimeoutMs, without running the tool or freezing", async () => {
      const file = tempFile();
      const store = sqliteStore({ path: file, driver: driver.name, busyTimeoutMs: 300 });
      store.migrate();
      const { send: tool, sent } = emailTool({ store, clock: systemClock });
      await holdWriteLock(file, driver, holdMs);

      const waited = await ticking(() => tool({ to: "alice@example.com" }, { key: "order-1" }));

      const error = waited.outcome.status === "rejected" ? waited.outcome.reason : waited.outcome.value;
      expect(isIdempotencyError(error, "store_unavailable"), String(error)).toBe(true);
      expect(sent).toEqual([]);
      expect(waited.elapsedMs).toBeGreaterThanOrEqual(300);
      expect(waited.elapsedMs).toBeLessThan(holdMs);
      expect(waited.ticks).toBeGreaterThanOrEqual(waited.elapsedMs / tickMs / 2);
      await store.close();
    });
  });
}
