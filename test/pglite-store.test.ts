/**
 * postgresStore on PGlite (PostgreSQL in WebAssembly, in this process): the conformance suite with the
 * instance's defaults and with parsers and serializers that would change every value, then the migration,
 * the clock, a data directory that outlives the instance, a closed instance and timeouts.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from "vitest";
import { type ClaimRequest, idempotent, isIdempotencyError } from "../src/index.js";
import { lockPGliteDirectory, type PGliteClient, postgresStore } from "../src/postgres/index.js";
import { fakeClock, storeConformanceCases } from "../src/testing/index.js";
import { claimRequest as baseClaim } from "./fixtures/claim-request.js";
import { eventually, freshTable } from "./fixtures/pg-helpers.js";
import { countedTool, rejection } from "./fixtures/tools.js";

const t0 = Date.parse("2026-01-01T00:00:00.000Z");
const claimRequest = (overrides: Partial<ClaimRequest> = {}) => baseClaim({ now: t0, ...overrides });

const instances: PGlite[] = [];
const directories: string[] = [];
/** A PGlite in memory, or in `dataDir`; closed after the file. */
function testPGlite(options: ConstructorParameters<typeof PGlite>[0] = {}): PGlite {
  const pglite = new PGlite(options);
  instances.push(pglite);
  return pglite;
}
afterAll(async () => {
  await Promise.all(instances.filter((pglite) => !pglite.closed).map((pglite) => pglite.close()));
  for (const directory of directories) rmSync(directory, { recursive: true, force: true });
});

const pglite = testPGlite();
// Every type the store reads, parsed into something else, and text and bigint values sent changed.
const hostile = testPGlite({
  parsers: Object.fromEntries(
    [16, 20, 21, 23, 25, 700, 701].map((oid) => [oid, (raw: string) => `parsed ${raw}`]),
  ),
  serializers: {
    20: (value: unknown) => `${String(value)}0`,
    25: (value: unknown) => `changed ${String(value)}`,
  },
});

// A fresh PGlite runs initdb in WebAssembly: seconds, and far more on a loaded machine. Not a test's time.
beforeAll(async () => {
  await Promise.all([pglite.waitReady, hostile.waitReady]);
}, 180_000);

/** Drops a table and its claim function. */
async function dropTable(client: PGlite, name: string): Promise<void> {
  await client.exec(`DROP TABLE IF EXISTS "${name}"; DROP FUNCTION IF EXISTS "${name}_claim_v1"`);
}

for (const [what, client] of [
  ["its default settings", pglite],
  ["parsers and serializers that change every value the store reads and sends", hostile],
] as const) {
  describe(`postgresStore conformance on PGlite with ${what} (request clock)`, () => {
    for (const c of storeConformanceCases({
      name: "pglite",
      create: () => {
        const name = freshTable();
        return {
          store: postgresStore({ client, table: name, clock: "request" }),
          clock: fakeClock(),
          cleanup: () => dropTable(client, name),
        };
      },
    })) {
      it(c.name, c.run);
    }
  });
}

describe("postgresStore on PGlite", () => {
  it("takes a PGlite instance as its client", () => {
    expectTypeOf<PGlite>().toExtend<PGliteClient>();
    expect(postgresStore({ client: pglite }).client).toBe(pglite);
  });

  it("migrates the table, its index and the claim function, and runs the example", async () => {
    const name = freshTable();
    const store = postgresStore({ client: pglite, table: name });
    await store.migrate();
    const { rows } = await pglite.query<{ fn: string | null; index: string | null }>(
      "SELECT to_regprocedure($1)::text AS fn, to_regclass($2)::text AS index",
      [`"${name}_claim_v1"(text, text, text, text, text, bigint, bigint, bigint)`, `"${name}_expires_at"`],
    );
    expect(rows[0]?.fn).not.toBeNull();
    expect(rows[0]?.index).not.toBeNull();
    const sendEmail = idempotent(async (args: { to: string }) => ({ sent: args.to }), {
      name: "send_email",
      store,
    });
    const first = await sendEmail({ to: "alice@example.com" }, { key: "turn-7-alice" });
    const again = await sendEmail({ to: "alice@example.com" }, { key: "turn-7-alice" });
    expect(first).toMatchObject({ result: { sent: "alice@example.com" }, was_replay: false });
    expect(again).toMatchObject({ result: first.result, was_replay: true });
    await dropTable(pglite, name);
  });

  it("judges leases by its own clock, and takes over only once that clock has passed the lease", async () => {
    const name = freshTable();
    let bOffsetMs = 0;
    const a = postgresStore({ client: pglite, table: name });
    const b = postgresStore({ client: pglite, table: name, clockOffsetMs: () => bOffsetMs });
    const before = Date.now();
    const claimed = await a.claim(claimRequest({ now: 0, leaseMs: 45_000 }));
    // In this process, PostgreSQL's clock is this process's.
    expect(claimed.now).toBeGreaterThanOrEqual(before - 1_000);
    expect(claimed.now).toBeLessThanOrEqual(Date.now() + 1_000);
    const takeover = () =>
      b.takeover({
        scope: "tenant-a",
        key: "order-1",
        fromToken: "token-a",
        token: "token-b",
        leaseMs: 60_000,
        ttlMs: 86_400_000,
        now: Date.now() + 3_600_000,
      });
    expect(await takeover()).toBeNull();
    bOffsetMs = 50_000;
    expect(await takeover()).toMatchObject({
      token: "token-b",
      attempts: 2,
      createdAt: claimed.record.createdAt,
    });
    await dropTable(pglite, name);
  });

  it("keeps its records in a data directory across instances, one process at a time", async () => {
    const directory = mkdtempSync(join(tmpdir(), "idempotool-pglite-"));
    directories.push(directory);
    const first = testPGlite({ dataDir: directory });
    let runs = 0;
    const tool = (client: PGlite) =>
      idempotent(
        async () => {
          runs++;
          return "sent";
        },
        { name: "send_email", store: postgresStore({ client }) },
      );
    expect(await tool(first)({}, { key: "k" })).toMatchObject({ was_replay: false });
    await first.close();
    const second = testPGlite({ dataDir: directory });
    expect(await tool(second)({}, { key: "k" })).toMatchObject({ result: "sent", was_replay: true });
    expect(runs).toBe(1);
  }, 180_000); // two instances start up, one of them running initdb
});

