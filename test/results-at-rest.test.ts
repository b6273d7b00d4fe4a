import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { fingerprint } from "../src/core/fingerprint.js";
import { idempotent } from "../src/core/idempotent.js";
import { memoryStore } from "../src/core/memory-store.js";
import { resolveOptions } from "../src/core/options.js";
import { definitiveFailure } from "../src/core/outcomes.js";
import { ResultUndecryptableError } from "../src/core/result-codec.js";
import type { IdempotencyStore } from "../src/core/store.js";
import { checkpoint, postgresDedupTableSql, postgresTransactionalOnce } from "../src/ops/index.js";
import { sqliteStore } from "../src/sqlite/index.js";
import { freshTable, testPool } from "./fixtures/pg-helpers.js";
import { sqliteDriver, sqliteDrivers } from "./fixtures/sqlite-drivers.js";

/**
 * Opens the store's file directly, as someone with access to the disk would, with the driver sqliteStore
 * picks by default: two SQLite libraries must not open one file in one process (each would drop the
 * other's POSIX locks), so the raw handle uses the store's own.
 */
function openRaw(file: string) {
  const builtIn = sqliteDrivers.some((driver) => driver.name === "node:sqlite");
  return sqliteDriver(builtIn ? "node:sqlite" : "better-sqlite3").open(file);
}

const k1 = randomBytes(32);
const k2 = randomBytes(32);
const card = { card: { number: "4242424242424242", brand: "visa" }, token: "tok_secret", chargeId: "ch_1" };

async function completeOnce(store: IdempotencyStore, key: string, options: object): Promise<void> {
  const cp = await checkpoint(store, { tool: "charge", key, args: { cents: 100 }, ...options });
  await cp.complete(card);
}

