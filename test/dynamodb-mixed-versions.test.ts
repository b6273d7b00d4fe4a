/**
 * A fleet mid-deploy: workers still on an earlier build's dynamoStore (frozen in
 * test/fixtures/dynamodb-earlier) and workers on this version share one table. This version reads every item
 * the earlier build wrote and rewrites one in its own form before writing to it; the earlier build refuses
 * every item in this form (its conditions do not hold on
 * attributes it does not know, and it throws on reading one): it may fail, but never claims over a record
 * of this version, settles or takes one over, or replays one wrongly (docs/stores.md, "Upgrading from earlier builds").
 */
import { type DynamoDBClient, GetItemCommand } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type IdempotencyRecord,
  type IdempotencyStore,
  type RecordId,
  recordIdText,
} from "../src/core/store.js";
import { dynamoStore } from "../src/dynamodb/index.js";
import { claimRequest, settleRequest } from "./fixtures/claim-request.js";
import { type Dynalite, startDynalite } from "./fixtures/dynalite.js";
import { dynamoStore as earlierDynamoStore } from "./fixtures/dynamodb-earlier/dynamo-store.js";

let db: Dynalite;
let client: DynamoDBClient;
beforeAll(async () => {
  db = await startDynalite();
  client = db.client();
});
afterAll(() => db?.close());

async function stores() {
  const table = await db.table("mixed");
  return {
    old: earlierDynamoStore({ client, table, clockSkewMarginMs: 0 }) as IdempotencyStore,
    current: dynamoStore({ client, table, clockSkewMarginMs: 0 }),
  };
}

const hour = 3_600_000;
const day = 24 * hour;
const id = (key: string): RecordId => ({ scope: "tenant-a", key });
const token = (n: number) => n.toString(16).padStart(32, "0");

/** One record of each status, in progress to unknown, written by `store` under keys named for them. */
async function everyStatus(store: IdempotencyStore): Promise<Record<string, IdempotencyRecord>> {
  const now = Date.now();
  const records: Record<string, IdempotencyRecord> = {};
  const outcomes = [
    ["in_progress", null],
    ["completed", { result: '{"id":"msg_1"}', error: null }],
    ["failed", { result: null, error: '{"message":"declined"}' }],
    ["unknown", { result: null, error: '{"message":"crashed"}' }],
  ] as const;
  for (const [i, [status, outcome]] of outcomes.entries()) {
    const claim = claimRequest({ ...id(status), token: token(i + 1), now });
    const claimed = await store.claim(claim);
    expect(claimed.claimed).toBe(true);
    records[status] = outcome
      ? ((await store.settle(
          settleRequest({ ...id(status), token: claim.token, status, ...outcome, now }),
        )) ?? expect.fail(`${status}: settle refused`))
      : claimed.record;
  }
  return records;
}

