import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { isIdempotencyError } from "../src/core/errors.js";
import { memoryStore } from "../src/core/memory-store.js";
import type { IdempotencyStore } from "../src/core/store.js";
import { checkpoint } from "../src/ops/index.js";
import { reconcileOnce } from "../src/reconcile/index.js";
import { sqliteStore } from "../src/sqlite/index.js";
import { type FakeClock, fakeClock } from "../src/testing/index.js";

describe("checkpoint (OP-8)", () => {
  it("runs the call once and hands the stored result to every repeat", async () => {
    const store = memoryStore();
    let sent = 0;
    const loop = async () => {
      await using cp = await checkpoint<{ sid: string }>(store, {
        tool: "send_sms",
        key: "k1",
        args: { to: "+1" },
      });
      if (cp.replay) return { result: cp.replay.result, replay: true };
      sent++;
      const result = { sid: "sms-1" };
      await cp.complete(result);
      return { result, replay: false };
    };
    expect(await loop()).toEqual({ result: { sid: "sms-1" }, replay: false });
    expect(await loop()).toEqual({ result: { sid: "sms-1" }, replay: true });
    expect(sent).toBe(1);
  });

  it("says the outcome was not recorded, not that nothing ran, when the store fails the settle", async () => {
    const inner = memoryStore();
    const down = new Error("connection reset");
    const store: IdempotencyStore = { ...inner, settle: () => Promise.reject(down) };
    const cp = await checkpoint(store, { tool: "t", key: "k1", args: {} });
    await expect(cp.complete({ sid: "SM1" })).rejects.toMatchObject({
      code: "store_unavailable",
      message:
        "The idempotency store failed during settle: connection reset. The outcome is not recorded: the record stays in progress until its lease passes.",
      cause: down,
    });
  });

  it("refuses the same key with other arguments", async () => {
    const store = memoryStore();
    const cp = await checkpoint(store, { tool: "t", key: "k1", args: { a: 1 } });
    await cp.complete("ok");
    await expect(checkpoint(store, { tool: "t", key: "k1", args: { a: 2 } })).rejects.toMatchObject({
      code: "idempotency_key_conflict",
    });
  });

  it("leaves the record in progress when disposed without settling, so a retry fails closed", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const options = { tool: "t", key: "k1", args: {}, clock, leaseMs: 1_000, waitMs: 0 };
    {
      await using _cp = await checkpoint(store, options);
      // An early exit: no complete, no release.
    }
    await expect(checkpoint(store, options)).rejects.toMatchObject({ code: "idempotency_key_in_use" });
    await clock.advance(1_001);
    await expect(checkpoint(store, options)).rejects.toMatchObject({ code: "outcome_unknown" });
  });

  it("waits for a live checkpoint and replays its result", async () => {
    const store = memoryStore();
    const first = await checkpoint(store, { tool: "t", key: "k1", args: {} });
    const second = checkpoint(store, { tool: "t", key: "k1", args: {}, waitMs: 2_000 });
    await new Promise((resolve) => setTimeout(resolve, 30));
    await first.complete({ n: 1 });
    expect((await second).replay?.result).toEqual({ n: 1 });
  });

  it("replays a definitive failure, and frees the key on release", async () => {
    const store = memoryStore();
    const failing = await checkpoint(store, { tool: "t", key: "k1", args: {} });
    await failing.fail(new Error("card declined"), { status: 402 });
    const error = await checkpoint(store, { tool: "t", key: "k1", args: {} }).catch((e: unknown) => e);
    expect(error).toMatchObject({ message: "card declined", was_replay: true, data: { status: 402 } });

    const released = await checkpoint(store, { tool: "t", key: "k2", args: {} });
    await released.release();
    expect((await checkpoint(store, { tool: "t", key: "k2", args: {} })).shouldRun).toBe(true);
  });

  it("reports an unknown outcome to every repeat", async () => {
    const store = memoryStore();
    const cp = await checkpoint(store, { tool: "t", key: "k1", args: {} });
    await cp.unknown(new Error("timeout after send"));
    const error = await checkpoint(store, { tool: "t", key: "k1", args: {} }).catch((e: unknown) => e);
    expect(isIdempotencyError(error, "outcome_unknown")).toBe(true);
  });

  describe("when the process is killed between claim and complete", () => {
    let dir = "";
    beforeEach(() => {
      dir = mkdtempSync(join(tmpdir(), "idempotool-op8-"));
    });
    afterEach(() => rmSync(dir, { recursive: true, force: true }));

    it("leaves evidence on disk, and a retry fails closed instead of running again", async () => {
      const file = join(dir, "loop.db");
      const ops = fileURLToPath(new URL("../src/ops/index.ts", import.meta.url));
      const sqlite = fileURLToPath(new URL("../src/sqlite/index.ts", import.meta.url));
      const child = spawn(
        process.execPath,
        [
          "--import",
          "tsx",
          "--input-type=module",
          "-e",
          `import { checkpoint } from ${JSON.stringify(ops)};
           import { sqliteStore } from ${JSON.stringify(sqlite)};
           const store = sqliteStore({ path: ${JSON.stringify(file)} });
           const cp = await checkpoint(store, { tool: "send_sms", key: "k1", args: { to: "+1" }, leaseMs: 60000 });
           process.stdout.write("claimed\\n");
           setInterval(() => {}, 1000); // the SMS is "being sent" when the kill lands`,
        ],
        { stdio: ["ignore", "pipe", "inherit"] },
      );
      const [line] = (await once(child.stdout, "data")) as [Buffer];
      expect(line.toString()).toBe("claimed\n");
      child.kill("SIGKILL");
      await once(child, "exit");

      const store = sqliteStore({ path: file });
      try {
        const record = await store.get({ scope: "default", key: "k1" }, Date.now());
        expect(record?.status).toBe("in_progress");
        await expect(
          checkpoint(store, { tool: "send_sms", key: "k1", args: { to: "+1" }, waitMs: 0 }),
        ).rejects.toMatchObject({ code: "idempotency_key_in_use" });
        const later = fakeClock(Date.now() + 61_000);
        await expect(
          checkpoint(store, { tool: "send_sms", key: "k1", args: { to: "+1" }, clock: later }),
        ).rejects.toMatchObject({ code: "outcome_unknown" });
      } finally {
        await store.close?.();
      }
    });
  });
});

