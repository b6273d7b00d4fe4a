// On the server's clock, a claim is one plain command, SET NX GET, which writes a stub: the record without
// its times, which the key's expiry holds. Every script reads a stub as the record it stands for.
import { describe, expect, it } from "vitest";
import { idempotent } from "../src/index.js";
import { type RedisLike, redisStore } from "../src/redis/index.js";
import { recordName } from "../src/redis/record-key.js";
import { claimRequest } from "./fixtures/claim-request.js";
import { recordingCommands, serverNow } from "./fixtures/redis-helpers.js";
import { redisTestFile } from "./fixtures/redis-test-file.js";

const { client, fresh } = redisTestFile("plain");

const DAY = 86_400_000;

const settle = (key: string, token: string, result: string | null = `"${key}"`) => ({
  scope: "tenant-a",
  key,
  token,
  status: "completed" as const,
  result,
  error: null,
  ttlMs: 86_400_000,
  now: Date.now(),
});

describe("redisStore claims with one plain command on the server's clock", () => {
  it("claims with SET NX GET and replays a settled record with it, no script", async () => {
    const prefix = await fresh();
    const spy = recordingCommands(client);
    const store = redisStore({ client: spy.client, prefix });
    const first = await store.claim(claimRequest());
    expect(first.claimed).toBe(true);
    expect(spy.commands).toEqual(["set"]);
    const name = recordName(prefix, "tenant-a", "order-1");
    expect(await client.get(name)).toMatch(/^~ 60000 86400000 86400000 1 7 10 64 - -\ntoken-asend_email/);

    await store.settle(settle("order-1", "token-a"));
    spy.commands.length = 0;
    const replay = await store.claim(claimRequest({ token: "token-b" }));
    expect(spy.commands).toEqual(["set"]);
    expect(replay).toMatchObject({
      claimed: false,
      record: { status: "completed", token: "token-a", result: '"order-1"', attempts: 1 },
    });
    // The replay's reply carries no clock: its `now` is no earlier than the server's, and the record is live.
    expect(replay.now).toBe(replay.record.expiresAt - 1);
    expect(replay.now).toBeGreaterThanOrEqual(await serverNow(client));
    expect(await client.get(name)).toMatch(/^\d+ completed /);
  });

  it("reads a stub as its record in every script: times from the key's expiry, set by the server", async () => {
    const prefix = await fresh();
    const store = redisStore({ client, prefix });
    const before = await serverNow(client);
    await store.claim(claimRequest({ leaseMs: 5_000, ttlMs: 60_000 }));
    const after = await serverNow(client);
    const name = recordName(prefix, "tenant-a", "order-1");
    // The key outlives the record by a day, for a late settle by its owner.
    expect(await client.pexpiretime(name)).toBe((await store.get(claimRequest(), 0))!.expiresAt - 1 + DAY);

    const got = (await store.get(claimRequest(), 0))!;
    expect(got.createdAt).toBeGreaterThanOrEqual(before);
    expect(got.createdAt).toBeLessThanOrEqual(after);
    expect(got).toMatchObject({
      status: "in_progress",
      token: "token-a",
      tool: "send_email",
      fingerprint: "f".repeat(64),
      attempts: 1,
      updatedAt: got.createdAt,
      leaseExpiresAt: got.createdAt + 5_000,
      expiresAt: got.createdAt + 65_000,
      result: null,
      error: null,
    });
    expect((await store.list({})).records).toEqual([got]);

    // Another claim finds it through the script, which judges its lease by the server's clock.
    const holder = await store.claim(claimRequest({ token: "token-b" }));
    expect(holder).toMatchObject({ claimed: false, record: got });
    expect(holder.now).toBeGreaterThanOrEqual(after);
    expect(holder.now).toBeLessThan(got.leaseExpiresAt);

    // A claim resent with its own token finds its own record, never a second attempt.
    expect(await store.claim(claimRequest())).toMatchObject({ claimed: false, record: got });

    // Renew turns the stub into a whole record; its creation time is kept.
    expect(await store.renew({ ...claimRequest(), leaseMs: 9_000, ttlMs: 60_000 })).toBe(true);
    const renewed = (await store.get(claimRequest(), 0))!;
    expect(renewed.createdAt).toBe(got.createdAt);
    expect(renewed.leaseExpiresAt).toBeGreaterThanOrEqual(got.createdAt + 9_000);
    expect(await client.get(name)).toMatch(/^\d+ in_progress /);
  });

  it("settles, releases and takes over a stub", async () => {
    const prefix = await fresh();
    const store = redisStore({ client, prefix });
    await store.claim(claimRequest({ key: "settled" }));
    const stub = (await store.get(claimRequest({ key: "settled" }), 0))!;
    const settled = await store.settle(settle("settled", "token-a"));
    expect(settled).toMatchObject({ status: "completed", createdAt: stub.createdAt, attempts: 1 });
    expect(await store.settle(settle("settled", "token-a"))).toBeNull();

    await store.claim(claimRequest({ key: "released" }));
    expect(await store.release({ ...claimRequest({ key: "released" }), token: "token-b" })).toBe(false);
    expect(await store.release(claimRequest({ key: "released" }))).toBe(true);
    expect(await client.exists(recordName(prefix, "tenant-a", "released"))).toBe(0);

    await store.claim(claimRequest({ key: "stale", leaseMs: 1_000 }));
    const takeover = { ...claimRequest({ key: "stale" }), fromToken: "token-a", token: "token-b" };
    // The lease still runs by the server's clock; past it (the store's clock moved on, not slept) it is taken.
    expect(await store.takeover(takeover)).toBeNull();
    const later = redisStore({ client, prefix, clockOffsetMs: 2_000 });
    expect(await later.takeover(takeover)).toMatchObject({ token: "token-b", attempts: 2 });
  });

  it("settles a stub only with its own token, refuses a value that only looks like a stub, and dates a lost-expiry stub's claim now", async () => {
    const prefix = await fresh();
    const store = redisStore({ client, prefix });
    await store.claim(claimRequest());
    const name = recordName(prefix, "tenant-a", "order-1");
    const stub = await client.get(name);
    expect(await store.settle(settle("order-1", "token-b"))).toBeNull();
    expect(await store.settle(settle("order-1", "token-"))).toBeNull();
    expect(await client.get(name)).toBe(stub);

    // A "~" value whose header does not parse is nobody's claim: nothing settles it, nothing is written.
    const forged = "~ 60000 86400000 86400000 1 7 10 x - -\ntoken-asend_email";
    await client.set(name, forged);
    expect(await store.settle(settle("order-1", "token-a"))).toBeNull();
    expect(await client.get(name)).toBe(forged);

    // A stub that lost its expiry was claimed, as far as anyone can tell, when the settle reads it.
    await client.set(name, stub!);
    const before = await serverNow(client);
    const settled = await store.settle(settle("order-1", "token-a"));
    const after = await serverNow(client);
    expect(settled!.createdAt).toBeGreaterThanOrEqual(before);
    expect(settled!.createdAt).toBeLessThanOrEqual(after);
    expect(await client.pexpiretime(name)).toBe(settled!.expiresAt - 1);
  });

  it("refuses to settle a stub with bytes past its strings, which no claim writes and get refuses too", async () => {
    const prefix = await fresh();
    const store = redisStore({ client, prefix });
    await store.claim(claimRequest());
    const name = recordName(prefix, "tenant-a", "order-1");
    const forged = `${await client.get(name)}{"sent":1}`;
    await client.set(name, forged, "KEEPTTL");
    await expect(store.get(claimRequest(), 0)).rejects.toThrow(/not an idempotool record/);
    expect(await store.settle(settle("order-1", "token-a"))).toBeNull();
    expect(await client.get(name)).toBe(forged);
  });

  it("gives a stub whose key lost its expiry a claim's life again, rather than leave the key stuck for good", async () => {
    const prefix = await fresh();
    const store = redisStore({ client, prefix });
    await store.claim(claimRequest({ leaseMs: 5_000, ttlMs: 60_000 }));
    const name = recordName(prefix, "tenant-a", "order-1");
    await client.persist(name);
    const before = await serverNow(client);
    // Another caller finds the claim in progress, its lease restarted (its owner may still be running).
    const holder = await store.claim(claimRequest({ token: "token-b" }));
    expect(holder).toMatchObject({ claimed: false, record: { status: "in_progress", token: "token-a" } });
    expect(holder.record.createdAt).toBeGreaterThanOrEqual(before);
    expect(holder.record.leaseExpiresAt).toBe(holder.record.createdAt + 5_000);
    expect(await client.pexpiretime(name)).toBe(holder.record.expiresAt - 1 + DAY);
    // Its owner still settles it, and the key keeps its window.
    expect(await store.settle(settle("order-1", "token-a"))).toMatchObject({ status: "completed" });
    expect(await client.pexpiretime(name)).toBeGreaterThan(0);
  });

  it("restores the expiry of a lost-expiry stub from whichever script reads it first", async () => {
    const prefix = await fresh();
    const store = redisStore({ client, prefix });
    for (const key of ["get", "release", "renew", "settle", "list"]) {
      await store.claim(claimRequest({ key }));
      await client.persist(recordName(prefix, "tenant-a", key));
    }
    expect(await store.get(claimRequest({ key: "get" }), 0)).toMatchObject({ status: "in_progress" });
    expect(await store.release(claimRequest({ key: "release" }))).toBe(true);
    expect(await store.renew({ ...claimRequest({ key: "renew" }), leaseMs: 60_000, ttlMs: 60_000 })).toBe(
      true,
    );
    expect(await store.settle(settle("settle", "token-a"))).toMatchObject({ status: "completed" });
    expect((await store.list({ keyPrefix: "list" })).records).toMatchObject([{ status: "in_progress" }]);
    for (const key of ["get", "renew", "settle", "list"]) {
      expect(await client.pexpiretime(recordName(prefix, "tenant-a", key)), key).toBeGreaterThan(0);
    }
  });

  it("a settled record is replayed by its key's presence: the key goes the millisecond before the record", async () => {
    const prefix = await fresh();
    const store = redisStore({ client, prefix });
    await store.claim(claimRequest());
    const settled = (await store.settle({ ...settle("order-1", "token-a"), ttlMs: 60_000 }))!;
    const name = recordName(prefix, "tenant-a", "order-1");
    // Redis keeps a key through its expiry's millisecond; the record is live only before expiresAt.
    expect(await client.pexpiretime(name)).toBe(settled.expiresAt - 1);
    expect(await store.claim(claimRequest({ token: "token-b" }))).toMatchObject({ claimed: false });
    await client.pexpireat(name, (await serverNow(client)) - 1);
    expect((await store.claim(claimRequest({ token: "token-b" }))).claimed).toBe(true);
  });

  it("falls back to the script claim for good on a Redis that refuses SET with NX and GET (before 7.0)", async () => {
    const prefix = await fresh();
    // Mock only to inject the failure: Redis 6.2's answer to SET ... NX GET.
    let sets = 0;
    const older: RedisLike = new Proxy(client, {
      get(target, property, receiver) {
        if (property === "set") {
          return () => {
            sets++;
            return Promise.reject(new Error("ERR syntax error"));
          };
        }
        const value = Reflect.get(target, property, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const store = redisStore({ client: older, prefix });
    expect((await store.claim(claimRequest())).claimed).toBe(true);
    expect(await client.get(recordName(prefix, "tenant-a", "order-1"))).toMatch(/^\d+ in_progress /);
    expect((await store.claim(claimRequest({ key: "order-2" }))).claimed).toBe(true);
    expect(sets).toBe(1);
  });

  it("fails the claim on any other error, which may have landed", async () => {
    // Mock only to inject the failure.
    const failing: RedisLike = new Proxy(client, {
      get(target, property, receiver) {
        if (property === "set")
          return () => Promise.reject(new Error("READONLY You can't write against a replica."));
        const value = Reflect.get(target, property, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const store = redisStore({ client: failing, prefix: await fresh() });
    await expect(store.claim(claimRequest())).rejects.toThrow(/READONLY/);
    await expect(store.claim(claimRequest())).rejects.toThrow(/READONLY/);
  });

  it("keeps a request clock or a clock offset on the script claim", async () => {
    for (const options of [
      { clock: "request" as const },
      { clockOffsetMs: 1_000 },
      { clockOffsetMs: () => 0 },
    ]) {
      const spy = recordingCommands(client);
      const store = redisStore({ client: spy.client, prefix: await fresh(), ...options });
      await store.claim(claimRequest());
      expect(
        spy.commands.filter((c) => c === "set"),
        JSON.stringify(options),
      ).toEqual([]);
    }
  });

  it("runs a tool once across concurrent callers of two stores, and replays it to both", async () => {
    const prefix = await fresh();
    let runs = 0;
    const make = () =>
      idempotent(
        async (args: { to: string }) => {
          runs++;
          await new Promise((resolve) => setImmediate(resolve));
          return { sent: args.to };
        },
        { name: "send_email", store: redisStore({ client, prefix }), waitMs: 5_000 },
      );
    const [a, b] = [make(), make()];
    const calls = Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b)({ to: "x" }, { key: "k" }));
    const outcomes = await Promise.all(calls);
    expect(runs).toBe(1);
    expect(outcomes.filter((o) => !o.was_replay)).toHaveLength(1);
    expect(new Set(outcomes.map((o) => JSON.stringify(o.result)))).toEqual(new Set(['{"sent":"x"}']));
  });
});
