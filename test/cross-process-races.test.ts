/**
 * Races across OS processes, on every store other processes can share (test/fixtures/stores.ts): callers
 * in several processes repeat the same actions at once, and each action runs exactly once.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { openStoreUrl, type StoreService, URL_STORES } from "./fixtures/stores.js";
import { jsonLines, startWorker, type WorkerProcess } from "./fixtures/worker-process.js";

const directories: string[] = [];
afterEach(() => {
  for (const directory of directories.splice(0)) rmSync(directory, { recursive: true, force: true });
});

/** A file the `call` workers append every execution to. */
function executionsFile(): string {
  const directory = mkdtempSync(join(tmpdir(), "idempotool-race-"));
  directories.push(directory);
  return join(directory, "executions.jsonl");
}

interface CallReport {
  pid: number;
  outcomes: string[];
}

interface ClaimReport {
  pid: number;
  won: { key: string; token: string }[];
  lost: number;
}

/**
 * Starts `processes` race workers (worker `i` on `urls[i % urls.length]`), releases them together once all
 * are ready, and returns what each printed.
 */
async function race<Report>(
  mode: "call" | "claim",
  urls: readonly string[],
  size: { processes: number; callers: number; keys: number },
  executions: string,
  now?: number,
): Promise<Report[]> {
  const workers: WorkerProcess[] = Array.from({ length: size.processes }, (_, i) =>
    startWorker("race-worker.ts", [
      mode,
      urls[i % urls.length]!,
      String(size.callers),
      String(size.keys),
      executions,
      ...(now === undefined ? [] : [String(now)]),
    ]),
  );
  try {
    await Promise.all(workers.map((w) => w.waitFor("ready")));
    // Every worker spins until the same instant, shortly after all of them have read the signal.
    const startAt = performance.timeOrigin + performance.now() + 100;
    for (const w of workers) w.child.stdin.end(`${startAt}\n`);
    const results = await Promise.all(workers.map((w) => w.exited));
    for (const result of results) expect(result.code, result.stderr).toBe(0);
    return results.map((r) => JSON.parse(r.stdout.trim().split("\n").at(-1)!) as Report);
  } finally {
    for (const w of workers)
      if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill("SIGKILL");
  }
}

/** How many callers got each outcome, for a failure's message. */
function tally(outcomes: readonly string[]): string {
  const counts = new Map<string, number>();
  for (const outcome of outcomes) counts.set(outcome, (counts.get(outcome) ?? 0) + 1);
  return JSON.stringify(Object.fromEntries(counts));
}

const allKeys = (keys: number) => Array.from({ length: keys }, (_, i) => `key-${i}`).sort();

for (const row of URL_STORES) {
  describe(`${row.name}: one store shared by OS processes`, () => {
    let service: StoreService;
    beforeAll(async () => {
      service = await row.start();
    }, 60_000);
    afterAll(() => service?.close());

    const { processes, callers, keys } = row.race;

    /** Each key claimed exactly once, and each winner's claim is the record the store keeps. */
    async function expectOneWinnerPerKey(url: string, reports: ClaimReport[], now: number): Promise<void> {
      expect(reports.reduce((sum, r) => sum + r.won.length + r.lost, 0)).toBe(processes * callers);
      const winners = reports.flatMap((r) => r.won);
      expect(winners.map((w) => w.key).sort()).toEqual(allKeys(keys));
      const store = await openStoreUrl(url);
      try {
        for (const { key, token } of winners) {
          const record = await store.get({ scope: "race", key }, now);
          expect(record, key).toMatchObject({ status: "in_progress", token, attempts: 1 });
          // Where the claim's `now` dates the record (elsewhere the server's clock does).
          if (row.judgesByRequestTime) expect(record?.createdAt, key).toBe(now);
        }
      } finally {
        await store.close();
      }
    }

    it(`${processes} processes × ${callers} concurrent callers on ${keys} shared keys run exactly ${keys} executions`, async () => {
      const urls = await service.fresh("race");
      const executions = executionsFile();
      const reports = await race<CallReport>("call", urls, row.race, executions);

      const outcomes = reports.flatMap((r) => r.outcomes);
      expect(outcomes).toHaveLength(processes * callers);
      const ran = jsonLines(executions);
      expect(ran, `outcomes: ${tally(outcomes)}`).toHaveLength(keys);
      expect(ran.map((e) => e.key).sort()).toEqual(allKeys(keys));
      expect(outcomes.filter((o) => o === "ran")).toHaveLength(keys);
      // Every other caller waited for the original outcome and got it.
      expect(outcomes.filter((o) => o !== "ran" && o !== "replay")).toEqual([]);

      const store = await openStoreUrl(urls[0]!);
      try {
        const { records } = await store.list({ limit: 1000 });
        expect(records).toHaveLength(keys);
        for (const record of records) expect(record).toMatchObject({ status: "completed", attempts: 1 });
      } finally {
        await store.close();
      }
    }, 240_000);

    it(`claims each of ${keys} keys exactly once when ${processes} processes race ${callers} claims each`, async () => {
      const urls = await service.fresh("claim");
      const now = Date.now();
      const reports = await race<ClaimReport>("claim", urls, row.race, executionsFile(), now);
      expect(new Set(reports.map((r) => r.pid)).size).toBe(processes);
      await expectOneWinnerPerKey(urls[0]!, reports, now);
    }, 240_000);

    // Only where a claim can be dated: a server's clock cannot be sent back to make a record expire.
    if (row.judgesByRequestTime) {
      it("replaces each expired record exactly once when processes race to claim it", async () => {
        const urls = await service.fresh("expired");
        const then = Date.now() - 10_000;
        const seed = await openStoreUrl(urls[0]!);
        try {
          for (const key of allKeys(keys)) {
            const claim = await seed.claim({
              scope: "race",
              key,
              tool: "race_tool",
              fingerprint: "0".repeat(64),
              token: `expired-${key}`,
              leaseMs: 1_000,
              ttlMs: 1_000,
              now: then,
            });
            expect(claim.claimed).toBe(true);
          }
        } finally {
          await seed.close();
        }

        // Past the lease, the record's expiry and any store's clock-skew margin.
        const now = then + 5_000;
        const reports = await race<ClaimReport>("claim", urls, row.race, executionsFile(), now);
        await expectOneWinnerPerKey(urls[0]!, reports, now);
      }, 240_000);
    }
  });
}
