import { type Cluster, Redis } from "ioredis";
import { describe, expect, expectTypeOf, it } from "vitest";
import { type IdempotencyRecord, idempotent, isIdempotencyError, LeaseLostError } from "../src/index.js";
import { type RedisLike, redisStore } from "../src/redis/index.js";
import { recordName } from "../src/redis/record-key.js";
import * as scripts from "../src/redis/scripts.js";
import { fakeClock, storeConformanceCases } from "../src/testing/index.js";
import { claimRequest } from "./fixtures/claim-request.js";
import {
  dropPrefix,
  recordingCommands,
  redisUrl,
  serverNow,
  withRedisExpiry,
} from "./fixtures/redis-helpers.js";
import { redisTestFile } from "./fixtures/redis-test-file.js";

const { client, fresh } = redisTestFile();

const DAY = 86_400_000;

describe("redisStore conformance (clock: request)", () => {
  for (const c of storeConformanceCases({
    name: "redis",
    create: async () => {
      const prefix = await fresh("conformance");
      return {
        store: redisStore({ client, prefix, clock: "request" }),
        // Ahead of Redis, so Redis's own expiry (never before a record's expiresAt) leaves the fake clock in charge.
        clock: fakeClock(Date.now() + 30 * DAY),
        cleanup: () => dropPrefix(client, prefix),
      };
    },
  })) {
    it(c.name, c.run);
  }
});

// Redis deletes a key by its own clock, which no test can move: above, the fake clock runs a month ahead of
// it, so Redis never deletes a key under a case. Here Redis's expiry follows the fake clock instead, as it
// follows the server's clock in production, so a case sees what a store whose keys Redis deletes keeps
// (a record past its window, a call that outlived it). The purge cases count what purge removes, which
// Redis has then removed itself: they run above.
describe("redisStore conformance (clock: request), Redis's expiry following the clock", () => {
  const cases = storeConformanceCases({
    name: "redis, expiring",
    create: async () => {
      const prefix = await fresh("conformance");
      return {
        store: redisStore({ client, prefix, clock: "request" }),
        clock: withRedisExpiry(fakeClock(Date.now() + 30 * DAY), client, prefix),
        cleanup: () => dropPrefix(client, prefix),
      };
    },
  }).filter((c) => !/purge/.test(c.name));
  for (const c of cases) it(c.name, c.run);
});

describe("redisStore options and shape", () => {
  it("accepts an ioredis Redis and Cluster as they are (RedisLike is their shape)", () => {
    expectTypeOf<Redis>().toExtend<RedisLike>();
    expectTypeOf<Cluster>().toExtend<RedisLike>();
    const lazy = new Redis({ lazyConnect: true });
    const shaped: RedisLike = lazy;
    expect(redisStore({ client: shaped }).prefix).toBe("idempotool:");
    lazy.disconnect();
  });

  it("rejects bad options at configuration time, naming the option", () => {
    const bad: [string, () => unknown][] = [
      ["client", () => redisStore({ client: {} as RedisLike })],
      ["prefix", () => redisStore({ client, prefix: "" })],
      ["prefix", () => redisStore({ client, prefix: "app" })],
      ["commandTimeoutMs", () => redisStore({ client, commandTimeoutMs: 0 })],
      ["clock", () => redisStore({ client, clock: "wall" as "server" })],
      ["clockOffsetMs", () => redisStore({ client, clockOffsetMs: 1.5 })],
      ["clockOffsetMs", () => redisStore({ client, clock: "request", clockOffsetMs: 1_000 })],
    ];
    for (const [option, build] of bad) {
      expect(build, option).toThrow(expect.objectContaining({ code: "invalid_options" }));
      expect(build, option).toThrow(`\`${option}\``);
    }
  });

  it("runs the examples from its documentation", async () => {
    const prefix = await fresh("example");
    // As in redisStore's JSDoc, with a fresh prefix.
    const docClient = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
    try {
      const sendEmail = idempotent(async (args: { to: string }) => ({ sent: args.to }), {
        name: "send_email",
        store: redisStore({ client: docClient, prefix }),
      });
      const first = await sendEmail({ to: "alice@example.com" }, { key: "turn-7-alice" });
      const again = await sendEmail({ to: "alice@example.com" }, { key: "turn-7-alice" });
      expect(first).toMatchObject({ result: { sent: "alice@example.com" }, was_replay: false });
      expect(again).toMatchObject({ result: first.result, was_replay: true });

      // As in the idempotool/redis module comment.
      const queued: string[] = [];
      const store = redisStore({ client: docClient, prefix });
      const sendSms = idempotent(
        async (args: { to: string }) => {
          queued.push(args.to);
          return { queued: args.to };
        },
        { name: "send_sms", store },
      );
      await sendSms({ to: "+15550100" }, { key: "turn-3-sms" });
      expect(await sendSms({ to: "+15550100" }, { key: "turn-3-sms" })).toMatchObject({ was_replay: true });
      expect(queued).toEqual(["+15550100"]);
    } finally {
      docClient.disconnect();
    }
  });

  it("refuses a client with an ioredis keyPrefix, which SCAN would not honour", () => {
    const prefixed = new Redis({ lazyConnect: true, keyPrefix: "app:" });
    expect(() => redisStore({ client: prefixed })).toThrow(/keyPrefix "app:"/);
    prefixed.disconnect();
  });
});

