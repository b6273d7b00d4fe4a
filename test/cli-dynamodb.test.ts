/**
 * The record commands (inspect, purge, reconcile), in this process, on a DynamoDB table named by a
 * dynamodb:// URL as an operator would: dynalite started by the test (in this process, on a port of its
 * own), credentials from the environment.
 */
import net from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UsageError } from "../src/cli/errors.js";
import { openStore, parseStoreUrl } from "../src/cli/store-url.js";
import { dynamoStore } from "../src/dynamodb/index.js";
import { cli } from "./fixtures/cli-binary.js";
import { type Dynalite, startDynalite } from "./fixtures/dynalite.js";
import { seedRecord } from "./fixtures/reconcile-seed.js";

const DAY = 86_400_000;
const hooks = join(import.meta.dirname, "fixtures", "reconcile-hooks.mjs");
const env = { AWS_ACCESS_KEY_ID: "test", AWS_SECRET_ACCESS_KEY: "test", AWS_REGION: "us-east-1" };

let db: Dynalite;
let table: string;
let url: string;
beforeAll(async () => {
  db = await startDynalite();
  table = await db.table("cli");
  url = `dynamodb://${table}?region=us-east-1&endpoint=${encodeURIComponent(db.endpoint)}`;
  const store = dynamoStore({ client: db.client(), table });
  const now = Date.now();
  await seedRecord(store, { key: "turn-1-alice", status: "completed", now });
  await seedRecord(store, { key: "turn-3-carol", status: "unknown", now });
  await seedRecord(store, { key: "turn-4-stale", status: "in_progress", now: now - 120_000, leaseMs: 1_000 });
  await seedRecord(store, {
    key: "order-9",
    tool: "charge_card",
    scope: "tenant-b",
    status: "completed",
    now,
  });
  for (let i = 0; i < 3; i++) {
    await seedRecord(store, { key: `old-${i}`, status: "completed", now: now - 2 * DAY, ttlMs: DAY });
  }
});
afterAll(() => db?.close());

describe("dynamodb:// store URLs", () => {
  it("reads the table, the region and the endpoint", () => {
    expect(parseStoreUrl("dynamodb://idempotool_records?region=eu-west-1")).toEqual({
      kind: "dynamodb",
      table: "idempotool_records",
      region: "eu-west-1",
      endpoint: undefined,
    });
    expect(
      parseStoreUrl("dynamodb://Records.v2?endpoint=http%3A%2F%2F127.0.0.1%3A8000&region=us-east-1"),
    ).toEqual({
      kind: "dynamodb",
      table: "Records.v2",
      region: "us-east-1",
      endpoint: "http://127.0.0.1:8000",
    });
    expect(parseStoreUrl("dynamodb://")).toMatchObject({ kind: "dynamodb", table: undefined });
    expect(() => parseStoreUrl("dynamodb://t?endpoint=not a url")).toThrow(UsageError);
  });

  it("refuses a table that is not there unless asked to create it, then opens it", async () => {
    const name = `missing-${Date.now()}`;
    const missing = `dynamodb://${name}?region=us-east-1&endpoint=${encodeURIComponent(db.endpoint)}`;
    const saved = { ...process.env };
    Object.assign(process.env, env);
    try {
      await expect(openStore(missing)).rejects.toThrow(`no DynamoDB table ${name}`);
      const created = await openStore(missing, { create: true });
      expect((await created.list({})).records).toEqual([]);
      await created.close();
      await db.dropTable(name);
    } finally {
      process.env = saved;
    }
  });
});

describe("the record commands on DynamoDB", () => {
  const list = async (...args: string[]) => {
    const { code, stdout, stderr } = await cli(["inspect", "list", "--store", url, "--json", ...args], {
      env,
    });
    expect(code, stderr).toBe(0);
    return (JSON.parse(stdout) as { key: string }[]).map((r) => r.key).sort();
  };

  it("inspects: lists and filters the records as JSON", async () => {
    expect(await list("--scope", "tenant-b")).toEqual(["order-9"]);
    expect(await list("--status", "unknown")).toEqual(["turn-3-carol"]);
    expect(await list("--key-prefix", "turn-")).toEqual(["turn-1-alice", "turn-3-carol", "turn-4-stale"]);
  });

  it("reconciles as a dry run without changing a record", async () => {
    const { code, stdout, stderr } = await cli(["reconcile", "--store", url, "--hooks", hooks], {
      env,
    });
    expect(code, stderr).toBe(0);
    expect(stdout).toContain("dry run, nothing changed");
    expect(stdout).toContain("2 examined");
    expect(await list("--status", "in_progress")).toEqual(["turn-4-stale"]);
  });

  it("counts the expired records in a dry run, and removes none", async () => {
    const { code, stdout, stderr } = await cli(["purge", "--store", url, "--dry-run", "--json"], { env });
    expect(code, stderr).toBe(0);
    expect(JSON.parse(stdout)).toEqual({ dryRun: true, expired: 3 });
    expect(await list()).toHaveLength(7);
  });

  it("purges the expired records and keeps the live ones", async () => {
    const { code, stdout, stderr } = await cli(["purge", "--store", url, "--json"], { env });
    expect(code, stderr).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ deleted: 3 });
    expect(await list()).toHaveLength(4);
  });

  it("answers a missing table or an unreachable endpoint with one line and exit 2", async () => {
    const server = net.createServer().listen(0, "127.0.0.1");
    await new Promise((resolve) => server.once("listening", resolve));
    const { port } = server.address() as net.AddressInfo;
    await new Promise((resolve) => server.close(resolve));
    for (const [store, message] of [
      [`dynamodb://${table}?endpoint=http://127.0.0.1:${port}`, /cannot reach the DynamoDB table/],
      [`dynamodb://no-such-table?endpoint=${encodeURIComponent(db.endpoint)}`, /no DynamoDB table/],
      ["dynamodb://ab?region=us-east-1", /--table must be a DynamoDB table name/],
    ] as const) {
      const { code, stderr } = await cli(["inspect", "list", "--store", store], { env });
      expect(code, store).toBe(2);
      expect(stderr.trim().split("\n"), store).toHaveLength(1);
      expect(stderr, store).toMatch(message);
    }
  });
});
