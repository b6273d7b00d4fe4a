import { once } from "node:events";
import net from "node:net";
import {
  type DynamoDBClient,
  GetItemCommand,
  ProvisionedThroughputExceededException,
  ThrottlingException,
} from "@aws-sdk/client-dynamodb";
import { ConfiguredRetryStrategy } from "@smithy/core/retry";
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from "vitest";
import { type DynamoDBClientLike, dynamoStore } from "../src/dynamodb/index.js";
import { idempotent, isIdempotencyError, LeaseLostError } from "../src/index.js";
import { fakeClock, storeConformanceCases } from "../src/testing/index.js";
import { claimRequest } from "./fixtures/claim-request.js";
import { type Dynalite, startDynalite, testClient } from "./fixtures/dynalite.js";

let db: Dynalite;
let client: DynamoDBClient;
beforeAll(async () => {
  db = await startDynalite();
  client = db.client();
});
afterAll(() => db?.close());

const LEASE_MS = 5_000;
const DAY = 86_400_000;

describe("dynamoStore conformance (dynalite, clockSkewMarginMs: 0)", () => {
  for (const c of storeConformanceCases({
    name: "dynamodb",
    claimsMayArriveLate: true,
    create: async () => {
      const table = await db.table("conformance");
      return {
        // The suite judges leases to the millisecond; the margin has tests of its own below.
        store: dynamoStore({ client, table, clockSkewMarginMs: 0 }),
        clock: fakeClock(),
        cleanup: () => db.dropTable(table),
      };
    },
  })) {
    it(c.name, c.run);
  }
});

describe("dynamoStore options and shape", () => {
  it("takes a DynamoDBClient as it is (DynamoDBClientLike is its shape)", async () => {
    expectTypeOf<DynamoDBClient>().toExtend<DynamoDBClientLike>();
    const store = dynamoStore({ client, table: "records" });
    expect(store).toMatchObject({ table: "records", clockSkewMarginMs: 2_000 });
  });

  it("rejects bad options at configuration time, naming the option", () => {
    const bad: [string, () => unknown][] = [
      ["client", () => dynamoStore({ client: {} as DynamoDBClientLike, table: "records" })],
      ["table", () => dynamoStore({ client, table: "ab" })],
      ["table", () => dynamoStore({ client, table: "has space" })],
      ["clockSkewMarginMs", () => dynamoStore({ client, table: "records", clockSkewMarginMs: -1 })],
      ["clockSkewMarginMs", () => dynamoStore({ client, table: "records", clockSkewMarginMs: 1.5 })],
    ];
    for (const [option, build] of bad) {
      expect(build, option).toThrow(expect.objectContaining({ code: "invalid_options" }));
      expect(build, option).toThrow(`\`${option}\``);
    }
  });

  it("runs the example from its documentation", async () => {
    const table = await db.table("example");
    const queued: string[] = [];
    const store = dynamoStore({ client, table });
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
  });

  it("keeps a ttl attribute for DynamoDB's TTL: epoch seconds, no earlier than expiresAt plus the margin", async () => {
    const table = await db.table("ttl");
    const store = dynamoStore({ client, table, clockSkewMarginMs: 1_500 });
    const ttl = async () => {
      const { Item } = await client.send(
        new GetItemCommand({ TableName: table, Key: { pk: { S: `8:tenant-aorder-1` } } }),
      );
      return Number(Item?.ttl?.N);
    };
    const { record } = await store.claim(claimRequest({ now: 4_000_000_000_250 }));
    expect(await ttl()).toBe(Math.ceil((record.expiresAt + 1_500) / 1000));
    // Nor earlier than a day after the write, how long tokens released on the key are kept (see
    // "Released claims and late requests" in docs/stores.md).
    await store.delete({ scope: "tenant-a", key: "order-1" });
    const before = Date.now();
    await store.claim(claimRequest({ now: 1_000_000_250 }));
    expect(await ttl()).toBeGreaterThanOrEqual(Math.ceil((before + DAY + 1_500) / 1000));
  });

  it("refuses an item it did not write rather than guess what it holds", async () => {
    const table = await db.table("foreign");
    const { PutItemCommand } = await import("@aws-sdk/client-dynamodb");
    await client.send(
      new PutItemCommand({ TableName: table, Item: { pk: { S: "8:tenant-aorder-1" }, data: { S: "x" } } }),
    );
    const store = dynamoStore({ client, table });
    await expect(store.claim(claimRequest())).rejects.toThrow(/not an idempotool record/);
    await expect(store.get({ scope: "tenant-a", key: "order-1" }, Date.now())).rejects.toThrow(
      /not an idempotool record/,
    );
  });
});

