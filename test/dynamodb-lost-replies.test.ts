/**
 * DynamoDB's SDK resends a write whose reply was lost; the resend of a conditional
 * write that already applied is refused. Every write of one call is resent here (answered by the resend),
 * and the tool must still run once, be recorded completed, and replay (passes: the core recognises its
 * own claim, takeover and settle by token).
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DynamoDBClientLike, dynamoStore } from "../src/dynamodb/index.js";
import { idempotent } from "../src/index.js";
import { fakeClock } from "../src/testing/index.js";
import { type Dynalite, startDynalite } from "./fixtures/dynalite.js";

let db: Dynalite;
let client: DynamoDBClient;
beforeAll(async () => {
  db = await startDynalite();
  client = db.client();
});
afterAll(() => db?.close());

/** A client whose every write reaches DynamoDB twice, the caller hearing only the second answer. */
function resending(inner: DynamoDBClient): DynamoDBClientLike {
  return {
    async send(command: object) {
      const name = command.constructor.name;
      if (name === "GetItemCommand" || name === "ScanCommand") return inner.send(command as never);
      await inner.send(command as never).catch(() => undefined);
      return inner.send(command as never);
    },
  };
}

describe("dynamoStore when every write's first reply is lost", () => {
  for (const effect of ["irreversible", "native-key"] as const) {
    it(`${effect}: runs once, completes, replays; a stale claim is taken over once`, async () => {
      const table = await db.table("lost");
      const store = dynamoStore({ client: resending(client), table, clockSkewMarginMs: 0 });
      const clock = fakeClock(Date.now());
      let runs = 0;
      const tool = idempotent(async () => ++runs, { name: "t", store, clock, effect, leaseMs: 5_000 });
      expect(await tool({}, { key: "k" })).toMatchObject({ result: 1, was_replay: false });
      expect(await tool({}, { key: "k" })).toMatchObject({ result: 1, was_replay: true });
      expect(runs).toBe(1);
      // A crashed claim on another key, then a takeover through the resending client.
      const direct = dynamoStore({ client, table, clockSkewMarginMs: 0 });
      await direct.claim({
        scope: "default",
        key: "k2",
        tool: "t",
        fingerprint: (await direct.get({ scope: "default", key: "k" }, clock.now()))!.fingerprint,
        token: "crashed",
        leaseMs: 5_000,
        ttlMs: 86_400_000,
        now: clock.now(),
      });
      await clock.advance(6_000);
      const second = await tool({}, { key: "k2" }).catch((e: { code?: string }) => e.code);
      if (effect === "native-key") expect(second).toMatchObject({ result: 2, was_replay: false });
      else expect(second).toBe("outcome_unknown");
      expect(runs).toBe(effect === "native-key" ? 2 : 1);
    });
  }
});
