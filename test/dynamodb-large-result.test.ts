/**
 * A result under maxResultBytes (1 MiB by default) but over DynamoDB's 400 KB item limit: the effect
 * happened, so the record must say completed (without the result, result_too_large), never stay in
 * progress for a repeat to find.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dynamoStore } from "../src/dynamodb/index.js";
import { idempotent } from "../src/index.js";
import { type Dynalite, startDynalite } from "./fixtures/dynalite.js";

let db: Dynalite;
let client: DynamoDBClient;
beforeAll(async () => {
  db = await startDynalite();
  client = db.client();
});
afterAll(() => db?.close());

describe("a result under maxResultBytes but over DynamoDB's item limit", () => {
  it("is recorded (completed), so a repeat does not find the key in progress", async () => {
    const store = dynamoStore({ client, table: await db.table("large"), clockSkewMarginMs: 0 });
    let runs = 0;
    const report = idempotent(
      async () => {
        runs++;
        return { body: "x".repeat(500_000) };
      },
      { name: "build_report", store },
    );
    await report({}, { key: "k" }).catch(() => undefined);
    expect(runs).toBe(1);
    const record = await store.get({ scope: "default", key: "k" }, Date.now());
    const all = (await store.list({})).records;
    expect(
      all.map((r) => r.status),
      "the effect happened; its record must say completed",
    ).toEqual(["completed"]);
    expect(record === undefined || record.status === "completed").toBe(true);
  });
});
