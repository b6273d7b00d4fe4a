// redisStore on a Valkey GLIDE client (GlideClient from @valkey/valkey-glide): the same store, its commands
// sent through customCommand. The conformance suite runs on it, records are shared with ioredis stores, and
// what GLIDE does in an outage, or answers in a shape of its own, fails closed.

import {
  ClientSideCache,
  ClosingError,
  Decoder,
  GlideClient,
  type GlideClusterClient,
  ProtocolVersion,
  RequestError,
  TimeoutError,
} from "@valkey/valkey-glide";
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from "vitest";
import { idempotent, isIdempotencyError } from "../src/index.js";
import {
  type GlideClientLike,
  type RedisStore,
  type RedisStoreOptions,
  redisStore,
} from "../src/redis/index.js";
import { recordName } from "../src/redis/record-key.js";
import { fakeClock, storeConformanceCases } from "../src/testing/index.js";
import { claimRequest } from "./fixtures/claim-request.js";
import { glideTestClient } from "./fixtures/glide-helpers.js";
import { dropPrefix, redisUrl } from "./fixtures/redis-helpers.js";
import { redisTestFile } from "./fixtures/redis-test-file.js";

const { client: ioredis, fresh } = redisTestFile("glide");

const DAY = 86_400_000;

let glide: GlideClient;
let resp2: GlideClient;
beforeAll(async () => {
  glide = await glideTestClient(new URL(redisUrl));
  resp2 = await glideTestClient(new URL(redisUrl), { protocol: ProtocolVersion.RESP2 });
});
afterAll(() => {
  glide?.close();
  resp2?.close();
});

// GLIDE speaks RESP3 unless told otherwise; the store's scripts never switch protocol, so both read alike.
for (const [label, client] of [
  ["RESP3, GLIDE's default", () => glide],
  ["RESP2", () => resp2],
] as const) {
  describe(`redisStore on a GLIDE client (${label}): conformance (clock: request)`, () => {
    for (const c of storeConformanceCases({
      name: `redis (glide, ${label})`,
      create: async () => {
        const prefix = await fresh("conformance");
        return {
          store: redisStore({ client: client(), prefix, clock: "request" }),
          clock: fakeClock(Date.now() + 30 * DAY),
          cleanup: () => dropPrefix(ioredis, prefix),
        };
      },
    })) {
      it(c.name, c.run);
    }
  });
}

