/**
 * The tokens of released claims that dynamoStore keeps on a key's item (see "Released claims and late
 * requests" in docs/stores.md): settle, claim and DynamoDB's TTL must neither drop them before their day has
 * passed nor keep them longer than that, and they are bounded. That a late claim stays out after a purge or
 * a delete, and that many releases at once all answer, the conformance suite checks (claimsMayArriveLate).
 */
import { type DynamoDBClient, GetItemCommand, UpdateItemCommand } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordIdText } from "../src/core/store.js";
import { dynamoStore } from "../src/dynamodb/index.js";
import { claimRequest, settleRequest } from "./fixtures/claim-request.js";
import { type Dynalite, startDynalite } from "./fixtures/dynalite.js";

let db: Dynalite;
let client: DynamoDBClient;
beforeAll(async () => {
  db = await startDynalite();
  client = db.client();
});
afterAll(() => db?.close());

const id = { scope: "tenant-a", key: "order-1" };

async function rawItem(table: string) {
  const { Item } = await client.send(
    new GetItemCommand({
      TableName: table,
      Key: { pk: { S: recordIdText(id.scope, id.key) } },
      ConsistentRead: true,
    }),
  );
  return Item;
}

async function setup() {
  const table = await db.table("released");
  return { table, store: dynamoStore({ client, table, clockSkewMarginMs: 0 }) };
}

describe("dynamoStore's released tokens", () => {
  for (const [name, prepare] of [
    [
      "a settle with a short ttlMs",
      async (store: ReturnType<typeof dynamoStore>) => {
        await store.claim(claimRequest({ ttlMs: 60_000 }));
        await store.release({ ...id, token: "token-late" });
        const settled = await store.settle({
          ...id,
          token: "token-a",
          status: "completed",
          result: "{}",
          error: null,
          ttlMs: 60_000,
          now: Date.now(),
        });
        expect(settled).not.toBeNull();
      },
    ],
    [
      "a claim with a short ttlMs over the tombstone",
      async (store: ReturnType<typeof dynamoStore>) => {
        await store.release({ ...id, token: "token-late" });
        expect((await store.claim(claimRequest({ token: "token-b", ttlMs: 60_000 }))).claimed).toBe(true);
      },
    ],
  ] as const) {
    it(`${name} does not hand the item to DynamoDB's TTL before its released tokens' day has passed`, async () => {
      const { table, store } = await setup();
      await prepare(store);
      const item = await rawItem(table);
      const until = Number(item?.ru?.N);
      expect(item?.rt?.SS).toContain("token-late");
      expect(
        Number(item?.ttl?.N) * 1000,
        "DynamoDB may delete the item, tokens and all, from ttl on",
      ).toBeGreaterThanOrEqual(until);
    });
  }

  it("a release on its own claim keeps the tokens of the last day, and drops older ones (the set does not grow without bound)", async () => {
    const { table, store } = await setup();
    await store.claim(claimRequest({ token: "token-b" }));
    await store.release({ ...id, token: "token-late" });
    expect(await store.release({ ...id, token: "token-b" })).toBe(true);
    expect((await rawItem(table))?.rt?.SS?.sort()).toEqual(["token-b", "token-late"]);
    await expect(store.claim(claimRequest({ token: "token-late" }))).rejects.toThrow(
      /released before it arrived/,
    );

    await store.claim(claimRequest());
    await store.release({ ...id, token: "token-old" });
    // A day and more goes by (ru, the tokens' releasedUntil, moved back, as if the release had come then).
    await client.send(
      new UpdateItemCommand({
        TableName: table,
        Key: { pk: { S: recordIdText(id.scope, id.key) } },
        UpdateExpression: "SET ru = :past",
        ExpressionAttributeValues: { ":past": { N: String(Date.now() - 1_000) } },
      }),
    );
    expect(await store.release({ ...id, token: "token-a" })).toBe(true);
    expect((await rawItem(table))?.rt?.SS).toEqual(["token-a"]);
  });
});

describe("dynamoStore keeps every token released within the day", () => {
  it("answers every release on a key, past 128 in a day, and a late claim of each released token stays out", async () => {
    const { store, table } = await setup();
    const tokens = Array.from({ length: 200 }, (_, i) => `given-up-${String(i).padStart(23, "0")}`);
    for (const token of tokens) {
      // A claim that landed with its reply lost, as far as the caller knows, and the release it sends next.
      expect((await store.claim(claimRequest({ token }))).claimed, token).toBe(true);
      expect(await store.release({ ...id, token }), token).toBe(true);
    }
    expect((await rawItem(table))?.rt?.SS).toHaveLength(tokens.length);
    // Then copies of those claims arrive, the oldest first among them: none lands.
    for (const token of [tokens[0]!, tokens[1]!, tokens[127]!, tokens[128]!, tokens[199]!]) {
      await expect(store.claim(claimRequest({ token })), token).rejects.toThrow(/released before it arrived/);
    }
    expect(await store.get(id, Date.now())).toBeUndefined();
    expect((await store.claim(claimRequest({ token: "a-new-call" }))).claimed).toBe(true);
  });

  it("refuses a release the item has no room for, writing nothing, and keeps the record and the tokens it had", async () => {
    const { store, table } = await setup();
    await store.claim(claimRequest());
    // A result that leaves the item room for a few dozen tokens, past what maxStoredResultBytes reserves.
    const result = "x".repeat(400 * 1024 - 3_000);
    expect(await store.settle(settleRequest({ result }))).not.toBeNull();
    const token = (i: number) => `late-${String(i).padStart(59, "0")}`;
    let refused = -1;
    for (let i = 0; i < 200 && refused < 0; i++) {
      try {
        expect(await store.release({ ...id, token: token(i) })).toBe(false);
      } catch (error) {
        expect(String(error)).toMatch(/400 KB limit/);
        refused = i;
      }
    }
    expect(refused, "the item had room for some tokens, and not for 200").toBeGreaterThan(0);
    expect((await rawItem(table))?.rt?.SS).toHaveLength(refused);
    expect((await store.get(id, Date.now()))?.result).toBe(result);
    await expect(
      store.claim(claimRequest({ token: token(0), now: Date.now() + 2 * 86_400_000 })),
    ).rejects.toThrow(/released before it arrived/);
  });

  it("refuses an owner token longer than 64 characters before it writes", async () => {
    const { store, table } = await setup();
    const long = "t".repeat(65);
    await expect(store.claim(claimRequest({ token: long }))).rejects.toThrow(TypeError);
    await expect(store.release({ ...id, token: long })).rejects.toThrow(/1 to 64 characters/);
    expect(await rawItem(table)).toBeUndefined();
  });
});