describe("results at rest on a real SQLite file", () => {
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
    const raw = openRaw(file);
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
    const raw = openRaw(file);
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
      tool: "charge_card",
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

  it("keys the row's fingerprint and binds its sealed result to the row, across a key rotation", async () => {
    const encryption = { keys: { k1 }, current: "k1" };
    const once = (key: string, cents: number, keys = encryption) =>
      postgresTransactionalOnce(
        pool,
        { table, tool: "charge", key, args: { cents }, encryption: keys },
        async () => ({
          key,
        }),
      );
    await once("order-1", 100);
    await once("order-2", 100);
    const { rows } = await pool.query(`SELECT key, fingerprint, result FROM "${table}" ORDER BY key`);
    expect(rows[0].fingerprint).toMatch(/^hmac-sha256:k1:/);
    expect(rows[0].fingerprint).not.toContain(fingerprint({ cents: 100 }));
    const rotated = { keys: { k2, k1 }, current: "k2" };
    await expect(once("order-1", 100, rotated)).resolves.toMatchObject({
      was_replay: true,
      result: { key: "order-1" },
    });
    await pool.query(`UPDATE "${table}" SET result = $1 WHERE key = 'order-2'`, [rows[0].result]);
    await expect(once("order-2", 100, rotated)).rejects.toBeInstanceOf(ResultUndecryptableError);
  });

  it("binds the sealed result to the tool that committed it: relabelled for another tool, it does not open", async () => {
    const encryption = { keys: { k1 }, current: "k1" };
    const once = (tool: string) =>
      postgresTransactionalOnce(
        pool,
        { table, tool, key: "order-1", args: {}, encryption },
        async () => card,
      );
    await once("charge");
    await pool.query(`UPDATE "${table}" SET tool = 'refund'`);
    await expect(once("refund")).rejects.toBeInstanceOf(ResultUndecryptableError);
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

/** A record's row in a SQLite store file, read and written behind the store's back, as an attacker would. */
function row(file: string, scope: string, key: string) {
  const where = "WHERE scope = ? AND key = ?";
  return {
    read(): { result: string | null; error: string | null; fingerprint: string; status: string } {
      const raw = openRaw(file);
      try {
        return raw
          .prepare(`SELECT result, error, fingerprint, status FROM idempotool_records ${where}`)
          .get(scope, key) as never;
      } finally {
        raw.close();
      }
    },
    write(fields: { result?: string | null; error?: string | null; status?: string }): void {
      const raw = openRaw(file);
      try {
        for (const [column, value] of Object.entries(fields)) {
          raw.prepare(`UPDATE idempotool_records SET ${column} = ? ${where}`).run(value, scope, key);
        }
      } finally {
        raw.close();
      }
    },
  };
}

describe("sealed values are bound to their record (scope, key, tool, fingerprint)", () => {
  const encryption = { keys: { k1 }, current: "k1" };
  let dir = "";
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "idempotool-bound-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** A tool whose result names the scope, key and tool it ran for, on its own SQLite file. */
  function tool(file: string, name = "charge") {
    let runs = 0;
    const store = sqliteStore({ path: join(dir, file) });
    const call = idempotent(
      async (args: { cents: number }, context) => {
        runs++;
        return { ranFor: `${context.scope}/${context.key}/${context.tool}/${args.cents}`, secret: "s" };
      },
      { name, store, encryption },
    );
    return { call, store, runs: () => runs, file: join(dir, file) };
  }

  it("does not open a sealed result copied into another scope: tenant B never gets tenant A's result", async () => {
    const t = tool("records.db");
    await t.call({ cents: 100 }, { scope: "tenant-a", key: "order-1" });
    await t.call({ cents: 100 }, { scope: "tenant-b", key: "order-1" });
    // Same arguments, so the same fingerprint: only the scope tells the records apart.
    expect(row(t.file, "tenant-b", "order-1").read().fingerprint).toBe(
      row(t.file, "tenant-a", "order-1").read().fingerprint,
    );
    row(t.file, "tenant-b", "order-1").write({ result: row(t.file, "tenant-a", "order-1").read().result });
    await expect(t.call({ cents: 100 }, { scope: "tenant-b", key: "order-1" })).rejects.toMatchObject({
      name: "ResultUndecryptableError",
      reason: "authentication_failed",
    });
    expect(t.runs()).toBe(2);
    await t.store.close?.();
  });

  it("does not open a sealed result copied under another key of the same scope", async () => {
    const t = tool("records.db");
    await t.call({ cents: 100 }, { key: "order-1" });
    await t.call({ cents: 100 }, { key: "order-2" });
    row(t.file, "default", "order-2").write({ result: row(t.file, "default", "order-1").read().result });
    await expect(t.call({ cents: 100 }, { key: "order-2" })).rejects.toBeInstanceOf(ResultUndecryptableError);
    await t.store.close?.();
  });

  it("does not open a sealed result copied to another tool's record, or to a record of other arguments", async () => {
    const charge = tool("charge.db", "charge");
    const refund = tool("refund.db", "refund");
    const other = tool("other.db", "charge");
    await charge.call({ cents: 100 }, { key: "order-1" });
    await refund.call({ cents: 100 }, { key: "order-1" });
    await other.call({ cents: 999 }, { key: "order-1" });
    const sealed = row(charge.file, "default", "order-1").read().result;
    row(refund.file, "default", "order-1").write({ result: sealed });
    row(other.file, "default", "order-1").write({ result: sealed });
    await expect(refund.call({ cents: 100 }, { key: "order-1" })).rejects.toBeInstanceOf(
      ResultUndecryptableError,
    );
    await expect(other.call({ cents: 999 }, { key: "order-1" })).rejects.toBeInstanceOf(
      ResultUndecryptableError,
    );
    for (const t of [charge, refund, other]) await t.store.close?.();
  });

  it("does not open a sealed failure copied into another scope, nor a sealed result moved to the failure field", async () => {
    const store = sqliteStore({ path: join(dir, "records.db") });
    const file = join(dir, "records.db");
    const declined = idempotent(
      async (_args: object, context) => {
        throw definitiveFailure(new Error(`declined for ${context.scope}`));
      },
      { name: "charge", store, encryption },
    );
    await expect(declined({}, { scope: "tenant-a", key: "k" })).rejects.toThrow("declined for tenant-a");
    await expect(declined({}, { scope: "tenant-b", key: "k" })).rejects.toThrow("declined for tenant-b");
    row(file, "tenant-b", "k").write({ error: row(file, "tenant-a", "k").read().error });
    await expect(declined({}, { scope: "tenant-b", key: "k" })).rejects.toBeInstanceOf(
      ResultUndecryptableError,
    );

    const charge = idempotent(async () => ({ id: "ch_1" }), { name: "charge", store, encryption });
    await charge({}, { key: "paid" });
    const sealed = row(file, "default", "paid").read().result;
    row(file, "default", "paid").write({ status: "failed", result: null, error: sealed });
    await expect(charge({}, { key: "paid" })).rejects.toBeInstanceOf(ResultUndecryptableError);
    await store.close?.();
  });

  it("refuses a plaintext result swapped into the store, unless acceptPlaintext is set for a migration", async () => {
    const t = tool("records.db");
    await t.call({ cents: 100 }, { key: "order-1" });
    row(t.file, "default", "order-1").write({ result: JSON.stringify({ ranFor: "the attacker" }) });
    await expect(t.call({ cents: 100 }, { key: "order-1" })).rejects.toMatchObject({
      name: "ResultUndecryptableError",
      reason: "not_sealed",
    });
    const migrating = idempotent(async () => ({ ranFor: "never" }), {
      name: "charge",
      store: t.store,
      encryption: { ...encryption, acceptPlaintext: true },
    });
    const replay = await migrating({ cents: 100 }, { key: "order-1" });
    expect(replay).toMatchObject({ was_replay: true, result: { ranFor: "the attacker" } });
    expect(t.runs()).toBe(1);
    await t.store.close?.();
  });

  it("refuses a plaintext failure swapped into the store too", async () => {
    const store = sqliteStore({ path: join(dir, "records.db") });
    const file = join(dir, "records.db");
    const declined = idempotent(
      async () => {
        throw definitiveFailure(new Error("declined"));
      },
      { name: "charge", store, encryption },
    );
    await expect(declined({}, { key: "k" })).rejects.toThrow("declined");
    row(file, "default", "k").write({ error: JSON.stringify({ name: "Error", message: "forged" }) });
    await expect(declined({}, { key: "k" })).rejects.toMatchObject({ reason: "not_sealed" });
    await store.close?.();
  });
});
