/**
 * `redisStore` on an `@upstash/redis` client, over Upstash's REST protocol (test/fixtures/upstash-rest-server.ts,
 * in front of this machine's Redis): the conformance suite, with the cases for claims that arrive late
 * (each command is an HTTP request the client may resend), and what is Upstash's own: replies the client
 * JSON-parses and base64-decodes, its errors, its retries and automatic pipelines, and the store's deadline.
 * The race, crash and lost-reply scenarios run on it as the `redis-upstash` row of test/fixtures/stores.ts.
 */
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from "vitest";
import { isIdempotencyError, StoreUnavailableError, systemClock } from "../src/index.js";
import { redisStore, type UpstashRedisLike } from "../src/redis/index.js";
import { fakeClock, storeConformanceCases } from "../src/testing/index.js";
import { claimRequest } from "./fixtures/claim-request.js";
import { eventually } from "./fixtures/pg-helpers.js";
import { dropPrefix, testClient, withRedisExpiry } from "./fixtures/redis-helpers.js";
import { redisTestFile } from "./fixtures/redis-test-file.js";
import { upstashClient } from "./fixtures/stores.js";
import { emailTool, rejection } from "./fixtures/tools.js";
import { type UpstashRestServer, upstashRestServer } from "./fixtures/upstash-rest-server.js";

const { client: admin, fresh } = redisTestFile("upstash");
const backend = testClient();
let server: UpstashRestServer;
beforeAll(async () => {
  server = await upstashRestServer(backend);
});
afterAll(async () => {
  await server?.close();
  backend.disconnect();
});

/** A server of the test's own, whose requests no other test's stragglers (a background release) add to. */
const ownServers: UpstashRestServer[] = [];
afterAll(async () => {
  for (const own of ownServers) await own.close();
});
async function ownServer(): Promise<UpstashRestServer> {
  const own = await upstashRestServer(backend);
  ownServers.push(own);
  return own;
}

const DAY = 86_400_000;
const alice = { to: "alice@example.com" };

/**
 * A store on a fresh prefix, on an Upstash client with its usual settings unless told otherwise, talking to
 * the file's server, or to `through`.
 */
async function upstashStore(
  options: {
    client?: Parameters<typeof upstashClient>[2];
    commandTimeoutMs?: number;
    through?: UpstashRestServer;
  } = {},
) {
  const prefix = await fresh();
  const { url, token } = options.through ?? server;
  const client = await upstashClient(url, token, options.client);
  const store = redisStore({
    client,
    prefix,
    ...(options.commandTimeoutMs ? { commandTimeoutMs: options.commandTimeoutMs } : {}),
  });
  // The direct view, on ioredis, of the same records.
  const direct = redisStore({ client: admin, prefix });
  return { client, prefix, store, direct };
}

describe("redisStore on @upstash/redis: conformance (clock: request)", () => {
  for (const c of storeConformanceCases({
    name: "redis (upstash)",
    claimsMayArriveLate: true,
    create: async () => {
      const prefix = await fresh("conformance");
      const client = await upstashClient(server.url, server.token);
      return {
        store: redisStore({ client, prefix, clock: "request" }),
        // Ahead of Redis, so Redis's own expiry (never before a record's expiresAt) leaves the fake clock in charge.
        clock: fakeClock(Date.now() + 30 * DAY),
        cleanup: () => dropPrefix(admin, prefix),
      };
    },
  })) {
    it(c.name, c.run);
  }
});

// As in redis-store.test.ts: Redis's expiry following the fake clock, for every case but purge's counts.
describe("redisStore on @upstash/redis: conformance (clock: request), Redis's expiry following the clock", () => {
  const cases = storeConformanceCases({
    name: "redis (upstash), expiring",
    claimsMayArriveLate: true,
    create: async () => {
      const prefix = await fresh("conformance");
      const client = await upstashClient(server.url, server.token);
      return {
        store: redisStore({ client, prefix, clock: "request" }),
        clock: withRedisExpiry(fakeClock(Date.now() + 30 * DAY), admin, prefix),
        cleanup: () => dropPrefix(admin, prefix),
      };
    },
  }).filter((c) => !/purge/.test(c.name));
  for (const c of cases) it(c.name, c.run);
});

