/**
 * Replies lost after the server applied the command, on the real servers and with the clients' default
 * settings: a proxy forwards the claim or the settle, then drops the answer and the connection.
 * pg fails the query; ioredis reconnects and resends it. Either way the tool runs once per logical call,
 * the key is never left blocked, and the caller is never told a recorded outcome was lost. And a claim
 * held in the network past its timeout, which lands after its caller gave up: the core's release, sent
 * behind it on the same Redis connection, frees the key.
 */
import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { StoreUnavailableError } from "../src/core/errors.js";
import { idempotent } from "../src/core/idempotent.js";
import type { IdempotencyStore } from "../src/core/store.js";
import { postgresStore } from "../src/postgres/index.js";
import { redisStore } from "../src/redis/index.js";
import { claimRequest } from "./fixtures/claim-request.js";
import { dropTable, eventually, freshTable, pgUrl, testPool } from "./fixtures/pg-helpers.js";
import { dropPrefix, freshPrefix, reachable, redisUrl } from "./fixtures/redis-helpers.js";
import { redisProxy } from "./fixtures/redis-proxy.js";
import { type ReplyDroppingProxy, replyDroppingProxy } from "./fixtures/reply-dropping-proxy.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

/** A send_email on `store` that counts what it sent; waits for nobody, so a blocked key shows at once. */
function counted(store: IdempotencyStore) {
  const sent: string[] = [];
  const send = idempotent(
    async (args: { to: string }) => {
      sent.push(args.to);
      return { id: `m-${sent.length}` };
    },
    { name: "send_email", store, waitMs: 0 },
  );
  return { send, sent };
}

/** The settle's reply is dropped (the claim is the first command naming the key): its outcome still holds. */
async function settleReplyLost({ store, proxy }: { store: IdempotencyStore; proxy: ReplyDroppingProxy }) {
  const { send, sent } = counted(store);
  const dropped = proxy.dropReplyTo("settle-lost", 2);
  const first = await send({ to: "alice" }, { key: "settle-lost" });
  await dropped;
  expect(first).toMatchObject({ result: { id: "m-1" }, was_replay: false });
  expect(await send({ to: "alice" }, { key: "settle-lost" })).toMatchObject({
    result: { id: "m-1" },
    was_replay: true,
  });
  expect(sent).toEqual(["alice"]);
}

async function postgresBehind(): Promise<{
  store: IdempotencyStore;
  direct: IdempotencyStore;
  proxy: ReplyDroppingProxy;
}> {
  const url = new URL(pgUrl);
  const proxy = await replyDroppingProxy({ host: url.hostname, port: Number(url.port || 5432) });
  const table = freshTable();
  const pool = testPool({ port: proxy.port });
  const directPool = testPool();
  cleanups.push(
    () => proxy.close(),
    () => pool.end(),
    () => directPool.end(),
  );
  cleanups.push(() => dropTable(directPool, table));
  const direct = postgresStore({ client: directPool, table });
  await direct.get({ scope: "default", key: "warm-up" }, Date.now());
  return { store: postgresStore({ client: pool, table }), direct, proxy };
}

async function redisBehind(): Promise<{
  store: IdempotencyStore;
  direct: IdempotencyStore;
  proxy: ReplyDroppingProxy;
}> {
  const url = new URL(redisUrl);
  const proxy = await replyDroppingProxy({ host: url.hostname, port: Number(url.port || 6379) });
  const prefix = freshPrefix("lost-replies");
  // The client's defaults: it reconnects and resends the commands that had no answer.
  const client = new Redis({ host: "127.0.0.1", port: proxy.port });
  const directClient = new Redis(redisUrl);
  cleanups.push(
    () => proxy.close(),
    async () => client.disconnect(),
    async () => directClient.disconnect(),
  );
  cleanups.push(() => dropPrefix(directClient, prefix));
  await reachable(directClient);
  const store = redisStore({ client, prefix });
  // Load the scripts, so the command whose reply is dropped is the one that applies.
  await counted(store).send({ to: "warm-up" }, { key: "warm-up" });
  return { store, direct: redisStore({ client: directClient, prefix }), proxy };
}

