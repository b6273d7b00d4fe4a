import type { ChildProcessWithoutNullStreams } from "node:child_process";
import { once } from "node:events";
import net from "node:net";
import type { Redis } from "ioredis";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { idempotent, isIdempotencyError, LeaseLostError } from "../src/index.js";
import { redisStore } from "../src/redis/index.js";
import { dropPrefix, freshPrefix, reachable, redisUrl, testClient } from "./fixtures/redis-helpers.js";
import { type RedisProxy, redisProxy } from "./fixtures/redis-proxy.js";
import { startWorker as startProcess, type WorkerProcess } from "./fixtures/worker-process.js";

const client = testClient();
const ready = reachable(client);
ready.catch(() => {});

const prefixes: string[] = [];
const children: ChildProcessWithoutNullStreams[] = [];
const clients: Redis[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGCONT");
      child.kill("SIGKILL");
    }
  }
  for (const extra of clients.splice(0)) extra.disconnect();
});
afterAll(async () => {
  await Promise.allSettled(prefixes.map((prefix) => dropPrefix(client, prefix)));
  client.disconnect();
});

async function fresh(label: string): Promise<{ prefix: string }> {
  await ready;
  const prefix = freshPrefix(label);
  prefixes.push(prefix);
  return { prefix };
}

/** A worker process, killed after the test if it is still running. */
function startWorker(script: string, args: string[]): WorkerProcess {
  const worker = startProcess(script, args);
  children.push(worker.child);
  return worker;
}

describe("pause: a worker SIGSTOPped past its lease", () => {
  // Long enough that "still within the lease" holds on a loaded machine; the next caller's store jumps
  // its server time past it with clockOffsetMs instead of sleeping.
  const leaseMs = 10_000;

  it("a worker paused (SIGSTOP) past its lease wakes up to LeaseLostError: its late settle is rejected", async () => {
    const { prefix } = await fresh("pause");
    const worker = startWorker("redis-pause-worker.ts", [prefix, "charge-1", String(leaseMs)]);
    await worker.waitFor("started");
    worker.child.kill("SIGSTOP");

    const runs: number[] = [];
    const taker = idempotent(
      async (_args: object, context) => {
        runs.push(context.attempt);
        return "taken";
      },
      {
        name: "charge",
        store: redisStore({ client, prefix, clockOffsetMs: leaseMs + 1_000 }),
        effect: "native-key",
      },
    );
    expect(await taker({}, { key: "charge-1" })).toMatchObject({ result: "taken", was_replay: false });
    expect(runs).toEqual([2]);

    worker.child.kill("SIGCONT");
    worker.child.stdin.end("finish\n");
    const result = await worker.exited;
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout.trim().split("\n").at(-1)).toBe(new LeaseLostError("charge-1").code);
    const record = await redisStore({ client, prefix }).get({ scope: "default", key: "charge-1" }, 0);
    expect(record).toMatchObject({ status: "completed", attempts: 2, result: '"taken"' });
  });
});