describe("redisStore on @upstash/redis", () => {
  it("takes the client as it is: its Redis fits UpstashRedisLike, and is told apart from ioredis", async () => {
    expectTypeOf<Redis>().toExtend<UpstashRedisLike>();
    const { store, client } = await upstashStore();
    expect(store.client).toBe(client);
    expect(await store.claim(claimRequest({ key: "shape" }))).toMatchObject({ claimed: true });
  });

  it("refuses a prefix whose key names the client would JSON-parse, naming the option", async () => {
    const client = await upstashClient(server.url, server.token);
    for (const prefix of ['"app:', ' "app:', "\tapp:"]) {
      expect(() => redisStore({ client, prefix }), prefix).toThrow(
        expect.objectContaining({ code: "invalid_options", message: expect.stringContaining("`prefix`") }),
      );
    }
  });

  for (const [label, settings] of [
    ["base64 replies and automatic deserialization (the defaults)", {}],
    ["plain JSON replies", { responseEncoding: false }],
    ["automatic deserialization off", { automaticDeserialization: false }],
  ] as const) {
    it(`keeps records byte for byte with ${label}: results that are JSON, numbers or non-ASCII`, async () => {
      const { store, direct } = await upstashStore({ client: settings });
      const results = ["123", "null", '"quoted"', '{"a":[1,2]}', "true", "é ✉️ 𝄞", "OK", ""];
      for (const [i, result] of results.entries()) {
        const id = { scope: `"scope-${i}"`, key: i % 2 === 0 ? String(1000 + i) : `null-${i}` };
        const claim = await store.claim(claimRequest({ ...id, token: `token-${i}` }));
        expect(claim.claimed).toBe(true);
        const settled = await store.settle({
          ...id,
          token: `token-${i}`,
          status: "completed",
          result,
          error: null,
          ttlMs: DAY,
          now: Date.now(),
        });
        expect(settled?.result).toBe(result);
        expect((await store.get(id, Date.now()))?.result, result).toBe(result);
        expect((await direct.get(id, Date.now()))?.result).toBe(result);
        const replay = await store.claim(claimRequest({ ...id, token: "another" }));
        expect(replay).toMatchObject({ claimed: false, record: { result, token: `token-${i}` } });
      }
      // list reads the names SCAN returns, which the client would JSON-parse: "1000" stays a name.
      const listed = await store.list({ limit: 100 });
      expect(listed.records.map((r) => r.result).sort()).toEqual([...results].sort());
    });
  }

  it("fails closed on a wrong token (401): store_unavailable, and the tool does not run", async () => {
    const prefix = await fresh();
    const client = await upstashClient(server.url, "not-the-token");
    const { send, sent } = emailTool({ store: redisStore({ client, prefix }), clock: systemClock });
    const error = await rejection(send(alice, { key: "unauthorized" }));
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(String((error as Error).cause)).toMatch(/Unauthorized/);
    expect(sent).toEqual([]);
  });

  it("fails closed on a 5xx, and on a refused command ({error} with 400), without running the tool", async () => {
    const { store } = await upstashStore();
    const { send, sent } = emailTool({ store, clock: systemClock });
    server.failNext(503, '{"error":"Service Unavailable"}');
    expect(await rejection(send(alice, { key: "unavailable" }))).toBeInstanceOf(StoreUnavailableError);
    server.failNext(502, "<html>Bad Gateway</html>");
    expect(await rejection(send(alice, { key: "bad-gateway" }))).toBeInstanceOf(StoreUnavailableError);
    server.failNext(400, '{"error":"ERR max daily request limit exceeded"}');
    const refused = await rejection(send(alice, { key: "refused" }));
    expect(refused).toBeInstanceOf(StoreUnavailableError);
    expect(String((refused as Error).cause)).toMatch(/max daily request limit/);
    expect(sent).toEqual([]);
    // The store is fine once the server is: the keys were never blocked.
    expect(await send(alice, { key: "unavailable" })).toMatchObject({ was_replay: false });
    expect(sent).toEqual([alice]);
  });

  it("keeps the command's arguments (a result among them) out of the error it throws", async () => {
    const { store } = await upstashStore();
    await store.claim(claimRequest({ key: "secret" }));
    server.failNext(400, '{"error":"ERR out of memory"}');
    const error = await rejection(
      store.settle({
        scope: "tenant-a",
        key: "secret",
        token: "token-a",
        status: "completed",
        result: '{"card":"4242 4242 4242 4242"}',
        error: null,
        ttlMs: DAY,
        now: Date.now(),
      }),
    );
    expect((error as Error).message).toBe("ERR out of memory");
    expect(JSON.stringify(error)).not.toContain("4242");
  });

  it("sends a script whole when the server answers NOSCRIPT (after a restart or SCRIPT FLUSH)", async () => {
    const own = await ownServer();
    const { store } = await upstashStore({ through: own });
    await store.claim(claimRequest({ key: "loaded" }));
    const before = own.requests;
    // In an automatic pipeline the client words it "Command failed: NOSCRIPT …".
    own.failNext(200, '[{"error":"NOSCRIPT No matching script. Please use EVAL."}]');
    expect(await store.claim(claimRequest({ key: "after-flush" }))).toMatchObject({ claimed: true });
    expect(own.requests - before).toBe(2);
  });

  it("gives up after commandTimeoutMs on a request that hangs: store_unavailable, the tool does not run", async () => {
    const { store, prefix } = await upstashStore({ commandTimeoutMs: 100 });
    const { send, sent } = emailTool({ store, clock: systemClock, waitMs: 0 });
    const hung = server.holdNext(`${prefix}default:hung`);
    const error = await rejection(send(alice, { key: "hung" }));
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(String((error as Error).cause)).toMatch(/within 100 ms \(commandTimeoutMs\)/);
    expect(sent).toEqual([]);
    await hung.held;
    await hung.deliver();
  });

  it("never lets a claim land after the release its caller sent next: a repeat runs the tool once", async () => {
    const { store, prefix, direct } = await upstashStore({ commandTimeoutMs: 100 });
    const { send, sent } = emailTool({ store, clock: systemClock, waitMs: 0 });
    // The claim waits in the network past the store's deadline; the core's release, a request of its own,
    // overtakes it.
    const late = server.holdNext(`${prefix}default:late`);
    const error = await rejection(send(alice, { key: "late" }));
    expect(error).toBeInstanceOf(StoreUnavailableError);
    await late.held;
    await eventually(
      async () => (await admin.exists(`${prefix}default:late:[released]`)) === 1,
      "the core's release has reached Redis",
    );
    // Then the claim arrives, and is refused: nobody would stand behind it.
    await late.deliver();
    expect(await direct.get({ scope: "default", key: "late" }, Date.now())).toBeUndefined();
    expect(await send(alice, { key: "late" })).toMatchObject({ was_replay: false });
    expect(await send(alice, { key: "late" })).toMatchObject({ was_replay: true });
    expect(sent).toEqual([alice]);
  });

  it("answers every release on a key, past 128 in a day, and a late claim of each released token stays out", async () => {
    const { store, prefix, direct } = await upstashStore();
    const id = { scope: "tenant-a", key: "busy" };
    const tokens = Array.from({ length: 200 }, (_, i) => `given-up-${i}`);
    for (const token of tokens) {
      // A claim that landed with its reply lost, as far as the caller knows, and the release it sends next.
      expect((await store.claim(claimRequest({ ...id, token }))).claimed).toBe(true);
      expect(await store.release({ ...id, token }), token).toBe(true);
    }
    expect(await admin.zcard(`${prefix}tenant-a:busy:[released]`)).toBe(tokens.length);
    // Then copies of those claims arrive, the oldest first among them: none lands.
    for (const token of [tokens[0]!, tokens[1]!, tokens[127]!, tokens[128]!, tokens[199]!]) {
      await expect(store.claim(claimRequest({ ...id, token })), token).rejects.toThrow(/released/);
    }
    expect(await direct.get(id, Date.now())).toBeUndefined();
    expect((await store.claim(claimRequest({ ...id, token: "a-new-call" }))).claimed).toBe(true);
  });

  it("resends a request whose reply was lost, and the tool runs once", async () => {
    const own = await ownServer();
    const { store, prefix } = await upstashStore({ through: own });
    const { send, sent } = emailTool({ store, clock: systemClock });
    await send(alice, { key: "warm-up" });
    const before = own.requests;
    const lost = own.dropReplyTo(`${prefix}default:resent`);
    expect(await send(alice, { key: "resent" })).toMatchObject({ was_replay: false });
    await lost;
    // The claim twice (the second finds the caller's own record), then the settle.
    expect(own.requests - before).toBe(3);
    expect(sent).toEqual([alice, alice]);
  });

  it("sends the claims of one tick in one request when the client pipelines automatically (its default)", async () => {
    const measure = async (enableAutoPipelining: boolean) => {
      const own = await ownServer();
      const { store } = await upstashStore({ client: { enableAutoPipelining }, through: own });
      await store.claim(claimRequest({ key: "warm-up" }));
      const before = own.requests;
      const claims = await Promise.all(
        Array.from({ length: 32 }, (_, i) => store.claim(claimRequest({ key: `k-${i}`, token: `t-${i}` }))),
      );
      expect(claims.every((claim) => claim.claimed)).toBe(true);
      return own.requests - before;
    };
    expect(await measure(true)).toBe(1);
    expect(await measure(false)).toBe(32);
  });

  it("fails closed within commandTimeoutMs when nothing answers at the REST URL (the client retries)", async () => {
    const prefix = await fresh();
    const closed = await upstashRestServer(backend);
    await closed.close();
    const client = new Redis({ url: closed.url, token: closed.token, enableTelemetry: false });
    const { send, sent } = emailTool({
      store: redisStore({ client, prefix, commandTimeoutMs: 300 }),
      clock: systemClock,
    });
    const error = await rejection(send(alice, { key: "nobody" }));
    expect(isIdempotencyError(error, "store_unavailable")).toBe(true);
    expect(sent).toEqual([]);
  });
});

