import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Clock } from "../src/core/clock.js";
import { isIdempotencyError } from "../src/core/errors.js";
import { memoryStore } from "../src/core/memory-store.js";
import { checkpoint } from "../src/ops/index.js";
import { sqliteStore } from "../src/sqlite/index.js";

function fakeClock(start = 1_700_000_000_000): Clock & { advance(ms: number): void } {
  let now = start;
  return {
    now: () => now,
    sleep: async (ms) => {
      now += ms;
    },
    advance: (ms) => {
      now += ms;
    },
  };
}

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
    clock.advance(1_001);
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