// PGlite keeps a data directory in its own process's memory: two instances on one directory each see only
// their own writes, so each claimed every key and a tool ran once per instance.
describe("postgresStore on PGlite: one data directory, one instance", () => {
  const sendEmail = (client: PGlite) => {
    const store = postgresStore({ client });
    return countedTool(store);
  };

  it("refuses a second instance open on the directory in this process, for good; the one after the first closes runs", async () => {
    const directory = mkdtempSync(join(tmpdir(), "idempotool-pglite-lock-"));
    directories.push(directory);
    const first = testPGlite({ dataDir: directory });
    const held = sendEmail(first);
    expect(await held.tool({ n: 1 }, { key: "k" })).toMatchObject({ was_replay: false });

    const second = testPGlite({ dataDir: directory });
    const refused = sendEmail(second);
    const error = await rejection(refused.tool({ n: 1 }, { key: "k" }));
    expect(isIdempotencyError(error, "store_unavailable")).toBe(true);
    expect((error as Error).message).toContain("is open in another PGlite instance of this process");
    expect(refused.runs()).toBe(0);

    await first.close();
    // It opened the directory beside the first: what it read then may be stale.
    expect(
      isIdempotencyError(await rejection(refused.tool({ n: 1 }, { key: "k" })), "store_unavailable"),
    ).toBe(true);
    expect(refused.runs()).toBe(0);
    await second.close();

    const third = sendEmail(testPGlite({ dataDir: directory }));
    expect(await third.tool({ n: 1 }, { key: "k" })).toMatchObject({ was_replay: true });
    expect(held.runs() + refused.runs() + third.runs()).toBe(1);
  }, 180_000);
});

// A PGlite instance reads its directory as it opens, and closing one opened beside another writes what it read
// back over what the other wrote since: lockPGliteDirectory refuses before anything opens it.
describe("lockPGliteDirectory", () => {
  it("resolves again where this process holds the directory, and refuses what is not a directory on disk", async () => {
    const directory = mkdtempSync(join(tmpdir(), "idempotool-pglite-lock-again-"));
    directories.push(directory);
    const dataDir = join(directory, "not-yet-made");
    await lockPGliteDirectory(dataDir);
    await lockPGliteDirectory(`file://${dataDir}`);
    for (const dataDir of ["memory://", "idb://records", ""]) {
      await expect(lockPGliteDirectory(dataDir)).rejects.toMatchObject({ code: "invalid_options" });
    }
  });
});

describe("postgresStore on PGlite: failures", () => {
  it("fails closed with store_unavailable once the instance is closed, and the tool does not run", async () => {
    const closing = testPGlite();
    const { tool, runs } = countedTool(postgresStore({ client: closing }));
    expect(await tool({ n: 1 }, { key: "before" })).toMatchObject({ was_replay: false });
    await closing.close();
    const error = await rejection(tool({ n: 1 }, { key: "after" }));
    expect(isIdempotencyError(error, "store_unavailable")).toBe(true);
    expect(runs()).toBe(1);
  }, 180_000); // a fresh instance starts up

  it("gives up at statementTimeoutMs while a transaction holds the instance, and gives back a claim that lands late", async () => {
    const name = freshTable();
    const store = postgresStore({ client: pglite, table: name, statementTimeoutMs: 300 });
    await store.migrate();
    // PGlite runs one statement at a time: a transaction holds every other statement until it ends.
    let finish: () => void = () => {};
    const finished = new Promise<void>((resolve) => {
      finish = resolve;
    });
    let holding: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      holding = resolve;
    });
    const transaction = pglite.transaction(async () => {
      holding();
      await finished;
    });
    await held;
    const { tool, runs } = countedTool(store);
    const failure = await rejection(tool({ n: 1 }, { key: "k" }));
    expect(isIdempotencyError(failure, "store_unavailable")).toBe(true);
    expect(String((failure as Error).cause)).toMatch(/statementTimeoutMs/);
    expect(runs()).toBe(0);
    const error = await rejection(store.claim(claimRequest({ key: "late" })));
    expect((error as Error).message).toMatch(/statementTimeoutMs/);
    finish();
    await transaction;
    // The queued claim runs now, and the store releases it when its answer arrives.
    await eventually(async () => {
      const { rows } = await pglite.query(`SELECT key FROM "${name}"`);
      return rows.length === 0;
    }, "the late claims land and are released");
    const fresh = postgresStore({ client: pglite, table: name, clock: "request" });
    expect((await fresh.claim(claimRequest({ key: "late", token: "token-b" }))).claimed).toBe(true);
    await dropTable(pglite, name);
  });
});
