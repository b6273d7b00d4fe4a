import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type Effect, idempotent, isIdempotencyError, memoryStore } from "../src/index.js";
import { sqliteStore } from "../src/sqlite/index.js";
import { fakeClock } from "../src/testing/index.js";
import { jsonLines, startWorker } from "./fixtures/worker-process.js";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "idempotool-xproc-"));
  dirs.push(dir);
  return dir;
}

describe("crash: a worker SIGKILLed after its effect and before settling", () => {
  async function crash(effect: Effect) {
    const dir = tempDir();
    const db = join(dir, "crash.db");
    const effects = join(dir, "effects.jsonl");
    const result = await startWorker("crash-worker.ts", [db, effects, "sms-1", effect]).exited;
    expect(result.signal).toBe("SIGKILL");
    expect(jsonLines(effects)).toHaveLength(1);
    // The next caller's clock is past the dead worker's lease (60 s).
    const clock = fakeClock(Date.now() + 61_000);
    return { db, effects, clock };
  }

  function sms(
    db: string,
    effects: string,
    clock: ReturnType<typeof fakeClock>,
    effect: Effect,
    verify = false,
  ) {
    const store = sqliteStore({ path: db });
    const tool = idempotent(
      async (args: { to: string }, context) => {
        const line = JSON.stringify({ to: args.to, key: context.key, attempt: context.attempt });
        (await import("node:fs")).appendFileSync(effects, `${line}\n`);
        return "sent";
      },
      {
        name: "send_sms",
        store,
        clock,
        effect,
        ...(verify
          ? {
              verify: (record) =>
                jsonLines(effects).some((e) => e.key === record.key)
                  ? { status: "completed" as const, result: "sent" }
                  : { status: "not_executed" as const },
            }
          : {}),
      },
    );
    return { tool, store };
  }

  it("leaves the record in progress, and the next caller gets outcome_unknown under irreversible", async () => {
    const { db, effects, clock } = await crash("irreversible");
    const { tool, store } = sms(db, effects, clock, "irreversible");
    const error = await tool({ to: "+15550100" }, { key: "sms-1" }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isIdempotencyError(error, "outcome_unknown")).toBe(true);
    expect(jsonLines(effects)).toHaveLength(1);
    await store.close();
  });

  it("takes over with the same key under native-key", async () => {
    const { db, effects, clock } = await crash("native-key");
    const { tool, store } = sms(db, effects, clock, "native-key");
    expect(await tool({ to: "+15550100" }, { key: "sms-1" })).toMatchObject({
      result: "sent",
      was_replay: false,
    });
    // The downstream sees the same key on the second attempt, and dedupes it.
    expect(jsonLines(effects).map((e) => [e.key, e.attempt])).toEqual([
      ["sms-1", 1],
      ["sms-1", 2],
    ]);
    await store.close();
  });

  it("lets verify resolve it: the effect is found, recorded and replayed, never repeated", async () => {
    const { db, effects, clock } = await crash("irreversible");
    const { tool, store } = sms(db, effects, clock, "irreversible", true);
    expect(await tool({ to: "+15550100" }, { key: "sms-1" })).toMatchObject({
      result: "sent",
      was_replay: true,
    });
    expect(await tool({ to: "+15550100" }, { key: "sms-1" })).toMatchObject({
      result: "sent",
      was_replay: true,
    });
    expect(jsonLines(effects)).toHaveLength(1);
    await store.close();
  });
});

describe("the demo store stays usable in process too", () => {
  it("memory and SQLite give the same envelope", async () => {
    const dir = tempDir();
    const clock = fakeClock();
    const a = idempotent(async () => 1, { name: "t", store: memoryStore(), clock });
    const sqlite = sqliteStore({ path: join(dir, "same.db") });
    const b = idempotent(async () => 1, { name: "t", store: sqlite, clock });
    expect(await a({}, { key: "k" })).toEqual(await b({}, { key: "k" }));
    expect(await a({}, { key: "k" })).toEqual(await b({}, { key: "k" }));
    await sqlite.close();
  });
});
