/**
 * keys the conformance suite does not try, against dynamoStore: NUL inside a key or
 * scope, case, Unicode normalisation (NFC vs NFD), and the longest scope and key the core lets through
 * (255 UTF-16 units of 3-byte characters each) must each stay distinct records (passes).
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dynamoStore } from "../src/dynamodb/index.js";
import { claimRequest } from "./fixtures/claim-request.js";
import { type Dynalite, startDynalite } from "./fixtures/dynalite.js";

let db: Dynalite;
let client: DynamoDBClient;
beforeAll(async () => {
  db = await startDynalite();
  client = db.client();
});
afterAll(() => db?.close());

describe("dynamoStore keeps hostile keys apart", () => {
  it("NUL, case, normalisation and length variants are distinct records", async () => {
    const store = dynamoStore({ client, table: await db.table("keys"), clockSkewMarginMs: 0 });
    const long = "\u20ac".repeat(255);
    const pairs: [string, string][] = [
      ["tenant-a", "k\u0000one"],
      ["tenant-a", "k\u0000two"],
      ["tenant-a", "k"],
      ["t\u0000x", "k"],
      ["t\u0000y", "k"],
      ["tenant-a", "Order-1"],
      ["tenant-a", "order-1"],
      ["tenant-a", "caf\u00e9"],
      ["tenant-a", "cafe\u0301"],
      [long, long],
      [long, `${long.slice(1)}x`],
    ];
    for (const [i, [scope, key]] of pairs.entries()) {
      const result = await store.claim(claimRequest({ scope, key, token: `token-${i}`, now: 1_000 }));
      expect(result.claimed, `${JSON.stringify([scope.slice(0, 8), key.slice(0, 8)])} taken`).toBe(true);
    }
    for (const [i, [scope, key]] of pairs.entries()) {
      const record = await store.get({ scope, key }, 2_000);
      expect(record?.token).toBe(`token-${i}`);
      expect(record?.key).toBe(key);
      expect(record?.scope).toBe(scope);
    }
  });
});