describe("outage: Redis unreachable", () => {
  /** A port nothing listens on. */
  async function closedPort(): Promise<number> {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as net.AddressInfo;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    return port;
  }

  function counted() {
    const runs: string[] = [];
    const fn = async (args: { id: string }) => {
      runs.push(args.id);
      return args.id;
    };
    return { runs, fn };
  }

  async function untilReady(redis: Redis): Promise<void> {
    if (redis.status !== "ready") await once(redis, "ready");
  }

  /** An outage client: ioredis would log every failed reconnect as an unhandled error event. */
  function outageClient(options: Parameters<typeof testClient>[0]): Redis {
    const redis = testClient(options);
    redis.on("error", () => {});
    clients.push(redis);
    return redis;
  }

  /** Cut every connection through the proxy, wait until the client has seen it, and let it reconnect. */
  async function restart(proxy: RedisProxy, redis: Redis): Promise<void> {
    const closed = once(redis, "close");
    await proxy.stop();
    await closed;
    await proxy.start();
    await untilReady(redis);
  }

  it("fails closed on a closed port, within commandTimeoutMs even with ioredis's default queueing", async () => {
    const { prefix } = await fresh("closed");
    const port = await closedPort();
    const { runs, fn } = counted();
    // Default offline queue and retries: only the store's own deadline bounds the wait.
    const queueing = outageClient({ port, maxRetriesPerRequest: 20, retryStrategy: () => 50 });
    const tool = idempotent(fn, {
      name: "create_ticket",
      store: redisStore({ client: queueing, prefix, commandTimeoutMs: 300 }),
    });
    const started = performance.now();
    const error = await tool({ id: "a" }, { key: "k-closed" }).catch((e: unknown) => e);
    expect(isIdempotencyError(error, "store_unavailable")).toBe(true);
    expect(String((error as Error).message)).toMatch(/claim/);
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(runs).toEqual([]);
  });

  it("a stopped server: the tool does not run and the caller gets store_unavailable; once it is back, calls proceed", async () => {
    const { prefix } = await fresh("stopped");
    const { hostname, port } = new URL(redisUrl);
    const proxy = await redisProxy({ host: hostname, port: Number(port || 6379) });
    const failFast = outageClient({
      port: proxy.port,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      retryStrategy: () => 50,
    });
    try {
      await untilReady(failFast);
      const { runs, fn } = counted();
      const tool = idempotent(fn, {
        name: "create_ticket",
        store: redisStore({ client: failFast, prefix, commandTimeoutMs: 2_000 }),
      });
      expect(await tool({ id: "before" }, { key: "k-before" })).toMatchObject({ was_replay: false });

      const closed = once(failFast, "close");
      await proxy.stop();
      await closed;
      for (const id of ["during-1", "during-2"]) {
        const error = await tool({ id }, { key: "k-during" }).catch((e: unknown) => e);
        expect(isIdempotencyError(error, "store_unavailable"), String(error)).toBe(true);
      }
      expect(runs).toEqual(["before"]);

      await proxy.start();
      await untilReady(failFast);
      expect(await tool({ id: "during-1" }, { key: "k-during" })).toMatchObject({ was_replay: false });
      expect(await tool({ id: "during-1" }, { key: "k-during" })).toMatchObject({ was_replay: true });
      expect(await tool({ id: "before" }, { key: "k-before" })).toMatchObject({ was_replay: true });
      expect(runs).toEqual(["before", "during-1"]);
    } finally {
      failFast.disconnect();
      await proxy.stop();
    }
  });

  it("a hang (connected, never answering) gives store_unavailable within commandTimeoutMs, not forever", async () => {
    const { prefix } = await fresh("hang");
    const { hostname, port } = new URL(redisUrl);
    const proxy = await redisProxy({ host: hostname, port: Number(port || 6379) });
    const hung = outageClient({ port: proxy.port, maxRetriesPerRequest: 0, retryStrategy: () => 50 });
    try {
      await untilReady(hung);
      const { runs, fn } = counted();
      const commandTimeoutMs = 500;
      const tool = idempotent(fn, {
        name: "create_ticket",
        store: redisStore({ client: hung, prefix, commandTimeoutMs }),
      });
      expect(await tool({ id: "before" }, { key: "k-before" })).toMatchObject({ was_replay: false });

      proxy.hang();
      const started = performance.now();
      const error = await tool({ id: "hung" }, { key: "k-hung" }).catch((e: unknown) => e);
      const waited = performance.now() - started;
      expect(isIdempotencyError(error, "store_unavailable"), String(error)).toBe(true);
      expect(String((error as Error).message)).toContain(`within ${commandTimeoutMs} ms`);
      expect(waited).toBeGreaterThanOrEqual(commandTimeoutMs - 50);
      expect(waited).toBeLessThan(commandTimeoutMs + 4_000);
      expect(runs).toEqual(["before"]);

      // Cut the hung connection; the client reconnects and calls proceed.
      await restart(proxy, hung);
      expect(await tool({ id: "after" }, { key: "k-after" })).toMatchObject({ was_replay: false });
      expect(runs).toEqual(["before", "after"]);
    } finally {
      hung.disconnect();
      await proxy.stop();
    }
  });
});