describe("redisStore on a GLIDE client", () => {
  it("claims on the server's clock and shares records with an ioredis store", async () => {
    const prefix = await fresh();
    const viaGlide = redisStore({ client: glide, prefix });
    const viaIoredis = redisStore({ client: ioredis, prefix });
    expect(viaGlide.client).toBe(glide);

    let runs = 0;
    const tool = async (args: { to: string }) => {
      runs++;
      return { sent: args.to };
    };
    const a = idempotent(tool, { name: "send_email", store: viaGlide });
    const b = idempotent(tool, { name: "send_email", store: viaIoredis });
    // Callers on both clients at once, on one key: one runs, every other gets its outcome.
    const outcomes = await Promise.all(
      Array.from({ length: 16 }, (_, i) => (i % 2 === 0 ? a : b)({ to: "bob" }, { key: "turn-1" })),
    );
    expect(runs).toBe(1);
    expect(outcomes.filter((o) => !o.was_replay)).toHaveLength(1);
    for (const o of outcomes) expect(o.result).toEqual({ sent: "bob" });
    expect(await viaGlide.get({ scope: "default", key: "turn-1" }, Date.now())).toEqual(
      await viaIoredis.get({ scope: "default", key: "turn-1" }, Date.now()),
    );
  });

  it("fences a settle by the owner token, and replays a record an ioredis store settled", async () => {
    const prefix = await fresh();
    const store = redisStore({ client: glide, prefix });
    const viaIoredis = redisStore({ client: ioredis, prefix });
    const now = Date.now();
    expect((await store.claim(claimRequest({ key: "fenced", now }))).claimed).toBe(true);
    const foreign = {
      scope: "tenant-a",
      key: "fenced",
      token: "token-b",
      status: "completed" as const,
      result: JSON.stringify({ sent: "bob", note: "héllo 😀" }),
      error: null,
      ttlMs: DAY,
      now,
    };
    expect(await store.settle(foreign)).toBeNull();
    const settled = await store.settle({ ...foreign, token: "token-a" });
    expect(settled?.status).toBe("completed");
    expect(await store.settle({ ...foreign, token: "token-a" })).toBeNull();
    for (const s of [store, viaIoredis]) {
      const again = await s.claim(claimRequest({ key: "fenced", token: "token-c", now: Date.now() }));
      expect(again.claimed).toBe(false);
      expect(again.record).toEqual(settled);
    }
  });

  it("reads its replies as text on a client whose default decoder gives Buffers", async () => {
    const prefix = await fresh();
    const bytes = await glideTestClient(new URL(redisUrl), { defaultDecoder: Decoder.Bytes });
    try {
      const store = redisStore({ client: bytes, prefix });
      const tool = idempotent(async () => ({ sent: "ünïcode" }), { name: "send_email", store });
      const first = await tool({}, { key: "k" });
      expect(await tool({}, { key: "k" })).toMatchObject({ result: first.result, was_replay: true });
      expect((await store.list({})).records.map((r) => r.key)).toEqual(["k"]);
    } finally {
      bytes.close();
    }
  });

  it("refuses a client with compression, which would store records its scripts cannot read", async () => {
    const compressing = await glideTestClient(new URL(redisUrl), { compression: { enabled: true } });
    try {
      expect(() => redisStore({ client: compressing })).toThrow(
        expect.objectContaining({ code: "invalid_options", message: expect.stringContaining("compression") }),
      );
    } finally {
      compressing.close();
    }
  });

  it("sees what another client wrote, on a client with a client-side cache", async () => {
    const prefix = await fresh();
    const cached = await glideTestClient(new URL(redisUrl), {
      clientSideCache: ClientSideCache.create(1024, 0),
    });
    try {
      const store = redisStore({ client: cached, prefix });
      const viaIoredis = redisStore({ client: ioredis, prefix });
      const id = { scope: "tenant-a", key: "order-1" };
      for (let round = 0; round < 2; round++) {
        expect((await store.claim(claimRequest({ token: `t-${round}` }))).claimed).toBe(true);
        expect((await store.get(id, Date.now()))?.token).toBe(`t-${round}`);
        expect((await store.list({})).records.map((r) => r.token)).toEqual([`t-${round}`]);
        // Gone by another client's hand: this one must not answer from a cache.
        expect(await viaIoredis.delete(id)).toBe(true);
        expect(await store.get(id, Date.now())).toBeUndefined();
        expect((await store.list({})).records).toEqual([]);
      }
    } finally {
      cached.close();
    }
  });

  it("sends a script whole again after Redis forgot it (SCRIPT FLUSH)", async () => {
    const prefix = await fresh();
    const store = redisStore({ client: glide, prefix, clock: "request" });
    expect((await store.claim(claimRequest({ key: "before" }))).claimed).toBe(true);
    await glide.customCommand(["SCRIPT", "FLUSH"]);
    expect((await store.claim(claimRequest({ key: "after" }))).claimed).toBe(true);
    expect((await store.claim(claimRequest({ key: "after", token: "token-b" }))).claimed).toBe(false);
  });

  it("lists and purges through SCAN on it", async () => {
    const prefix = await fresh();
    const store = redisStore({ client: glide, prefix, clock: "request" });
    const now = Date.now();
    for (const key of ["k1", "k2", "k3"]) await store.claim(claimRequest({ key, now, ttlMs: 1_000 }));
    expect((await store.list({})).records.map((r) => r.key)).toEqual(["k1", "k2", "k3"]);
    expect((await store.purge!({ now: now + 120_000 })).deleted).toBe(3);
    expect((await store.list({})).records).toEqual([]);
  });

  it("fails closed, as store_unavailable, when the client cannot reach Redis or was closed", async () => {
    const prefix = await fresh();
    // Nothing listens on port 1: GLIDE gives up on its request timeout (a TimeoutError or a RequestError).
    const unreachable = await GlideClient.createClient({
      addresses: [{ host: "127.0.0.1", port: 1 }],
      lazyConnect: true,
      requestTimeout: 200,
      advancedConfiguration: { connectionTimeout: 200 },
    });
    const closed = await glideTestClient(new URL(redisUrl));
    closed.close();
    try {
      for (const client of [unreachable, closed]) {
        let ran = false;
        const tool = idempotent(
          async () => {
            ran = true;
            return "ran";
          },
          { name: "send_email", store: redisStore({ client, prefix }) },
        );
        const error = await tool({}, { key: "k" }).catch((e: unknown) => e);
        expect(isIdempotencyError(error) && error.code).toBe("store_unavailable");
        expect(ran).toBe(false);
      }
    } finally {
      unreachable.close();
    }
  });

  it("fails closed on GLIDE's own TimeoutError and ClosingError", async () => {
    for (const error of [new TimeoutError("timed out"), new ClosingError("closed")]) {
      const failing = fakeGlide(() => Promise.reject(error));
      const tool = idempotent(async () => "ran", {
        name: "send_email",
        store: redisStore({ client: failing }),
      });
      const thrown = await tool({}, { key: "k" }).catch((e: unknown) => e);
      expect(isIdempotencyError(thrown) && thrown.code).toBe("store_unavailable");
    }
  });

  // A made-up client, only to inject replies a real Redis never gives the store's commands.
  it("refuses a reply of a shape it does not know, rather than read it as claimed or refused", async () => {
    const id = { scope: "tenant-a", key: "order-1" };
    for (const reply of [Buffer.from("0"), 1n, true, new Map([["a", 1]]), 1.5, [Buffer.from("x")]]) {
      const store = redisStore({ client: fakeGlide(async () => reply) });
      await expect(store.claim(claimRequest({ key: id.key })), String(reply)).rejects.toThrow(
        /unexpected shape/,
      );
      await expect(store.release({ ...id, token: "t" })).rejects.toThrow(/unexpected shape/);
      await expect(store.list({})).rejects.toThrow(/unexpected shape/);
    }
  });

  // GLIDE words Redis's errors its own way; a made-up client injects two as GLIDE gives them.
  it("reads GLIDE's wording of a syntax error (Redis before 7.0) as one, and claims by script from then on", async () => {
    const sent: string[] = [];
    const store = redisStore({
      client: fakeGlide(async ([command]) => {
        sent.push(command!);
        if (command === "SET")
          throw new RequestError("An error was signalled by the server: - ResponseError: syntax error");
        // The claim script's answer for a key it claimed: the server's time.
        return 1_767_000_000_000;
      }),
    });
    expect((await store.claim(claimRequest({ key: "first" }))).claimed).toBe(true);
    expect((await store.claim(claimRequest({ key: "second" }))).claimed).toBe(true);
    expect(sent).toEqual(["SET", "EVAL", "EVALSHA"]);
  });

  it("claims with SET … PX … NX GET spelled out, never through GLIDE's own set options", async () => {
    const sent: string[][] = [];
    const store = redisStore({
      client: fakeGlide(async (args) => {
        sent.push(args);
        return null;
      }),
    });
    const request = claimRequest({ key: "order-1" });
    expect((await store.claim(request)).claimed).toBe(true);
    expect(sent).toHaveLength(1);
    const [command, name, , px, ms, nx, get] = sent[0]!;
    expect([command, name, px, nx, get]).toEqual([
      "SET",
      recordName(store.prefix, request.scope, request.key),
      "PX",
      "NX",
      "GET",
    ]);
    expect(Number(ms)).toBeGreaterThan(0);
  });
});

describe("redisStore's client type, on GLIDE", () => {
  it("takes a GlideClient and a GlideClusterClient as they are", () => {
    expectTypeOf<GlideClient>().toExtend<RedisStoreOptions["client"]>();
    expectTypeOf<GlideClient>().toExtend<GlideClientLike>();
    expectTypeOf<GlideClusterClient>().toExtend<GlideClientLike>();
    expectTypeOf(redisStore({ client: glide }).client).toEqualTypeOf<GlideClient>();
    expectTypeOf<RedisStore<GlideClusterClient>["client"]>().toEqualTypeOf<GlideClusterClient>();
    // The store asks for text by Decoder.String's value, without importing GLIDE.
    expect(Decoder.String).toBe(1);
  });
});

/** A GLIDE-shaped client whose every command is answered by `answer`. */
function fakeGlide(
  answer: (args: string[]) => Promise<unknown>,
): GlideClientLike & { invokeScript(): never } {
  return {
    customCommand: (args) => answer(args),
    invokeScript: () => {
      throw new Error("the store never calls invokeScript");
    },
  };
}