describe("redisStore judges leases by the server's clock", () => {
  it("a claim's record takes Redis's TIME, whatever the request's now says", async () => {
    const prefix = await fresh();
    const store = redisStore({ client, prefix });
    const before = await serverNow(client);
    const request = claimRequest({ now: Date.now() + 3 * 3_600_000 });
    const claim = await store.claim(request);
    const after = await serverNow(client);
    // One plain command: its reply says only that it claimed, so the request's time stands in.
    expect(claim).toMatchObject({ claimed: true, now: request.now });
    const stored = (await store.get(request, 0))!;
    expect(stored.createdAt).toBeGreaterThanOrEqual(before);
    expect(stored.createdAt).toBeLessThanOrEqual(after);
    expect(stored).toMatchObject({ updatedAt: stored.createdAt, leaseExpiresAt: stored.createdAt + 60_000 });

    // The script claim (a clock offset, as in tests) reports the TIME it judged by.
    const scripted = redisStore({ client, prefix, clockOffsetMs: () => 0 });
    const second = await scripted.claim(claimRequest({ key: "order-2", now: request.now }));
    expect(second.now).toBeGreaterThanOrEqual(before);
    expect(second.now).toBeLessThanOrEqual(await serverNow(client));
    expect(second.record).toMatchObject({ createdAt: second.now, leaseExpiresAt: second.now + 60_000 });
  });

  it("a worker whose clock runs hours ahead cannot take over a live lease; the server's time decides", async () => {
    const prefix = await fresh();
    const store = redisStore({ client, prefix });
    let finish!: () => void;
    const holding = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const leaseMs = 5_000;
    let started!: () => void;
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const first = idempotent(
      async () => {
        started();
        await holding;
        return "first";
      },
      { name: "charge", store, effect: "native-key", leaseMs },
    );
    const firstCall = first({}, { key: "k" }).catch((error: unknown) => error);
    await running;

    // Hours ahead on the worker's clock: the lease still holds by the server's.
    const runs: string[] = [];
    const tool = (who: string) => async () => {
      runs.push(who);
      return who;
    };
    const ahead = idempotent(tool("ahead"), {
      name: "charge",
      store: redisStore({ client, prefix }),
      clock: fakeClock(Date.now() + 3 * 3_600_000),
      effect: "native-key",
      waitMs: 0,
      leaseMs,
    });
    const refused = await ahead({}, { key: "k" }).catch((error: unknown) => error);
    expect(isIdempotencyError(refused, "idempotency_key_in_use")).toBe(true);
    const holder = await store.get({ scope: "default", key: "k" }, 0);
    expect(
      await store.takeover({
        scope: "default",
        key: "k",
        fromToken: holder!.token,
        token: "thief",
        leaseMs,
        ttlMs: 86_400_000,
        now: Date.now() + 3 * 3_600_000,
      }),
    ).toBeNull();

    // Just short of the lease on the server's clock: still live.
    const almost = idempotent(tool("almost"), {
      name: "charge",
      store: redisStore({ client, prefix, clockOffsetMs: leaseMs - 2_000 }),
      effect: "native-key",
      waitMs: 0,
      leaseMs,
    });
    expect(
      isIdempotencyError(await almost({}, { key: "k" }).catch((e: unknown) => e), "idempotency_key_in_use"),
    ).toBe(true);

    // Past the lease on the server's clock (jumped forward, not slept): the next caller takes over.
    const later = idempotent(tool("later"), {
      name: "charge",
      store: redisStore({ client, prefix, clockOffsetMs: () => leaseMs + 1_000 }),
      effect: "native-key",
      leaseMs,
    });
    expect(await later({}, { key: "k" })).toMatchObject({ result: "later", was_replay: false });
    expect(runs).toEqual(["later"]);
    const taken = await store.get({ scope: "default", key: "k" }, 0);
    expect(taken).toMatchObject({ status: "completed", attempts: 2, result: '"later"' });

    // The first worker finishes late: its settle is fenced off and it says so.
    finish();
    expect(await firstCall).toBeInstanceOf(LeaseLostError);
    expect(await store.get({ scope: "default", key: "k" }, 0)).toEqual(taken);
  });
});