describe("when a script ends without settling its checkpoint", () => {
  let dir = "";
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "idempotool-op8-exit-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("exits instead of renewing the claim forever, and leaves the record in progress", {
    timeout: 15_000,
  }, async () => {
    const file = join(dir, "loop.db");
    const ops = fileURLToPath(new URL("../src/ops/index.ts", import.meta.url));
    const sqlite = fileURLToPath(new URL("../src/sqlite/index.ts", import.meta.url));
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        "--input-type=module",
        "-e",
        `import { checkpoint } from ${JSON.stringify(ops)};
         import { sqliteStore } from ${JSON.stringify(sqlite)};
         const store = sqliteStore({ path: ${JSON.stringify(file)} });
         await checkpoint(store, { tool: "send_sms", key: "k1", args: { to: "+1" }, leaseMs: 3000 });`,
      ],
      { stdio: ["ignore", "ignore", "inherit"] },
    );
    // A child still renewing after 10 s would never exit: end it, and fail.
    const hung = setTimeout(() => child.kill("SIGKILL"), 10_000);
    const [code] = (await once(child, "exit")) as [number | null];
    clearTimeout(hung);
    expect(code).toBe(0);
    const store = sqliteStore({ path: file });
    try {
      expect((await store.get({ scope: "default", key: "k1" }, Date.now()))?.status).toBe("in_progress");
    } finally {
      await store.close?.();
    }
  });
});

describe("checkpoint results", () => {
  it("never runs again when the result was too large to keep, and says so", async () => {
    const store = memoryStore();
    const cp = await checkpoint(store, { tool: "t", key: "k1", args: {}, maxResultBytes: 10 });
    await cp.complete("x".repeat(100));
    await expect(
      checkpoint(store, { tool: "t", key: "k1", args: {}, maxResultBytes: 10 }),
    ).rejects.toMatchObject({
      code: "result_too_large",
    });
  });
});

