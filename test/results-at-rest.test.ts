import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { memoryStore } from "../src/core/memory-store.js";
import { resolveOptions } from "../src/core/options.js";
import { ResultUndecryptableError } from "../src/core/result-codec.js";
import type { IdempotencyStore } from "../src/core/store.js";
import { checkpoint, postgresDedupTableSql, postgresTransactionalOnce } from "../src/ops/index.js";
import { sqliteStore } from "../src/sqlite/index.js";
import { freshTable, testPool } from "./fixtures/pg-helpers.js";

const k1 = randomBytes(32);
const k2 = randomBytes(32);
const card = { card: { number: "4242424242424242", brand: "visa" }, token: "tok_secret", chargeId: "ch_1" };

async function completeOnce(store: IdempotencyStore, key: string, options: object): Promise<void> {
  const cp = await checkpoint(store, { tool: "charge", key, args: { cents: 100 }, ...options });
  await cp.complete(card);
}

describe("results at rest (DESIGN §7) on a real SQLite file", () => {
  let dir = "";
  let file = "";
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "idempotool-rest-"));
    file = join(dir, "records.db");
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("keeps no plaintext in the stored record, and a replay decrypts", async () => {
    const store = sqliteStore({ path: file });
    const encryption = { keys: { k1 }, current: "k1" };
    await completeOnce(store, "k1", { encryption });
    const raw = new Database(file, { readonly: true });
    const dump = JSON.stringify(raw.prepare("SELECT * FROM idempotool_records").all());
    raw.close();
    expect(dump).not.toContain("4242");
    expect(dump).not.toContain("tok_secret");
    expect(dump).not.toContain("ch_1");
    const replay = await checkpoint(store, { tool: "charge", key: "k1", args: { cents: 100 }, encryption });
    expect(replay.replay?.result).toEqual(card);
    await store.close?.();
  });

  it("redacts named fields in what is stored: replays get the redacted form", async () => {
    const store = sqliteStore({ path: file });
    await completeOnce(store, "k1", { redact: ["card.number", "token"] });
    const replay = await checkpoint(store, { tool: "charge", key: "k1", args: { cents: 100 } });
    expect(replay.replay?.result).toEqual({
      card: { number: "[redacted]", brand: "visa" },
      token: "[redacted]",
      chargeId: "ch_1",
    });
    await store.close?.();
  });

  it("keeps old records readable after a key rotation, and refuses a reader without the key", async () => {
    const store = sqliteStore({ path: file });
    await completeOnce(store, "old", { encryption: { keys: { k1 }, current: "k1" } });
    const rotated = { keys: { k2, k1 }, current: "k2" };
    await completeOnce(store, "new", { encryption: rotated });
    const record = await store.get({ scope: "default", key: "new" }, Date.now());
    expect(record?.result).toContain(":k2:");
    for (const key of ["old", "new"]) {
      const replay = await checkpoint(store, {
        tool: "charge",
        key,
        args: { cents: 100 },
        encryption: rotated,
      });
      expect(replay.replay?.result).toEqual(card);
    }
    await expect(
      checkpoint(store, {
        tool: "charge",
        key: "old",
        args: { cents: 100 },
        encryption: { keys: { k2 }, current: "k2" },
      }),
    ).rejects.toBeInstanceOf(ResultUndecryptableError);
    await expect(
      checkpoint(store, { tool: "charge", key: "new", args: { cents: 100 } }),
    ).rejects.toMatchObject({
      reason: "no_encryption_configured",
    });
    await store.close?.();
  });

  it("detects a record altered at rest", async () => {
    const store = sqliteStore({ path: file });
    const encryption = { keys: { k1 }, current: "k1" };
    await completeOnce(store, "k1", { encryption });
    const raw = new Database(file);
    const { result } = raw.prepare("SELECT result FROM idempotool_records WHERE key = 'k1'").get() as {
      result: string;
    };
    const at = result.length - 2;
    const flipped = result.slice(0, at) + (result[at] === "A" ? "B" : "A") + result.slice(at + 1);
    raw.prepare("UPDATE idempotool_records SET result = ? WHERE key = 'k1'").run(flipped);
    raw.close();
    await expect(
      checkpoint(store, { tool: "charge", key: "k1", args: { cents: 100 }, encryption }),
    ).rejects.toMatchObject({
      reason: "authentication_failed",
    });
    await store.close?.();
  });

  it("seals stored failures too", async () => {
    const store = sqliteStore({ path: file });
    const encryption = { keys: { k1 }, current: "k1" };
    const cp = await checkpoint(store, { tool: "charge", key: "k1", args: {}, encryption });
    await cp.fail(new Error("card 4242 declined"), { last4: "4242" });
    const record = await store.get({ scope: "default", key: "k1" }, Date.now());
    expect(record?.error).not.toContain("4242");
    await expect(
      checkpoint(store, { tool: "charge", key: "k1", args: {}, encryption }),
    ).rejects.toMatchObject({
      message: "card 4242 declined",
      data: { last4: "4242" },
    });
    await store.close?.();
  });
});

describe("results at rest on PostgreSQL (OP-2 dedup table)", () => {
  const pool = testPool({ max: 3 });
  let table = "";
  beforeEach(async () => {
    table = freshTable();
    await pool.query(postgresDedupTableSql(table));
  });
  afterEach(() => pool.query(`DROP TABLE IF EXISTS "${table}"`));
  afterAll(() => pool.end());

  it("stores the transactional result encrypted and redacted, and replays it", async () => {
    const options = {
      table,
      key: "k1",
      args: {},
      redact: ["token"],
      encryption: { keys: { k1 }, current: "k1" },
    };
    const first = await postgresTransactionalOnce(pool, options, async () => card);
    expect(first.result.token).toBe("tok_secret");
    const { rows } = await pool.query(`SELECT result FROM "${table}"`);
    expect(JSON.stringify(rows)).not.toContain("4242");
    const again = await postgresTransactionalOnce(pool, options, async () => card);
    expect(again).toMatchObject({ was_replay: true, result: { ...card, token: "[redacted]" } });
  });
});

describe("idempotent() options", () => {
  it("resolves redact and encryption into a codec, failing at configuration time with the option's name", () => {
    const base = { name: "charge", store: memoryStore() };
    expect(resolveOptions(base).codec).toBeUndefined();
    expect(
      resolveOptions({ ...base, redact: ["card.number"], encryption: { keys: { k1 }, current: "k1" } }).codec,
    ).toMatchObject({
      redact: [["card", "number"]],
    });
    expect(() => resolveOptions({ ...base, encryption: { keys: { k1 }, current: "k2" } })).toThrow(
      /`encryption.current`/,
    );
    expect(() => resolveOptions({ ...base, redact: [""] })).toThrow(/`redact`/);
  });
});
