/**
 * A claim held in the network past the Redis store's commandTimeoutMs, which lands after its caller gave up:
 * the core's release, sent behind it on the same connection, frees the key. Redis's own: one connection
 * delivers its commands in order, so the release cannot overtake the claim (stores whose requests may
 * arrive out of order remember released tokens instead; the conformance suite's claimsMayArriveLate cases).
 */
import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { StoreUnavailableError, systemClock } from "../src/index.js";
import { redisStore } from "../src/redis/index.js";
import { claimRequest } from "./fixtures/claim-request.js";
import { eventually } from "./fixtures/pg-helpers.js";
import { dropPrefix, freshPrefix, reachable, redisUrl } from "./fixtures/redis-helpers.js";
import { redisProxy } from "./fixtures/redis-proxy.js";
import { emailTool, rejection } from "./fixtures/tools.js";

const alice = { to: "alice@example.com" };
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
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
    const { send, sent, events } = emailTool({ store, clock: systemClock, waitMs: 0 });
    // The claim, then the core's release, wait in the network past the store's timeout.
    proxy.hold();
    const error = await rejection(send(alice, { key: "late" }));
    expect(error).toBeInstanceOf(StoreUnavailableError);
    proxy.deliver();
    // The claim lands first, and the release behind it frees the key (the core retries until answered).
    await eventually(
      async () => events.some((event) => event.type === "released"),
      "the core's release is answered",
    );
    expect(await direct.get({ scope: "default", key: "late" }, Date.now())).toBeUndefined();
    expect(await send(alice, { key: "late" })).toMatchObject({ was_replay: false });
    expect(sent).toEqual([alice]);
  });
});