describe("the Upstash REST fixture", () => {
  it("answers commands, pipelines, transactions, encodings and errors as Upstash documents them", async () => {
    const prefix = await fresh();
    const post = async (path: string, body: unknown, headers: Record<string, string> = {}) => {
      const response = await fetch(`${server.url}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${server.token}`, ...headers },
        body: JSON.stringify(body),
      });
      return [response.status, await response.json()];
    };
    expect(await post("/", ["SET", `${prefix}a`, "x"])).toEqual([200, { result: "OK" }]);
    expect(await post("/", ["GET", `${prefix}a`], { "upstash-encoding": "base64" })).toEqual([
      200,
      { result: "eA==" },
    ]);
    expect(await post("/", ["INCR", `${prefix}a`])).toEqual([
      400,
      { error: "ERR value is not an integer or out of range" },
    ]);
    expect(
      await post("/pipeline", [
        ["SET", `${prefix}b`, 1],
        ["INCR", `${prefix}a`],
        ["INCR", `${prefix}b`],
      ]),
    ).toEqual([
      200,
      [{ result: "OK" }, { error: "ERR value is not an integer or out of range" }, { result: 2 }],
    ]);
    expect(
      await post("/multi-exec", [
        ["INCR", `${prefix}b`],
        ["GET", `${prefix}b`],
      ]),
    ).toEqual([200, [{ result: 3 }, { result: "3" }]]);
    expect(await post("/multi-exec", [["NOSUCHCOMMAND"]])).toEqual([
      400,
      { error: expect.stringMatching(/^EXECABORT/) },
    ]);
    expect(await post("/", ["GET", `${prefix}a`], { authorization: "Bearer wrong" })).toEqual([
      401,
      { error: "Unauthorized" },
    ]);
  });
});