describe("dynamoStore judges leases by the caller's clock less clockSkewMarginMs", () => {
  const MARGIN = 2_000;

  it("a takeover is refused until the taker's clock passes the lease by more than the margin", async () => {
    const store = dynamoStore({ client, table: await db.table("skew"), clockSkewMarginMs: MARGIN });
    const t0 = Date.parse("2026-06-01T00:00:00Z");
    const claim = await store.claim(claimRequest({ now: t0, leaseMs: LEASE_MS }));
    expect(claim).toMatchObject({ claimed: true, now: t0 - MARGIN });
    const takeover = (now: number) =>
      store.takeover({
        scope: "tenant-a",
        key: "order-1",
        fromToken: "token-a",
        token: "token-b",
        leaseMs: LEASE_MS,
        ttlMs: DAY,
        now,
      });
    // A worker whose clock runs up to the margin ahead, at the last instant of the lease by the owner's.
    for (const aheadMs of [0, 1, MARGIN / 2, MARGIN]) {
      expect(await takeover(t0 + LEASE_MS - 1 + aheadMs), `ahead by ${aheadMs} ms`).toBeNull();
    }
    // Its repeat of the call is told the lease is live.
    const held = await store.claim(claimRequest({ token: "token-b", now: t0 + LEASE_MS - 1 + MARGIN }));
    expect(held.claimed).toBe(false);
    expect(held.record.leaseExpiresAt).toBeGreaterThan(held.now);
    // Beyond the margin the lease is judged passed while the owner may still be inside it: here, a
    // worker 1 ms further ahead takes over at the owner's last millisecond. Set the margin to the skew
    // you must tolerate.
    expect(await takeover(t0 + LEASE_MS - 1 + MARGIN + 1)).toMatchObject({ token: "token-b", attempts: 2 });
  });

  it("a worker whose clock runs the whole margin ahead cannot take over a live call; the owner settles", async () => {
    const table = await db.table("skew-call");
    const t0 = Date.parse("2026-06-01T00:00:00Z");
    const ownerClock = fakeClock(t0);
    let finish!: () => void;
    const holding = new Promise<void>((resolve) => {
      finish = resolve;
    });
    let started!: () => void;
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const runs: string[] = [];
    const options = { name: "charge", effect: "native-key" as const, leaseMs: LEASE_MS };
    const first = idempotent(
      async () => {
        runs.push("owner");
        started();
        await holding;
        return "owner";
      },
      { ...options, store: dynamoStore({ client, table, clockSkewMarginMs: MARGIN }), clock: ownerClock },
    );
    const firstCall = first({}, { key: "k" });
    await running;

    // The owner's lease ends at t0 + LEASE_MS by its clock; this worker's clock reads that instant less
    // 1 ms, plus the whole margin.
    const aheadClock = fakeClock(t0 + LEASE_MS - 1 + MARGIN);
    const ahead = idempotent(
      async () => {
        runs.push("ahead");
        return "ahead";
      },
      {
        ...options,
        waitMs: 0,
        store: dynamoStore({ client, table, clockSkewMarginMs: MARGIN }),
        clock: aheadClock,
      },
    );
    const refused = await ahead({}, { key: "k" }).catch((error: unknown) => error);
    expect(isIdempotencyError(refused, "idempotency_key_in_use")).toBe(true);

    finish();
    expect(await firstCall).toMatchObject({ result: "owner", was_replay: false });
    expect(await ahead({}, { key: "k" })).toMatchObject({ result: "owner", was_replay: true });
    expect(runs).toEqual(["owner"]);
  });

  it("a worker past the lease and the margin takes over a crashed call; the crashed owner is fenced off", async () => {
    const table = await db.table("takeover");
    const store = dynamoStore({ client, table, clockSkewMarginMs: MARGIN });
    const t0 = Date.parse("2026-06-01T00:00:00Z");
    const ownerClock = fakeClock(t0);
    let finish!: () => void;
    const holding = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const runs: string[] = [];
    const options = { name: "charge", effect: "native-key" as const, leaseMs: LEASE_MS, store };
    // The owner hangs and cannot renew (its clock never moves): for the others it crashed.
    const stuck = idempotent(
      async () => {
        runs.push("stuck");
        await holding;
        return "stuck";
      },
      { ...options, clock: ownerClock },
    );
    const stuckCall = stuck({}, { key: "k" }).catch((error: unknown) => error);
    await expect.poll(() => runs).toEqual(["stuck"]);

    const later = idempotent(
      async () => {
        runs.push("later");
        return "later";
      },
      { ...options, clock: fakeClock(t0 + LEASE_MS + MARGIN) },
    );
    expect(await later({}, { key: "k" })).toMatchObject({ result: "later", was_replay: false });
    finish();
    expect(await stuckCall).toBeInstanceOf(LeaseLostError);
    expect(runs).toEqual(["stuck", "later"]);
    expect(await store.get({ scope: "default", key: "k" }, t0 + LEASE_MS + MARGIN)).toMatchObject({
      status: "completed",
      attempts: 2,
      result: '"later"',
    });
  });
});

