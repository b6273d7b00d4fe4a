import type { ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { dynamoStore } from "../src/dynamodb/index.js";
import { type Effect, idempotent, isIdempotencyError } from "../src/index.js";
import { fakeClock } from "../src/testing/index.js";
import { type Dynalite, startDynalite } from "./fixtures/dynalite.js";
import { jsonLines, startWorker as startProcess, type WorkerProcess } from "./fixtures/worker-process.js";

let db: Dynalite;
beforeAll(async () => {
  db = await startDynalite();
});
afterAll(() => db?.close());

const dirs: string[] = [];
const children: ChildProcessWithoutNullStreams[] = [];
afterEach(() => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "idempotool-dynamo-"));
  dirs.push(dir);
  return dir;
}

function startWorker(script: string, args: string[]): WorkerProcess {
  const worker = startProcess(script, args);
  children.push(worker.child);
  return worker;
}

describe("crash: a worker SIGKILLed after its effect and before settling", () => {
  const leaseMs = 10_000;
  const marginMs = 2_000;

  async function crash(effect: Effect) {
    const table = await db.table("crash");
    const effects = join(tempDir(), "effects.jsonl");
    const result = await startWorker("dynamo-crash-worker.ts", [
      db.endpoint,
      table,
      effects,
      "sms-1",
      effect,
      String(leaseMs),
    ]).exited;
    expect(result.signal, result.stderr).toBe("SIGKILL");
    expect(jsonLines(effects)).toHaveLength(1);
    const store = dynamoStore({ client: db.client(), table, clockSkewMarginMs: marginMs });
    const dead = await store.get({ scope: "default", key: "sms-1" }, Date.now());
    expect(dead).toMatchObject({ status: "in_progress", attempts: 1 });
    return { store, effects, dead: dead! };
  }

  /** The next caller, whose clock has moved past the dead worker's lease and the margin (no sleeping). */
  function nextCaller(store: ReturnType<typeof dynamoStore>, effects: string, effect: Effect, at: number) {
    return idempotent(
      async (args: { to: string }, context) => {
        const line = JSON.stringify({ to: args.to, key: context.key, attempt: context.attempt });
        (await import("node:fs")).appendFileSync(effects, `${line}\n`);
        return "sent";
      },
      { name: "send_sms", store, effect, clock: fakeClock(at) },
    );
  }

  it("within the lease the record is in flight; past it, irreversible gets outcome_unknown", async () => {
    const { store, effects, dead } = await crash("irreversible");
    const patient = idempotent(async () => "sent", {
      name: "send_sms",
      store,
      effect: "irreversible",
      waitMs: 0,
    });
    const inFlight = await patient({ to: "+15550100" }, { key: "sms-1" }).catch((e: unknown) => e);
    expect(isIdempotencyError(inFlight, "idempotency_key_in_use")).toBe(true);

    const tool = nextCaller(store, effects, "irreversible", dead.leaseExpiresAt + marginMs);
    const error = await tool({ to: "+15550100" }, { key: "sms-1" }).catch((e: unknown) => e);
    expect(isIdempotencyError(error, "outcome_unknown")).toBe(true);
    expect(jsonLines(effects)).toHaveLength(1);
  });

  it("native-key takes over with the same key, and the dead worker's token is fenced off", async () => {
    const { store, effects, dead } = await crash("native-key");
    const at = dead.leaseExpiresAt + marginMs;
    const tool = nextCaller(store, effects, "native-key", at);
    expect(await tool({ to: "+15550100" }, { key: "sms-1" })).toMatchObject({
      result: "sent",
      was_replay: false,
    });
    expect(jsonLines(effects).map((e) => [e.key, e.attempt])).toEqual([
      ["sms-1", 1],
      ["sms-1", 2],
    ]);
    const settled = await store.get({ scope: "default", key: "sms-1" }, at);
    expect(settled).toMatchObject({ status: "completed", attempts: 2, result: '"sent"' });
    const late = { scope: "default", key: "sms-1", token: dead.token, now: at };
    expect(
      await store.settle({ ...late, status: "completed", result: '"late"', error: null, ttlMs: 1 }),
    ).toBeNull();
    expect(await store.renew({ ...late, leaseMs: 60_000, ttlMs: 86_400_000 })).toBe(false);
    expect(await store.release(late)).toBe(false);
    expect(await store.get({ scope: "default", key: "sms-1" }, at)).toEqual(settled);
  });
});