describe("checkpoint lease", () => {
  const sms = (clock: FakeClock, extra: { waitMs?: number } = {}) => ({
    tool: "send_sms",
    key: "k1",
    args: { to: "+1" },
    clock,
    leaseMs: 1_000,
    ...extra,
  });

  /** A call that runs three times its lease is still live to every other worker and to the reconciler. */
  async function longCallStaysLive(store: IdempotencyStore): Promise<void> {
    const clock = fakeClock();
    const cp = await checkpoint<{ sid: string }>(store, sms(clock));
    await clock.advance(3_000);

    await expect(checkpoint(store, sms(clock, { waitMs: 0 }))).rejects.toMatchObject({
      code: "idempotency_key_in_use",
    });
    const verify = vi.fn(async () => ({ status: "not_executed" as const }));
    const summary = await reconcileOnce({ store, clock, tools: { send_sms: { verify } } });
    expect(summary.examined).toBe(0);
    expect(verify).not.toHaveBeenCalled();

    const waiter = checkpoint<{ sid: string }>(store, sms(clock, { waitMs: 10_000 }));
    await clock.advance(2_000);
    expect(cp.signal.aborted).toBe(false);
    await cp.complete({ sid: "sms-1" });
    await clock.advance(500);
    expect((await waiter).replay?.result).toEqual({ sid: "sms-1" });
    // Settled: nothing is left renewing.
    expect(clock.pending).toBe(0);
  }

  it("renews while the call runs, so a long call is neither stale to a second worker nor to the reconciler", async () => {
    await longCallStaysLive(memoryStore());
  });

  it("renews on a durable store too (SQLite)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "idempotool-op8-lease-"));
    const store = sqliteStore({ path: join(dir, "loop.db") });
    try {
      await longCallStaysLive(store);
    } finally {
      await store.close?.();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("aborts its signal and refuses its settle when the record was deleted and claimed by another worker", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const cp = await checkpoint<{ sid: string }>(store, sms(clock));
    await store.delete({ scope: "default", key: "k1" });
    const other = await checkpoint<{ sid: string }>(store, sms(clock));
    expect(cp.signal.aborted).toBe(false);

    await clock.advance(400); // the next renewal is refused
    expect(cp.signal.aborted).toBe(true);
    expect(isIdempotencyError(cp.signal.reason, "lease_lost")).toBe(true);
    await expect(cp.complete({ sid: "late" })).rejects.toMatchObject({ code: "lease_lost" });

    await other.complete({ sid: "sms-2" });
    expect((await checkpoint(store, sms(clock))).replay?.result).toEqual({ sid: "sms-2" });
  });

  it("aborts its signal and refuses its release when another worker took the record over", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const cp = await checkpoint(store, sms(clock));
    const held = await store.get({ scope: "default", key: "k1" }, clock.now());
    // Forced: a takeover judged past the lease, as a worker whose clock runs ahead would ask for it.
    const taken = await store.takeover({
      scope: "default",
      key: "k1",
      fromToken: held?.token ?? "",
      token: "other-worker",
      leaseMs: 60_000,
      ttlMs: 86_400_000,
      now: clock.now() + 2_000,
    });
    expect(taken?.token).toBe("other-worker");

    await clock.advance(400);
    expect(isIdempotencyError(cp.signal.reason, "lease_lost")).toBe(true);
    await expect(cp.release()).rejects.toMatchObject({ code: "lease_lost" });
    expect((await store.get({ scope: "default", key: "k1" }, clock.now()))?.token).toBe("other-worker");
  });

  it("refuses a claim answered a whole lease after it was sent, frees the key, and runs on the retry", async () => {
    const inner = memoryStore();
    const clock = fakeClock();
    let slow = true;
    const store: IdempotencyStore = {
      ...inner,
      claim: async (request) => {
        const answer = await inner.claim(request);
        if (slow) await clock.advance(1_000);
        slow = false;
        return answer;
      },
    };
    await expect(checkpoint(store, sms(clock))).rejects.toMatchObject({
      code: "store_unavailable",
      message: expect.stringContaining("its answer came 1000 ms after it was sent, past the 1000 ms lease"),
    });
    expect(await inner.get({ scope: "default", key: "k1" }, clock.now())).toBeUndefined();
    const retry = await checkpoint<{ sid: string }>(store, sms(clock));
    expect(retry.shouldRun).toBe(true);
    await retry.complete({ sid: "sms-1" });
  });

  it("counts its lease from the claim's sending: the first renewal is due a third of the lease after it", async () => {
    const inner = memoryStore();
    const clock = fakeClock();
    const renewedAt: number[] = [];
    const sentAt = clock.now();
    const store: IdempotencyStore = {
      ...inner,
      claim: async (request) => {
        const answer = await inner.claim(request);
        await clock.advance(300);
        return answer;
      },
      renew: (request) => {
        renewedAt.push(clock.now() - sentAt);
        return inner.renew(request);
      },
    };
    const cp = await checkpoint(store, sms(clock));
    await clock.advance(700);
    expect(renewedAt).toEqual([333, 666, 999]);
    await cp.release();
  });

  it("gives a replay a signal that never aborts", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    await (await checkpoint(store, sms(clock))).complete({ sid: "sms-1" });
    const replay = await checkpoint(store, sms(clock));
    await clock.advance(5_000);
    expect(replay.signal.aborted).toBe(false);
  });
});