describe("dynamoStore round trips", () => {
  /** The client, counting what the store sends it. */
  function counted(inner: DynamoDBClientLike = client) {
    const sent: string[] = [];
    const wrapped: DynamoDBClientLike = {
      send(command) {
        sent.push(command.constructor.name.replace(/Command$/, ""));
        return inner.send(command);
      },
    };
    return { wrapped, sent };
  }

  /**
   * DynamoDB itself answers a refused conditional write with the item when asked (ALL_OLD); dynalite
   * does not. This wrapper adds it, read after the refusal, so the store's DynamoDB path can be counted.
   */
  const asDynamoDB: DynamoDBClientLike = {
    async send(command) {
      try {
        return await client.send(command as never);
      } catch (error) {
        const input = (command as { input?: { TableName: string; Key?: object; Item?: { pk: object } } })
          .input;
        const refusal = error as { name?: string; Item?: unknown };
        if (refusal.name === "ConditionalCheckFailedException" && input) {
          const key = input.Key ?? { pk: input.Item!.pk };
          const read = await client.send(
            new GetItemCommand({ TableName: input.TableName, Key: key as never, ConsistentRead: true }),
          );
          refusal.Item = read.Item;
        }
        throw error;
      }
    },
  };

  it("a first call is one claim and one settle; a replay is one claim on DynamoDB, two on dynalite", async () => {
    const table = await db.table("trips");
    const direct = counted();
    const tool = idempotent(async (args: { n: number }) => args.n * 2, {
      name: "double",
      store: dynamoStore({ client: direct.wrapped, table }),
    });
    await tool({ n: 2 }, { key: "k" });
    expect(direct.sent).toEqual(["PutItem", "UpdateItem"]);

    direct.sent.length = 0;
    expect(await tool({ n: 2 }, { key: "k" })).toMatchObject({ result: 4, was_replay: true });
    expect(direct.sent, "dynalite sends no item with a refusal: one consistent read").toEqual([
      "PutItem",
      "GetItem",
    ]);

    const dynamo = counted(asDynamoDB);
    const replaying = idempotent(async (args: { n: number }) => args.n * 2, {
      name: "double",
      store: dynamoStore({ client: dynamo.wrapped, table }),
    });
    expect(await replaying({ n: 2 }, { key: "k" })).toMatchObject({ result: 4, was_replay: true });
    expect(dynamo.sent, "the refusal carries the holder").toEqual(["PutItem"]);
  });

  it("claims with updates when the role may not put (earlier builds' grants), after one refused put", async () => {
    const table = await db.table("trips-no-put");
    // A role granted GetItem, UpdateItem and DeleteItem only, as earlier builds' docs asked for.
    const role: DynamoDBClientLike = {
      send(command) {
        if (command.constructor.name === "PutItemCommand") {
          return Promise.reject(
            Object.assign(new Error("not authorized to perform: dynamodb:PutItem"), {
              name: "AccessDeniedException",
            }),
          );
        }
        return client.send(command as never);
      },
    };
    const { wrapped, sent } = counted(role);
    const tool = idempotent(async (args: { n: number }) => args.n * 2, {
      name: "double",
      store: dynamoStore({ client: wrapped, table }),
    });
    expect(await tool({ n: 2 }, { key: "a" })).toMatchObject({ result: 4, was_replay: false });
    expect(await tool({ n: 3 }, { key: "b" })).toMatchObject({ result: 6, was_replay: false });
    expect(await tool({ n: 3 }, { key: "b" })).toMatchObject({ result: 6, was_replay: true });
    expect(sent.filter((name) => name === "PutItem")).toHaveLength(1);
  });

  it("renew and release are one write each", async () => {
    const table = await db.table("trips-renew");
    const { wrapped, sent } = counted();
    const store = dynamoStore({ client: wrapped, table });
    await store.claim(claimRequest());
    sent.length = 0;
    expect(await store.renew({ ...claimRequest(), now: Date.now() + 1_000 })).toBe(true);
    expect(await store.release({ scope: "tenant-a", key: "order-1", token: "token-a" })).toBe(true);
    expect(sent).toEqual(["UpdateItem", "UpdateItem"]);
  });
});