describe("this version on a table an earlier build's workers wrote", () => {
  it("reads every status the earlier build wrote as that build does, and a claim of its key finds it", async () => {
    const { old, current } = await stores();
    const written = await everyStatus(old);
    for (const [status, record] of Object.entries(written)) {
      expect(await current.get(id(status), Date.now()), status).toEqual(record);
      expect(await current.get(id(status), Date.now()), status).toEqual(
        await old.get(id(status), Date.now()),
      );
      const found = await current.claim(claimRequest({ ...id(status), token: token(99) }));
      expect(found, status).toMatchObject({ claimed: false, record });
    }
  });

  it("claims over the earlier build's tombstone and expired record, never with a token it released", async () => {
    const { old, current } = await stores();
    await old.claim(claimRequest({ ...id("released"), token: token(1) }));
    expect(await old.release({ ...id("released"), token: token(1) })).toBe(true);
    await expect(current.claim(claimRequest({ ...id("released"), token: token(1) }))).rejects.toThrow(
      /released before it arrived/,
    );
    const over = await current.claim(claimRequest({ ...id("released"), token: token(2) }));
    expect(over.claimed).toBe(true);
    expect(await current.get(id("released"), Date.now())).toEqual(over.record);

    await old.claim(
      claimRequest({ ...id("expired"), token: token(3), now: Date.now() - 3 * hour, ttlMs: hour }),
    );
    const again = await current.claim(claimRequest({ ...id("expired"), token: token(4) }));
    expect(again.claimed).toBe(true);
    // The old worker, past its lease and window, is fenced out.
    expect(await old.settle(settleRequest({ ...id("expired"), token: token(3) }))).toBeNull();
    expect(await current.get(id("expired"), Date.now())).toEqual(again.record);
  });

  it("takes over an earlier build's lapsed lease, and fences that worker out", async () => {
    const { old, current } = await stores();
    const t0 = Date.now() - 2 * 60_000;
    await old.claim(claimRequest({ ...id("lapsed"), token: token(1), now: t0 }));
    const taken = await current.takeover({
      ...id("lapsed"),
      fromToken: token(1),
      token: token(2),
      leaseMs: 60_000,
      ttlMs: hour,
      now: Date.now(),
    });
    expect(taken).toMatchObject({ token: token(2), status: "in_progress", attempts: 2 });
    expect(await old.settle(settleRequest({ ...id("lapsed"), token: token(1) }))).toBeNull();
    expect(
      await old.renew({ ...id("lapsed"), token: token(1), leaseMs: 60_000, ttlMs: hour, now: Date.now() }),
    ).toBe(false);
    const settled = await current.settle(settleRequest({ ...id("lapsed"), token: token(2) }));
    expect(settled).toMatchObject({ status: "completed", attempts: 2, result: '{"id":"msg_1"}' });
    expect(await current.get(id("lapsed"), Date.now())).toEqual(settled);
  });

  it("keeps the tokens the earlier build released on another's record, through claims, releases and a delete", async () => {
    const { old, current } = await stores();
    await old.claim(claimRequest({ ...id("held"), token: token(1) }));
    // A claim by token 2 that lost its answer, released by its caller on the earlier build while token 1 holds the key.
    expect(await old.release({ ...id("held"), token: token(2) })).toBe(false);
    expect(await current.release({ ...id("held"), token: token(3) })).toBe(false);
    expect(await current.delete(id("held"))).toBe(true);
    for (const late of [token(2), token(3)]) {
      await expect(current.claim(claimRequest({ ...id("held"), token: late })), late).rejects.toThrow(
        /released before it arrived/,
      );
    }
    expect((await current.claim(claimRequest({ ...id("held"), token: token(4) }))).claimed).toBe(true);
  });

  it("purges the earlier build's expired records, and keeps the tombstone of one whose key keeps released tokens", async () => {
    const { old, current } = await stores();
    const past = Date.now() - 3 * hour;
    for (const key of ["a", "b"]) {
      await old.claim(claimRequest({ ...id(key), token: token(1), now: past, ttlMs: hour }));
      await old.settle(settleRequest({ ...id(key), token: token(1), now: past, ttlMs: hour }));
    }
    await old.release({ ...id("b"), token: token(2) });
    expect(await current.purge({ now: Date.now(), limit: 100 })).toEqual({ deleted: 2 });
    expect(await current.list({ limit: 100 })).toEqual({ records: [] });
    await expect(current.claim(claimRequest({ ...id("b"), token: token(2) }))).rejects.toThrow(
      /released before it arrived/,
    );
  });
});

describe("an earlier build's worker on items this version wrote", () => {
  it("never claims, settles, renews, takes over or releases them, and fails closed on reading them", async () => {
    const { old, current } = await stores();
    const written = await everyStatus(current);
    await current.claim(claimRequest({ ...id("tombstone"), token: token(7) }));
    await current.release({ ...id("tombstone"), token: token(7) });
    const later = Date.now() + 3 * 86_400_000;
    for (const key of [...Object.keys(written), "tombstone"]) {
      // However late: this version's records are expired by then, and the earlier build still does not claim them.
      for (const now of [Date.now(), later]) {
        const claim = old.claim(claimRequest({ ...id(key), token: token(50), now }));
        await expect(claim, key).rejects.toThrow(/not an idempotool record/);
      }
      await expect(old.get(id(key), Date.now()), key).rejects.toThrow(/not an idempotool record/);
    }
    for (const [status, record] of Object.entries(written)) {
      const own = { ...id(status), token: record.token };
      expect(
        await old.settle(settleRequest({ ...own, status: "completed", result: "wrong" })),
        status,
      ).toBeNull();
      expect(await old.renew({ ...own, leaseMs: 60_000, ttlMs: hour, now: Date.now() }), status).toBe(false);
      const takeover = { ...id(status), fromToken: record.token, token: token(51), leaseMs: 1, ttlMs: hour };
      expect(await old.takeover({ ...takeover, now: later }), status).toBeNull();
      await expect(old.release(own), status).rejects.toThrow(/not an idempotool record/);
    }
    expect(await old.purge({ now: later, limit: 100 })).toEqual({ deleted: 0 });
    // Every record is as this version wrote it.
    for (const [status, record] of Object.entries(written))
      expect(await current.get(id(status), Date.now()), status).toEqual(record);
    await expect(current.claim(claimRequest({ ...id("tombstone"), token: token(7) }))).rejects.toThrow(
      /released before it arrived/,
    );
  });
});

