/**
 * A worker SIGKILLed mid-call, on every store other processes can share (test/fixtures/stores.ts): the
 * next caller never repeats an irreversible effect, takes over a native-key one with the same key, and
 * loses nothing the dead worker committed.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { IdempotencyRecord } from "../src/core/store.js";
import { type Effect, idempotent, isIdempotencyError } from "../src/index.js";
import { fakeClock } from "../src/testing/index.js";
import { type OpenedTestStore, openStoreUrl, type StoreService, URL_STORES } from "./fixtures/stores.js";
import { rejection, smsEffects, smsTool } from "./fixtures/tools.js";
import { startWorker } from "./fixtures/worker-process.js";

/** Long enough that "still within the lease" holds on a loaded machine; nobody sleeps through it. */
const leaseMs = 10_000;
/** DynamoDB's default clock-skew margin, the largest of any store: past the lease means past this too. */
const skewMarginMs = 2_000;
const id = { scope: "default", key: "sms-1" };

const directories: string[] = [];
const opened: OpenedTestStore[] = [];
afterEach(async () => {
  for (const store of opened.splice(0)) await store.close();
  for (const directory of directories.splice(0)) rmSync(directory, { recursive: true, force: true });
});

async function open(url: string): Promise<OpenedTestStore> {
  const store = await openStoreUrl(url);
  opened.push(store);
  return store;
}

for (const row of URL_STORES) {
  describe(`${row.name}: a worker SIGKILLed mid-call`, () => {
    let service: StoreService;
    beforeAll(async () => {
      service = await row.start();
    }, 60_000);
    afterAll(() => service?.close());

    /** A worker that runs the effect once and dies: in the middle of the call, or right after it. */
    async function crash(effect: Effect, when: "mid-call" | "after-settle" = "mid-call") {
      const urls = await service.fresh("crash");
      const url = urls[0]!;
      const directory = mkdtempSync(join(tmpdir(), "idempotool-crash-"));
      directories.push(directory);
      const effects = join(directory, "effects.jsonl");
      const result = await startWorker("crash-worker.ts", [
        url,
        effects,
        id.key,
        effect,
        String(leaseMs),
        when,
      ]).exited;
      expect(result.signal, result.stderr).toBe("SIGKILL");
      expect(smsEffects(effects)).toHaveLength(1);
      const store = await open(url);
      const dead = await store.get(id, Date.now());
      expect(dead).toBeDefined();
      // Where the row reaches the store through more than one client, the next caller uses another.
      return { url, nextUrl: urls.at(-1)!, effects, store, dead: dead! };
    }

    /**
     * The next caller, once the dead worker's lease has passed, without sleeping: by the caller's clock
     * where the request's time judges, else on a store whose server clock has moved on.
     */
    async function nextCaller(
      crashed: { nextUrl: string; effects: string; dead: IdempotencyRecord },
      effect: Effect,
      options: { verifyFromEffects?: boolean } = {},
    ) {
      const at = crashed.dead.leaseExpiresAt + skewMarginMs;
      if (row.judgesByRequestTime) {
        const store = await open(crashed.nextUrl);
        const tool = smsTool(store, crashed.effects, { effect, clock: fakeClock(at), ...options });
        return { store, tool, at };
      }
      const url = new URL(crashed.nextUrl);
      url.searchParams.set("clockOffsetMs", String(leaseMs + skewMarginMs));
      const store = await open(url.toString());
      return { store, tool: smsTool(store, crashed.effects, { effect, ...options }), at };
    }

    it("leaves its claim in progress with the lease it held, and a repeat within the lease is in flight", async () => {
      const { store, dead } = await crash("irreversible");
      expect(dead).toMatchObject({ status: "in_progress", attempts: 1, tool: "send_sms" });
      expect(dead.leaseExpiresAt - dead.createdAt).toBe(leaseMs);
      const patient = idempotent(async () => "sent", {
        name: "send_sms",
        store,
        effect: "irreversible",
        waitMs: 0,
      });
      const inFlight = await rejection(patient({ to: "+15550100" }, { key: id.key }));
      expect(isIdempotencyError(inFlight, "idempotency_key_in_use")).toBe(true);
    });

    it("gives the next caller outcome_unknown under irreversible, and does not run the tool again", async () => {
      const crashed = await crash("irreversible");
      const { tool } = await nextCaller(crashed, "irreversible");
      const error = await rejection(tool({ to: "+15550100" }, { key: id.key }));
      expect(isIdempotencyError(error, "outcome_unknown")).toBe(true);
      expect(smsEffects(crashed.effects)).toHaveLength(1);
    });

    it("lets the next caller take over with the same key under native-key, and fences off the dead token", async () => {
      const crashed = await crash("native-key");
      const { store, tool, at } = await nextCaller(crashed, "native-key");
      expect(await tool({ to: "+15550100" }, { key: id.key })).toMatchObject({
        result: "sent",
        was_replay: false,
      });
      // The downstream sees the same key on the second attempt, and dedupes it.
      expect(smsEffects(crashed.effects).map((e) => [e.key, e.attempt])).toEqual([
        ["sms-1", 1],
        ["sms-1", 2],
      ]);
      const settled = await store.get(id, at);
      expect(settled).toMatchObject({ status: "completed", attempts: 2, result: '"sent"' });
      const late = { ...id, token: crashed.dead.token, now: at };
      expect(
        await store.settle({ ...late, status: "completed", result: '"late"', error: null, ttlMs: 1 }),
      ).toBeNull();
      expect(await store.renew({ ...late, leaseMs: 60_000, ttlMs: 86_400_000 })).toBe(false);
      expect(await store.release(late)).toBe(false);
      expect(await store.get(id, at)).toEqual(settled);
    });

    it("lets verify resolve it: the effect is found, recorded and replayed, never repeated", async () => {
      const crashed = await crash("irreversible");
      const { tool } = await nextCaller(crashed, "irreversible", { verifyFromEffects: true });
      for (let repeat = 0; repeat < 2; repeat++) {
        expect(await tool({ to: "+15550100" }, { key: id.key })).toMatchObject({
          result: "sent",
          was_replay: true,
        });
      }
      expect(smsEffects(crashed.effects)).toHaveLength(1);
    });

    it("loses nothing it committed: a worker killed right after a call leaves a completed record", async () => {
      const crashed = await crash("irreversible", "after-settle");
      expect(crashed.dead).toMatchObject({ status: "completed", attempts: 1, result: '"sent"' });
      const { tool } = await nextCaller(crashed, "irreversible");
      expect(await tool({ to: "+15550100" }, { key: id.key })).toMatchObject({
        result: "sent",
        was_replay: true,
      });
      expect(smsEffects(crashed.effects)).toHaveLength(1);
    });
  });
}
