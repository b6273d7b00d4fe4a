/**
 * A result under maxResultBytes (1 MiB by default) but over DynamoDB's 400 KB item limit: the effect
 * happened, so the record must say completed (without the result, result_too_large), never stay in
 * progress for a repeat to find. A definitive failure that large likewise: recorded failed, without its
 * data (or with its message cut short), so a repeat gets the failure back.
 */
import { randomBytes } from "node:crypto";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dynamoStore } from "../src/dynamodb/index.js";
import { definitiveFailure, idempotent, ReplayedFailureError } from "../src/index.js";
import { type Dynalite, startDynalite } from "./fixtures/dynalite.js";
import { rejection } from "./fixtures/tools.js";

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

describe("a definitive failure whose data is over DynamoDB's item limit", () => {
  it("is recorded without its data, so a repeat gets the failure back, not outcome_unknown, and nothing runs again", async () => {
    const store = dynamoStore({ client, table: await db.table("large-failure"), clockSkewMarginMs: 0 });
    let runs = 0;
    const charge = idempotent(
      async () => {
        runs++;
        throw definitiveFailure(Object.assign(new Error("card declined"), { code: "card_declined" }), {
          log: "x".repeat(500_000),
        });
      },
      { name: "charge", store },
    );
    const first = await rejection(charge({}, { key: "k" }));
    expect(first).toMatchObject({ message: "card declined", code: "card_declined" });
    expect((await store.get({ scope: "default", key: "k" }, Date.now()))?.status).toBe("failed");
    for (let repeat = 0; repeat < 2; repeat++) {
      const replayed = await rejection(charge({}, { key: "k" }));
      expect(replayed).toBeInstanceOf(ReplayedFailureError);
      expect(replayed).toMatchObject({
        message: "card declined",
        code: "card_declined",
        data: undefined,
        data_not_kept: { code: "result_too_large", maxBytes: store.maxStoredResultBytes },
      });
    }
    expect(runs).toBe(1);
  });

  it("cuts a message over the limit short, sealed too, and replays it", async () => {
    const store = dynamoStore({ client, table: await db.table("large-message"), clockSkewMarginMs: 0 });
    let runs = 0;
    const message = `upstream said: ${"€".repeat(200_000)}`;
    const charge = idempotent(
      async () => {
        runs++;
        throw definitiveFailure(new Error(message));
      },
      { name: "charge", store, encryption: { keys: { k1: randomBytes(32) }, current: "k1" } },
    );
    await rejection(charge({}, { key: "k" }));
    const replayed = await rejection(charge({}, { key: "k" }));
    expect(replayed).toBeInstanceOf(ReplayedFailureError);
    const [kept, marker] = (replayed as Error).message.split("…");
    expect(message.startsWith(kept ?? "-")).toBe(true);
    expect(marker).toMatch(/^ \[message cut short to fit the \d+-byte limit\]$/);
    expect(runs).toBe(1);
  });
});
