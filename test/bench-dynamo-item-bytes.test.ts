/**
 * The bench's count of a DynamoDB item's size (names and values, as DynamoDB bills and limits items)
 * agrees with dynalite's, which docs/benchmarks.md quotes beside it, on the items both libraries write.
 */
import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";
import { dynamoItemBytes } from "../bench/lib/backends/dynamodb-cost.js";

const dynaliteDb = createRequire(import.meta.url)("dynalite/db/index.js") as {
  itemSize(item: object): number;
};

const idempotoolItem = {
  pk: { S: "7:defaultbl6xk2a-000123" },
  ttl: { N: "1796759719" },
  t: { S: "send_email" },
  f: { B: new Uint8Array(32).fill(7) },
  s: { S: "c" },
  o: { B: new Uint8Array(16).fill(9) },
  c: { N: "1796673316683" },
  e: { N: "1796759716702" },
  u: { N: "19" },
  r: { S: '{"queued":true,"to":"alice@example.com","messageId":"m-1"}' },
  released: { SS: ["a".repeat(32), "b".repeat(32)] },
};
const powertoolsItem = {
  id: { S: "#ke4M2ijuqujB1/wr6OvCjVpoxbTHPuHygOwnWFU9q3A=" },
  expiration: { N: "1796759039" },
  status: { S: "COMPLETED" },
  in_progress_expiration: { N: "1796672698857" },
  data: { M: { queued: { BOOL: true }, to: { S: "alice@example.com" }, messageId: { S: "m-1" } } },
};

describe("the bench's DynamoDB item size", () => {
  it("counts names and values as dynalite does, binary as its bytes", () => {
    const asDynalite = (item: Record<string, unknown>) =>
      Object.fromEntries(
        Object.entries(item).map(([name, value]) => {
          const b = (value as { B?: Uint8Array }).B;
          return [name, b ? { B: Buffer.from(b).toString("base64") } : value];
        }),
      );
    expect(dynamoItemBytes(idempotoolItem)).toBe(dynaliteDb.itemSize(asDynalite(idempotoolItem)));
    expect(dynamoItemBytes(powertoolsItem)).toBe(dynaliteDb.itemSize(powertoolsItem));
    expect(dynamoItemBytes(powertoolsItem)).toBe(156);
  });
});