describe("redisStore keeps Redis's expiry in step with the record", () => {
  async function expiryOf(prefix: string, record: IdempotencyRecord): Promise<number> {
    return client.pexpiretime(recordName(prefix, record.scope, record.key));
  }

  // Redis keeps a key through its expiry's millisecond: an expiry of expiresAt - 1 is gone at expiresAt. The
  // key of a record its owner may still settle (in progress, unknown) stays a day longer.
  it("expires a settled record's key the millisecond before the record, an open one's a day later (server clock)", async () => {
    const prefix = await fresh();
    const store = redisStore({ client, prefix });
    const request = claimRequest({ leaseMs: 30_000, ttlMs: 10_000 });
    expect((await store.claim(request)).claimed).toBe(true);
    const claimed = (await store.get(request, 0))!;
    expect(claimed.expiresAt).toBe(claimed.leaseExpiresAt + 10_000);
    expect(await expiryOf(prefix, claimed)).toBe(claimed.expiresAt - 1 + DAY);
    const ttl = await client.pttl(recordName(prefix, "tenant-a", "order-1"));
    expect(ttl).toBeGreaterThan(35_000 + DAY);
    expect(ttl).toBeLessThanOrEqual(40_000 + DAY);

    expect(await store.renew({ ...claimed, leaseMs: 90_000, ttlMs: 10_000, now: 0 })).toBe(true);
    const renewed = await store.get(claimed, 0);
    expect(renewed!.expiresAt).toBe(renewed!.leaseExpiresAt + 10_000);
    expect(await expiryOf(prefix, renewed!)).toBe(renewed!.expiresAt - 1 + DAY);

    const settled = await store.settle({
      ...claimed,
      status: "unknown",
      result: null,
      error: "timeout",
      ttlMs: DAY,
      now: 0,
    });
    expect(await expiryOf(prefix, settled!)).toBe(settled!.expiresAt - 1 + DAY);

    const taken = await store.takeover({
      ...claimed,
      fromToken: "token-a",
      token: "token-b",
      leaseMs: 1_000,
      ttlMs: 1_000,
      now: 0,
    });
    expect(await expiryOf(prefix, taken!)).toBe(settled!.expiresAt - 1 + DAY);

    for (const status of ["completed", "failed"] as const) {
      const done = await store.settle({ ...taken!, status, result: null, error: null, ttlMs: DAY, now: 0 });
      expect(await expiryOf(prefix, done!), status).toBe(done!.expiresAt - 1);
      await store.delete(done!);
      await store.claim(claimRequest({ leaseMs: 30_000, ttlMs: 10_000, token: "token-b" }));
    }
  });

  it("with the request clock, Redis deletes a record no earlier than its expiresAt nor its remaining life", async () => {
    // Redis keeps a key through its expiry's millisecond: an expiry of expiresAt - 1 is gone at expiresAt.
    const prefix = await fresh();
    const store = redisStore({ client, prefix, clock: "request" });
    const ahead = Date.now() + 7 * DAY;
    const early = (await store.claim(claimRequest({ key: "ahead", now: ahead, leaseMs: 1_000, ttlMs: DAY })))
      .record;
    expect(await expiryOf(prefix, early)).toBe(ahead + 1_000 + DAY - 1 + DAY);

    // A caller whose clock runs a day behind Redis's: its record still lives its full hour by Redis's clock.
    const behind = Date.now() - DAY;
    const late = (
      await store.claim(claimRequest({ key: "behind", now: behind, leaseMs: 1_000, ttlMs: 3_600_000 }))
    ).record;
    expect(late.expiresAt).toBe(behind + 3_601_000);
    const expiry = await expiryOf(prefix, late);
    const now = await serverNow(client);
    expect(expiry).toBeGreaterThan(now + 3_500_000 + DAY);
    expect(expiry).toBeLessThan(now + 3_601_000 + DAY);
  });

  it("leaves purge to Redis under the server clock", async () => {
    const store = redisStore({ client, prefix: await fresh() });
    await store.claim(claimRequest());
    expect(await store.purge({ now: Date.now() + 10 * DAY })).toEqual({ deleted: 0 });
    await expect(store.purge({ now: 0, limit: 0 })).rejects.toThrow(RangeError);
  });
});