/** A client that holds back the first command `pause` matches until `open()`; `hit` says it arrived. */
function gatedClient() {
  let arrived: () => void = () => {};
  let opened: () => void = () => {};
  const hit = new Promise<void>((resolve) => (arrived = resolve));
  const gate = new Promise<void>((resolve) => (opened = resolve));
  let pause: ((command: { input?: Record<string, unknown> }) => boolean) | undefined;
  return {
    client: {
      async send(command: object) {
        if (pause?.(command as { input?: Record<string, unknown> })) {
          pause = undefined;
          arrived();
          await gate;
        }
        return client.send(command as never);
      },
    },
    pauseOn(matches: (command: { input?: Record<string, unknown> }) => boolean) {
      pause = matches;
    },
    hit,
    open: () => opened(),
  };
}

/** The key's item as DynamoDB holds it. */
async function itemOf(table: string, key: RecordId) {
  const { Item } = await client.send(
    new GetItemCommand({
      TableName: table,
      Key: { pk: { S: recordIdText(key.scope, key.key) } },
      ConsistentRead: true,
    }),
  );
  return Item;
}

describe("an earlier build's live claim beside this version", () => {
  it("stays its owner's to renew and settle when this version releases another token on the key", async () => {
    const { old, current } = await stores();
    expect((await old.claim(claimRequest({ ...id("live"), token: token(1) }))).claimed).toBe(true);
    // Another caller, on this version, whose claim's answer was lost releases its own token.
    expect(await current.release({ ...id("live"), token: token(2) })).toBe(false);
    expect(
      await old.renew({ ...id("live"), token: token(1), leaseMs: 60_000, ttlMs: day, now: Date.now() }),
    ).toBe(true);
    expect(await old.settle(settleRequest({ ...id("live"), token: token(1) }))).not.toBeNull();
    await expect(current.claim(claimRequest({ ...id("live"), token: token(2) }))).rejects.toThrow(
      /released before it arrived/,
    );
  });

  it("stays its owner's when this version's takeover is refused because the lease is live", async () => {
    const { old, current } = await stores();
    await old.claim(claimRequest({ ...id("live"), token: token(1) }));
    const takeover = { ...id("live"), fromToken: token(1), token: token(2), leaseMs: 60_000, ttlMs: day };
    expect(await current.takeover({ ...takeover, now: Date.now() })).toBeNull();
    expect(await old.settle(settleRequest({ ...id("live"), token: token(1) }))).not.toBeNull();
  });

  it("stays its owner's when a purge that found the key's old record expired meets the new claim", async () => {
    const table = await db.table("mixed");
    const gated = gatedClient();
    const old = earlierDynamoStore({ client, table, clockSkewMarginMs: 0 }) as IdempotencyStore;
    const purger = dynamoStore({ client: gated.client, table, clockSkewMarginMs: 0 });
    const past = Date.now() - 3 * hour;
    await old.claim(claimRequest({ ...id("k"), token: token(1), now: past, ttlMs: hour }));
    await old.settle(settleRequest({ ...id("k"), token: token(1), now: past, ttlMs: hour }));
    // The purge's scan found the expired record; it is held before it reads the item whole.
    gated.pauseOn((command) => command.constructor.name === "GetItemCommand");
    const purge = purger.purge({ now: Date.now(), limit: 100 });
    await gated.hit;
    expect((await old.claim(claimRequest({ ...id("k"), token: token(2) }))).claimed).toBe(true);
    gated.open();
    expect(await purge).toEqual({ deleted: 0 });
    expect(
      await old.renew({ ...id("k"), token: token(2), leaseMs: 60_000, ttlMs: day, now: Date.now() }),
    ).toBe(true);
    expect(await old.settle(settleRequest({ ...id("k"), token: token(2) }))).not.toBeNull();
  });
});

/**
 * One table, an earlier build's store and this version's. `before` runs on the earlier build's; then an
 * earlier build's release of `releasedToken` on key "k", which found another caller's item, is held before
 * the write that keeps the token there (it read the item already) until `open()`, which resolves as the
 * release does.
 */
async function heldEarlierRelease(releasedToken: string, before: (old: IdempotencyStore) => Promise<void>) {
  const table = await db.table("mixed");
  const gated = gatedClient();
  const old = earlierDynamoStore({ client, table, clockSkewMarginMs: 0 }) as IdempotencyStore;
  const current = dynamoStore({ client, table, clockSkewMarginMs: 0 });
  await before(old);
  const releaser = earlierDynamoStore({
    client: gated.client,
    table,
    clockSkewMarginMs: 0,
  }) as IdempotencyStore;
  gated.pauseOn((command) => String(command.input?.UpdateExpression).startsWith("SET #releasedUntil"));
  const release = releaser.release({ ...id("k"), token: releasedToken });
  await gated.hit;
  return {
    table,
    old,
    current,
    open: () => {
      gated.open();
      return release;
    },
  };
}