describe("PostgreSQL: a reply lost after the server applied the command", () => {
  it("a claim whose reply was lost is released, and a retry runs the tool once", async () => {
    const { store, direct, proxy } = await postgresBehind();
    const { send, sent } = counted(store);
    const dropped = proxy.dropReplyTo("claim-lost");
    const error = await send({ to: "alice" }, { key: "claim-lost" }).catch((e: unknown) => e);
    await dropped;
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(sent).toEqual([]);
    expect(await direct.get({ scope: "default", key: "claim-lost" }, Date.now())).toBeUndefined();
    const retry = await send({ to: "alice" }, { key: "claim-lost" });
    expect(retry.was_replay).toBe(false);
    expect(sent).toEqual(["alice"]);
  });

  it("a settle whose reply was lost is read back: the caller gets its result, and a repeat replays it", async () => {
    await settleReplyLost(await postgresBehind());
  });
});

describe("Redis: a reply lost after the server applied the command, and the client resends it", () => {
  it("a resent claim finds its own record: the tool runs once, and the key is not blocked", async () => {
    const { store, direct, proxy } = await redisBehind();
    const { send, sent } = counted(store);
    const dropped = proxy.dropReplyTo("claim-lost");
    const first = await send({ to: "alice" }, { key: "claim-lost" });
    await dropped;
    expect(first.was_replay).toBe(false);
    expect(sent).toEqual(["alice"]);
    expect((await direct.get({ scope: "default", key: "claim-lost" }, Date.now()))?.status).toBe("completed");
  });

  it("a resent settle is not reported as a lost lease: the caller gets its result, and a repeat replays it", async () => {
    await settleReplyLost(await redisBehind());
  });
});

/** A store whose connection goes through a proxy that can hold what the client sends and deliver it late. */
async function redisBehindHoldingProxy() {
  const url = new URL(redisUrl);
  const proxy = await redisProxy({ host: url.hostname, port: Number(url.port || 6379) });
  const prefix = freshPrefix("late-claim");
  const client = new Redis({ host: "127.0.0.1", port: proxy.port });
  const directClient = new Redis(redisUrl);
  cleanups.push(
    () => proxy.stop(),
    async () => client.disconnect(),
    async () => directClient.disconnect(),
  );
  cleanups.push(() => dropPrefix(directClient, prefix));
  await reachable(directClient);
  const store = redisStore({ client, prefix, commandTimeoutMs: 100 });
  // Load the scripts, so that what is held later is the operation itself.
  await store.get({ scope: "default", key: "warm-up" }, Date.now());
  await store.release({ scope: "default", key: "warm-up", token: "none" });
  await store.claim(claimRequest({ key: "warm-up" }));
  return { proxy, client, store, direct: redisStore({ client: directClient, prefix }) };
}

describe("Redis: a claim that lands after its caller gave up", () => {
  it("does land: a claim held past commandTimeoutMs is applied once delivered", async () => {
    const { proxy, client, store, direct } = await redisBehindHoldingProxy();
    proxy.hold();
    await expect(store.claim(claimRequest({ key: "late", token: "gave-up" }))).rejects.toThrow(
      /within 100 ms/,
    );
    proxy.deliver();
    await client.ping(); // answered after everything sent before it
    expect(await direct.get({ scope: "tenant-a", key: "late" }, Date.now())).toMatchObject({
      status: "in_progress",
      token: "gave-up",
    });
  });

  it("is freed by the core's release, which one connection delivers behind it: a repeat runs the tool once", async () => {
    const { proxy, store, direct } = await redisBehindHoldingProxy();
    let sent = 0;
    let released = false;
    const send = idempotent(
      async () => {
        sent++;
        return "sent";
      },
      {
        name: "send_email",
        store,
        waitMs: 0,
        onEvent: (event) => {
          if (event.type === "released") released = true;
        },
      },
    );
    // The claim, then the core's release, wait in the network past the store's timeout.
    proxy.hold();
    const error = await send({}, { key: "late" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    proxy.deliver();
    // The claim lands first, and the release behind it frees the key (the core retries until answered).
    await eventually(async () => released, "the core's release is answered");
    expect(await direct.get({ scope: "default", key: "late" }, Date.now())).toBeUndefined();
    expect(await send({}, { key: "late" })).toMatchObject({ was_replay: false });
    expect(sent).toBe(1);
  });
});