describe("redisStore key names", () => {
  const awkward: readonly [string, string][] = [
    ["a:b", "c"],
    ["a", "b:c"],
    ["{tenant}", "order-1"],
    ["tenant", "{order}:1"],
    ["}{", "{}"],
    ["ünï:cødé", "😀:🚀"],
    ["%3A", ":"],
    [":", "%3A"],
    ["a*", "b?[c]\\"],
    ["a b", "c\td"],
    ["\ud800", "x"],
    ["\udc00", "x"],
  ];

  it("never lets scopes and keys with ':', '{', '}', '%', globs or unicode collide", async () => {
    const prefix = await fresh();
    const store = redisStore({ client, prefix });
    for (const [i, [scope, key]] of awkward.entries()) {
      expect((await store.claim(claimRequest({ scope, key, token: `token-${i}` }))).claimed).toBe(true);
    }
    for (const [i, [scope, key]] of awkward.entries()) {
      expect(await store.get({ scope, key }, 0)).toMatchObject({ scope, key, token: `token-${i}` });
    }
    const listed = (await store.list({ limit: 1000 })).records.map((r) => [r.scope, r.key]);
    expect(listed.sort()).toEqual([...awkward].sort());
    for (const [scope, key] of awkward) {
      expect((await store.list({ scope, keyPrefix: key })).records.map((r) => [r.scope, r.key])).toEqual([
        [scope, key],
      ]);
    }
  });

  it("lists a key by a prefix that ends halfway through a surrogate pair", async () => {
    const store = redisStore({ client, prefix: await fresh() });
    await store.claim(claimRequest({ scope: "s", key: "\ud83d\ude00-party", token: "t" }));
    const listed = await store.list({ scope: "s", keyPrefix: "\ud83d" });
    expect(listed.records.map((r) => r.key)).toEqual(["\ud83d\ude00-party"]);
  });

  it("keeps stores with nested prefixes apart: list and purge never touch the other's records", async () => {
    const outer = await fresh();
    const inner = `${outer}eu:`;
    const a = redisStore({ client, prefix: outer, clock: "request" });
    const b = redisStore({ client, prefix: inner, clock: "request" });
    const now = Date.now() + 30 * DAY;
    // The outer store's ("eu", "k1") and the inner store's ("s", "k2") share the text "<outer>eu:".
    await a.claim(claimRequest({ scope: "eu", key: "k1", now, ttlMs: 1_000, leaseMs: 1_000 }));
    await b.claim(claimRequest({ scope: "s", key: "k2", now, ttlMs: 1_000, leaseMs: 1_000 }));
    expect((await a.list({})).records.map((r) => [r.scope, r.key])).toEqual([["eu", "k1"]]);
    expect((await b.list({})).records.map((r) => [r.scope, r.key])).toEqual([["s", "k2"]]);
    expect(await a.purge({ now: now + DAY })).toEqual({ deleted: 1 });
    expect((await b.list({})).records).toHaveLength(1);
    expect(await b.purge({ now: now + DAY })).toEqual({ deleted: 1 });
  });

  it("writes names without hash tags or glob characters, so records spread over every Cluster slot", async () => {
    const prefix = await fresh();
    const store = redisStore({ client, prefix });
    for (const [scope, key] of awkward) await store.claim(claimRequest({ scope, key }));
    const [, names] = await client.scan("0", "MATCH", `${prefix}*`, "COUNT", 10_000);
    expect(names).toHaveLength(awkward.length);
    for (const name of names) expect(name.slice(prefix.length)).not.toMatch(/[{}*?[\]\\ ]/);
  });
});