describe("tokens released on a key that both versions write", () => {
  it("keeps both tokens when an earlier build's release and this version's race on its record", async () => {
    const { table, current, open } = await heldEarlierRelease(token(2), async (old) => {
      await old.claim(claimRequest({ ...id("k"), token: token(1), ttlMs: 3 * day }));
    });
    expect(await current.release({ ...id("k"), token: token(3) })).toBe(false);
    expect(await open()).toBe(false);
    expect((await itemOf(table, id("k")))?.released?.SS?.sort()).toEqual([token(2), token(3)]);
    // Once the holder's claim is released too, neither late claim lands.
    expect(await current.release({ ...id("k"), token: token(1) })).toBe(true);
    for (const late of [token(2), token(3)]) {
      await expect(current.claim(claimRequest({ ...id("k"), token: late })), late).rejects.toThrow(
        /released before it arrived/,
      );
    }
  });

  it("keeps a token this version released when an earlier build's release read the item before the rewrite", async () => {
    // A record of an earlier build kept three days (its ttl more than a day ahead), with no released tokens
    // yet; settled, so this version may rewrite it. The held release of token 2 read it in that form.
    const { table, current, open } = await heldEarlierRelease(token(2), async (old) => {
      await old.claim(claimRequest({ ...id("k"), token: token(1), ttlMs: 3 * day }));
      await old.settle(settleRequest({ ...id("k"), token: token(1), ttlMs: 3 * day }));
    });
    // Meanwhile an operator deletes the record with this version, and this version releases token 3.
    expect(await current.delete(id("k"))).toBe(true);
    expect(await current.release({ ...id("k"), token: token(3) })).toBe(false);
    // The earlier build's release fails (it finds an item it cannot read) or keeps token 3 beside its own.
    await open().catch(() => undefined);
    expect((await itemOf(table, id("k")))?.rt?.SS).toEqual([token(3)]);
    for (const late of [token(2), token(3)]) {
      await expect(current.claim(claimRequest({ ...id("k"), token: late })), late).rejects.toThrow(
        /released before it arrived/,
      );
    }
    // A claim made since, and an operator's delete of it, keep both sets.
    expect((await current.claim(claimRequest({ ...id("k"), token: token(4) }))).claimed).toBe(true);
    expect(await current.delete(id("k"))).toBe(true);
    await expect(current.claim(claimRequest({ ...id("k"), token: token(2) }))).rejects.toThrow(
      /released before it arrived/,
    );
  });

  for (const removal of ["delete", "purge"] as const) {
    it(`keeps the item on ${removal} when only an earlier build's late release marked it`, async () => {
      const { table, current, open } = await heldEarlierRelease(token(2), async (old) => {
        await old.claim(claimRequest({ ...id("k"), token: token(1), ttlMs: 3 * day }));
        await old.settle(settleRequest({ ...id("k"), token: token(1), ttlMs: 3 * day }));
      });
      // The record goes, and this version claims the key anew (expired by the purge's time); then the held
      // release lands on it: a record in this form whose only released set is the earlier build's.
      expect(await current.delete(id("k"))).toBe(true);
      const claim =
        removal === "purge"
          ? claimRequest({ ...id("k"), token: token(4), now: Date.now() - 3 * hour, ttlMs: hour })
          : claimRequest({ ...id("k"), token: token(4), ttlMs: 3 * day });
      expect((await current.claim(claim)).claimed).toBe(true);
      expect(await open()).toBe(false);
      const marked = await itemOf(table, id("k"));
      expect({ s: marked?.s?.S, ru: marked?.ru, releasedUntil: marked?.releasedUntil?.N }).toEqual({
        s: "p",
        ru: undefined,
        releasedUntil: expect.any(String),
      });
      if (removal === "delete") expect(await current.delete(id("k"))).toBe(true);
      else expect(await current.purge({ now: Date.now(), limit: 100 })).toEqual({ deleted: 1 });
      // The record went; the item stays, as a tombstone keeping the token.
      expect(await current.get(id("k"), Date.now())).toBeUndefined();
      expect((await itemOf(table, id("k")))?.s?.S).toBe("r");
      await expect(current.claim(claimRequest({ ...id("k"), token: token(2) }))).rejects.toThrow(
        /released before it arrived/,
      );
      expect((await current.claim(claimRequest({ ...id("k"), token: token(5) }))).claimed).toBe(true);
    });
  }
});