describe("dynamoStore keeps a released claim from landing late", () => {
  it("a claim that arrives after its release is refused; another caller's claim is not", async () => {
    const store = dynamoStore({ client, table: await db.table("late") });
    const request = claimRequest();
    // The core gave up on this claim (its answer was lost) and released it before DynamoDB saw it.
    expect(await store.release({ scope: request.scope, key: request.key, token: request.token })).toBe(false);
    await expect(store.claim(request)).rejects.toThrow(/released before it arrived/);
    expect(await store.get(request, request.now)).toBeUndefined();
    expect((await store.list({})).records).toEqual([]);
    expect(await store.delete(request), "a tombstone is not a record").toBe(false);

    await store.release({ scope: request.scope, key: request.key, token: request.token });
    const other = await store.claim({ ...request, token: "token-b" });
    expect(other.claimed).toBe(true);
  });

  it("a claim released after it landed leaves nothing a later claim of the same token could take", async () => {
    const store = dynamoStore({ client, table: await db.table("late-after") });
    const request = claimRequest();
    expect((await store.claim(request)).claimed).toBe(true);
    expect(await store.release({ scope: request.scope, key: request.key, token: request.token })).toBe(true);
    // The same claim, resent by the client's retry after the release.
    await expect(store.claim(request)).rejects.toThrow(/released before it arrived/);
    expect(await store.get(request, request.now)).toBeUndefined();
  });
});

describe("dynamoStore when DynamoDB throttles or cannot be reached", () => {
  /**
   * A real client whose first `failures` requests DynamoDB answers with `error` (a middleware inside the
   * SDK's retries injects it), retrying at once.
   */
  function throttled(make: () => Error, failures: number, maxAttempts: number) {
    const throttledClient = db.client({ retryStrategy: new ConfiguredRetryStrategy(maxAttempts, 1) });
    let attempts = 0;
    throttledClient.middlewareStack.add(
      (next) => async (args) => {
        attempts++;
        if (attempts <= failures) throw make();
        return next(args);
      },
      { step: "deserialize", name: "injectThrottling" },
    );
    return { client: throttledClient, attempts: () => attempts };
  }
  const provisioned = () =>
    new ProvisionedThroughputExceededException({
      message: "The level of configured provisioned throughput for the table was exceeded.",
      $metadata: { httpStatusCode: 400 },
    });
  const throttling = () =>
    new ThrottlingException({ message: "Rate of requests exceeds the allowed throughput.", $metadata: {} });

  it("retries throttled requests within the client's budget, and the tool runs once", async () => {
    const table = await db.table("throttle-ok");
    const { client: slow, attempts } = throttled(provisioned, 2, 3);
    let runs = 0;
    const tool = idempotent(async () => ++runs, { name: "t", store: dynamoStore({ client: slow, table }) });
    expect(await tool({}, { key: "k" })).toMatchObject({ result: 1, was_replay: false });
    expect(runs).toBe(1);
    expect(attempts()).toBe(4);
  });

  for (const [name, make] of [
    ["ProvisionedThroughputExceededException", provisioned],
    ["ThrottlingException", throttling],
  ] as const) {
    it(`${name} past the budget is store_unavailable, and the tool does not run`, async () => {
      const table = await db.table("throttle-out");
      const { client: slow, attempts } = throttled(make, Number.POSITIVE_INFINITY, 3);
      let runs = 0;
      const tool = idempotent(async () => ++runs, { name: "t", store: dynamoStore({ client: slow, table }) });
      const error = await tool({}, { key: "k" }).catch((e: unknown) => e);
      expect(isIdempotencyError(error, "store_unavailable")).toBe(true);
      expect((error as Error).cause).toMatchObject({ name });
      expect(runs).toBe(0);
      expect(attempts()).toBeGreaterThanOrEqual(3);
      // Nothing was written: the key is free once DynamoDB answers again.
      expect(
        await dynamoStore({ client, table }).get({ scope: "default", key: "k" }, Date.now()),
      ).toBeUndefined();
    });
  }

  it("an endpoint nobody listens on is store_unavailable, and the tool does not run", async () => {
    const server = net.createServer();
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const { port } = server.address() as net.AddressInfo;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const unreachable = testClient(`http://127.0.0.1:${port}`, { maxAttempts: 1 });
    let runs = 0;
    const tool = idempotent(async () => ++runs, {
      name: "t",
      store: dynamoStore({ client: unreachable, table: "records" }),
    });
    const error = await tool({}, { key: "k" }).catch((e: unknown) => e);
    unreachable.destroy();
    expect(isIdempotencyError(error, "store_unavailable")).toBe(true);
    expect(runs).toBe(0);
  });
});