/**
 * Wraps a real client: `calls` holds every method call the store makes on it, and `commands` every
 * command ioredis then writes to the socket (the NOSCRIPT fallback included).
 */
function recording(inner: Redis) {
  const calls: { method: string; args: unknown[] }[] = [];
  const { client: counted, commands } = recordingCommands(inner);
  const record =
    <A extends unknown[], R>(method: string, call: (...args: A) => R) =>
    (...args: A): R => {
      calls.push({ method, args });
      return call(...args);
    };
  const client: RedisLike = {
    evalsha: record("evalsha", (...args: Parameters<RedisLike["evalsha"]>) => counted.evalsha(...args)),
    eval: record("eval", (...args: Parameters<RedisLike["eval"]>) => counted.eval(...args)),
    scan: record("scan", (...args: Parameters<RedisLike["scan"]>) => counted.scan(...args)),
  };
  return { client, calls, commands };
}

describe("redisStore on Redis Cluster terms", () => {
  it("calls every script with exactly one key, the record's", async () => {
    const prefix = await fresh();
    const spy = recording(client);
    const store = redisStore({ client: spy.client, prefix, clock: "request" });
    const now = Date.now() + 30 * DAY;
    await store.claim(claimRequest({ now }));
    await store.claim(claimRequest({ now, token: "token-b" }));
    await store.renew({
      scope: "tenant-a",
      key: "order-1",
      token: "token-a",
      leaseMs: 1_000,
      ttlMs: 86_400_000,
      now,
    });
    await store.takeover({
      scope: "tenant-a",
      key: "order-1",
      fromToken: "token-a",
      token: "t2",
      leaseMs: 1,
      ttlMs: 86_400_000,
      now: now + 2_000,
    });
    await store.settle({
      scope: "tenant-a",
      key: "order-1",
      token: "t2",
      status: "completed",
      result: "1",
      error: null,
      ttlMs: 1_000,
      now: now + 2_000,
    });
    await store.get({ scope: "tenant-a", key: "order-1" }, now);
    await store.claim(claimRequest({ now, key: "other" }));
    await store.release({ scope: "tenant-a", key: "other", token: "token-a" });
    await store.list({ scope: "tenant-a" });
    await store.purge({ now: now + DAY });
    await store.delete({ scope: "tenant-a", key: "order-1" });

    const scriptCalls = spy.calls.filter((c) => c.method === "evalsha" || c.method === "eval");
    expect(scriptCalls.length).toBeGreaterThanOrEqual(11);
    for (const { args } of scriptCalls) {
      expect(args[1], "numkeys").toBe(1);
      expect(String(args[2])).toMatch(
        new RegExp(`^${prefix.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}[^:]+:[^:]+$`),
      );
    }
    // The only other commands are SCANs, which name no key.
    expect(new Set(spy.calls.map((c) => c.method))).toEqual(new Set(["evalsha", "eval", "scan"]));
    // A second key is passed only by a store that remembers released tokens (on an Upstash client), and
    // only claim, takeover and release read it, when it is given.
    for (const script of Object.values(scripts)) {
      const beyond = ["claim", "takeover", "release"].includes(script.name) ? /KEYS\[[3-9]/ : /KEYS\[[2-9]/;
      expect(script.lua, script.name).not.toMatch(beyond);
    }
  });
});

describe("redisStore round trips", () => {
  it("sends exactly one command per claim, replayed claim, settle, renew, release and get", async () => {
    const prefix = await fresh();
    const spy = recording(client);
    const store = redisStore({ client: spy.client, prefix });
    const count = async (operation: () => Promise<unknown>) => {
      spy.commands.length = 0;
      await operation();
      return [...spy.commands];
    };
    // The very first use of each script sends it whole (EVAL); EVALSHA after that.
    expect(await count(() => store.claim(claimRequest()))).toEqual(["eval"]);
    expect(await count(() => store.claim(claimRequest({ token: "token-b" })))).toEqual(["evalsha"]);
    expect(await count(() => store.renew({ ...claimRequest(), leaseMs: 60_000 }))).toEqual(["eval"]);
    expect(await count(() => store.renew({ ...claimRequest(), leaseMs: 60_000 }))).toEqual(["evalsha"]);
    const settle = { ...claimRequest(), status: "completed" as const, result: "1", error: null };
    expect(await count(() => store.settle(settle))).toEqual(["eval"]);
    expect(await count(() => store.get(claimRequest(), 0))).toEqual(["eval"]);
    expect(await count(() => store.get(claimRequest(), 0))).toEqual(["evalsha"]);
    await store.claim(claimRequest({ key: "k2" }));
    expect(await count(() => store.release({ ...claimRequest({ key: "k2" }) }))).toEqual(["eval"]);
    await store.claim(claimRequest({ key: "k3" }));
    expect(await count(() => store.settle({ ...settle, key: "k3" }))).toEqual(["evalsha"]);
  });

  it("through idempotent(): a first call is two commands (claim, settle) and a replay one", async () => {
    const prefix = await fresh();
    const spy = recording(client);
    const store = redisStore({ client: spy.client, prefix });
    let runs = 0;
    const tool = idempotent(async (args: { to: string }) => ({ sent: args.to, run: ++runs }), {
      name: "send_email",
      store,
    });
    await tool({ to: "warm-up" }, { key: "warm-up" });
    spy.commands.length = 0;
    const first = await tool({ to: "alice" }, { key: "k1" });
    expect(spy.commands).toEqual(["evalsha", "evalsha"]);
    spy.commands.length = 0;
    const replay = await tool({ to: "alice" }, { key: "k1" });
    expect(spy.commands).toEqual(["evalsha"]);
    expect(replay).toEqual({ ...first, was_replay: true });
    expect(runs).toBe(2);
  });

  it("recovers from a script cache flushed under it (restart, failover) with one EVAL", async () => {
    const prefix = await fresh();
    const spy = recording(client);
    const store = redisStore({ client: spy.client, prefix });
    await store.claim(claimRequest());
    await client.script("FLUSH");
    spy.commands.length = 0;
    const again = await store.claim(claimRequest({ token: "token-b" }));
    expect(again).toMatchObject({ claimed: false, record: { token: "token-a" } });
    expect(spy.commands).toEqual(["evalsha", "eval"]);
    spy.commands.length = 0;
    await store.claim(claimRequest({ token: "token-c" }));
    expect(spy.commands).toEqual(["evalsha"]);
  });
});

describe("redisStore never waits forever", () => {
  it("rejects an operation Redis does not answer within commandTimeoutMs", async () => {
    // Mock only to inject the failure: a client that never answers.
    const silent: RedisLike = {
      evalsha: () => new Promise(() => {}),
      eval: () => new Promise(() => {}),
      scan: () => new Promise(() => {}),
    };
    const store = redisStore({ client: silent, commandTimeoutMs: 50 });
    const started = performance.now();
    await expect(store.claim(claimRequest())).rejects.toThrow(/no reply from Redis to claim within 50 ms/);
    await expect(store.list({})).rejects.toThrow(/scan within 50 ms/);
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});
