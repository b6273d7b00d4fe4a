// How the Redis store's scripts reach Redis: written together when many callers start them in one tick
// (the connection corked, or a pipeline on a client without one), and each under its own deadline.
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import type { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { type RedisLike, redisStore } from "../src/redis/index.js";
import { claimRequest } from "./fixtures/claim-request.js";
import { testClient } from "./fixtures/redis-helpers.js";
import { redisTestFile } from "./fixtures/redis-test-file.js";

const { client, fresh } = redisTestFile("commands");

/**
 * The real client, counting the pipelines the store opens and the scripts it sends alone by SHA1; with
 * `withoutStream`, it shows no connection to cork, as a client other than ioredis's may not.
 */
function countingPipelines(inner: Redis, withoutStream = false) {
  const counts = { pipelines: 0, alone: 0 };
  const counted = new Proxy(inner, {
    get(target, property, receiver) {
      if (withoutStream && property === "stream") return undefined;
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      if (property === "pipeline") {
        return () => {
          counts.pipelines++;
          return Reflect.apply(value, target, []);
        };
      }
      if (property === "evalsha") {
        return (...args: unknown[]) => {
          counts.alone++;
          return Reflect.apply(value, target, args);
        };
      }
      // Run on the client itself, which has its connection even when the proxy shows none.
      return value.bind(target);
    },
  });
  return { client: counted, counts };
}

/** Counts how often the client's connection is corked and how many writes reach its socket. */
function countingWrites(inner: Redis) {
  const stream = inner.stream as Redis["stream"] & {
    _write: (...args: unknown[]) => void;
    _writev: (...args: unknown[]) => void;
  };
  const counts = { corks: 0, writes: 0 };
  const own = { cork: stream.cork, _write: stream._write, _writev: stream._writev };
  stream.cork = function (this: typeof stream) {
    counts.corks++;
    return own.cork.call(this);
  };
  stream._write = function (this: typeof stream, ...args: unknown[]) {
    counts.writes++;
    return own._write.apply(this, args);
  };
  stream._writev = function (this: typeof stream, ...args: unknown[]) {
    counts.writes++;
    return own._writev.apply(this, args);
  };
  const restore = () => {
    stream.cork = own.cork;
    stream._write = own._write;
    stream._writev = own._writev;
  };
  return { counts, restore, stream };
}

/** 32 claims, replays and settles started in one tick each; every caller gets its own answer. */
async function thirtyTwo(store: ReturnType<typeof redisStore>, before?: () => void) {
  // Each script goes whole (EVAL) the first time, alone, and by its SHA1 from then on.
  await store.claim(claimRequest({ key: "warm-up" }));
  await store.settle({ ...claimRequest({ key: "warm-up" }), status: "completed", result: null, error: null });
  before?.();
  const keys = Array.from({ length: 32 }, (_, i) => `k${i}`);
  const claims = await Promise.all(keys.map((key) => store.claim(claimRequest({ key, token: `t-${key}` }))));
  expect(claims.every((c) => c.claimed)).toBe(true);
  const replays = await Promise.all(keys.map((key) => store.claim(claimRequest({ key, token: "late" }))));
  expect(replays.map((r) => [r.claimed, r.record.key, r.record.token])).toEqual(
    keys.map((key) => [false, key, `t-${key}`]),
  );
  const settled = await Promise.all(
    keys.map((key) =>
      store.settle({
        ...claimRequest({ key }),
        token: `t-${key}`,
        status: "completed",
        result: key,
        error: null,
      }),
    ),
  );
  expect(settled.map((r) => r?.result)).toEqual(keys);
}

describe("redisStore writes the scripts started in one tick together", () => {
  it("sends the first at once and corks the connection for the rest of the tick, uncorking every 16", async () => {
    const prefix = await fresh();
    const spy = countingPipelines(client);
    const writes = countingWrites(client);
    try {
      // The request clock: every claim a script, as on Redis before 7.0.
      const store = redisStore({ client: spy.client, prefix, clock: "request" });
      await thirtyTwo(store, () => {
        spy.counts.alone = 0;
        writes.counts.corks = 0;
        writes.counts.writes = 0;
      });
      // Each of the three rounds: every script its own command, the socket written 3 times (the first
      // alone, then 16 and 15 together), never a pipeline; the connection left uncorked.
      expect(spy.counts).toEqual({ pipelines: 0, alone: 96 });
      expect(writes.counts.corks).toBe(6);
      expect(writes.counts.writes).toBeLessThanOrEqual(9);
      expect(writes.stream.writableCorked).toBe(0);
    } finally {
      writes.restore();
    }
  });

  it("writes the plain claims of one tick together too, each its own SET with its own answer", async () => {
    const prefix = await fresh();
    const writes = countingWrites(client);
    try {
      // The server clock: claims are plain SET NX GET commands, settles scripts.
      const store = redisStore({ client, prefix });
      await store.claim(claimRequest({ key: "warm-up" }));
      writes.counts.corks = 0;
      writes.counts.writes = 0;
      const keys = Array.from({ length: 32 }, (_, i) => `k${i}`);
      const claims = await Promise.all(
        keys.map((key) => store.claim(claimRequest({ key, token: `t-${key}` }))),
      );
      expect(claims.every((c) => c.claimed)).toBe(true);
      // The first alone, then 16 and 15 together, never more writes than that.
      expect(writes.counts.corks).toBe(2);
      expect(writes.counts.writes).toBeLessThanOrEqual(3);
      expect(writes.stream.writableCorked).toBe(0);
      const again = await Promise.all(keys.map((key) => store.claim(claimRequest({ key, token: "late" }))));
      expect(again.map((c) => [c.claimed, c.record.token])).toEqual(keys.map((key) => [false, `t-${key}`]));
    } finally {
      writes.restore();
    }
  });

  it("on a client without a connection to cork, sends the first alone and the rest in pipelines of 16", async () => {
    const prefix = await fresh();
    const spy = countingPipelines(client, true);
    const store = redisStore({ client: spy.client, prefix, clock: "request" });
    await thirtyTwo(store, () => {
      spy.counts.alone = 0;
    });
    expect(spy.counts).toEqual({ pipelines: 6, alone: 3 });
  });

  it.each([
    ["corked", false],
    ["pipelined", true],
  ])("recovers every %s script from a flushed script cache", async (_, withoutStream) => {
    const prefix = await fresh();
    const store = redisStore({
      client: countingPipelines(client, withoutStream).client,
      prefix,
      clock: "request",
    });
    await store.claim(claimRequest({ key: "warm-up" }));
    await client.script("FLUSH");
    const claims = await Promise.all(
      Array.from({ length: 20 }, (_, i) => store.claim(claimRequest({ key: `k${i}`, token: `t${i}` }))),
    );
    expect(claims.map((c) => c.claimed)).toEqual(Array(20).fill(true));
  });

  it("fails each command of a pipeline that fails or cannot be made, and each command an error answers", async () => {
    // Mock only to inject the failures.
    let broken = false;
    let exec: () => Promise<[Error | null, unknown][] | null> = () =>
      Promise.reject(new Error("connection lost"));
    const failing: RedisLike = {
      evalsha: () => Promise.resolve(Date.now()),
      eval: () => Promise.resolve(Date.now()),
      scan: () => Promise.resolve(["0", []]),
      pipeline: () => {
        if (broken) throw new Error("no pipeline today");
        return { evalsha: () => undefined, exec: () => exec() };
      },
    };
    const store = redisStore({ client: failing });
    await store.claim(claimRequest());
    const three = () => Promise.allSettled([0, 1, 2].map((i) => store.claim(claimRequest({ key: `k${i}` }))));
    expect((await three()).map((r) => r.status)).toEqual(["fulfilled", "rejected", "rejected"]);
    exec = () =>
      Promise.resolve([
        [new Error("ERR boom"), null],
        [null, Date.now()],
      ]);
    const answers = await three();
    expect(answers.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect((answers[1] as PromiseRejectedResult).reason).toMatchObject({ message: "ERR boom" });
    broken = true;
    expect((await three()).map((r) => r.status)).toEqual(["fulfilled", "rejected", "rejected"]);
  });

  it("does not pipeline on a client that pipelines by itself", async () => {
    const prefix = await fresh();
    const auto = testClient();
    (auto.options as { enableAutoPipelining?: boolean }).enableAutoPipelining = true;
    try {
      const spy = countingPipelines(auto);
      const store = redisStore({ client: spy.client, prefix, clock: "request" });
      await store.claim(claimRequest({ key: "warm-up" }));
      spy.counts.alone = 0;
      await Promise.all(Array.from({ length: 8 }, (_, i) => store.claim(claimRequest({ key: `k${i}` }))));
      expect(spy.counts.alone).toBe(8);
    } finally {
      auto.disconnect();
    }
  });
});

describe("redisStore command deadlines", () => {
  it("rejects each command in flight at its own deadline, and leaves the answered ones alone", async () => {
    // Mock only to inject the failure: a client that answers only the key named "answered", after 20 ms.
    const slow: RedisLike = {
      evalsha: () => new Promise(() => {}),
      eval: (_lua, _numkeys, name) =>
        String(name).endsWith(":answered")
          ? new Promise((resolve) => setTimeout(() => resolve(Date.now()), 20))
          : new Promise(() => {}),
      scan: () => new Promise(() => {}),
    };
    const store = redisStore({ client: slow, commandTimeoutMs: 100 });
    const started = performance.now();
    const settledAt = (promise: Promise<unknown>) =>
      promise.then(
        () => ["answered", performance.now() - started] as const,
        (error: Error) => [error.name, performance.now() - started] as const,
      );
    const first = settledAt(store.claim(claimRequest({ key: "first" })));
    const answered = settledAt(store.claim(claimRequest({ key: "answered" })));
    await new Promise((resolve) => setTimeout(resolve, 50));
    const second = settledAt(store.claim(claimRequest({ key: "second" })));

    const [a, b, c] = await Promise.all([first, answered, second]);
    expect(b[0]).toBe("answered");
    expect(a[0]).toBe("TimeoutError");
    expect(a[1]).toBeGreaterThanOrEqual(99);
    expect(a[1]).toBeLessThan(140);
    expect(c[0]).toBe("TimeoutError");
    expect(c[1]).toBeGreaterThanOrEqual(149);
    expect(c[1]).toBeLessThan(250);
  });

  it("does not keep the process alive once nothing is in flight", async () => {
    const store = fileURLToPath(new URL("../src/redis/index.ts", import.meta.url));
    const script = `
      const { redisStore } = await import(${JSON.stringify(store)});
      const client = { evalsha: async () => 1, eval: async () => 1, scan: async () => ["0", []] };
      const s = redisStore({ client, commandTimeoutMs: 60_000 });
      console.log(await s.renew({ scope: "s", key: "k", token: "t", leaseMs: 1, now: 0 }));
    `;
    const started = performance.now();
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "-e", script],
      { timeout: 30_000 },
    );
    expect(stdout.trim()).toBe("true");
    expect(performance.now() - started).toBeLessThan(20_000);
  });
});
