/**
 * sqliteStore on the previous major of better-sqlite3 (12, installed as the `better-sqlite3-12` alias), where
 * users still are: the store conformance suite on a database it opened, and a counted repeat. The current
 * major runs everything else (test/fixtures/sqlite-drivers.ts).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { idempotent } from "../src/index.js";
import { type SqliteDatabase, sqliteStore } from "../src/sqlite/index.js";
import { fakeClock, storeConformanceCases } from "../src/testing/index.js";

const require = createRequire(import.meta.url);
const Database = require("better-sqlite3-12") as new (file: string) => SqliteDatabase & { close(): void };
const version = (require("better-sqlite3-12/package.json") as { version: string }).version;

/** A store on a fresh file that better-sqlite3 12 opened, and how to remove it. */
function openStore() {
  const directory = mkdtempSync(join(tmpdir(), "idempotool-bs3-12-"));
  const database = new Database(join(directory, "records.db"));
  const store = sqliteStore({ database });
  return {
    store,
    cleanup: async () => {
      await store.close();
      database.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

describe(`sqliteStore on better-sqlite3 ${version}: conformance`, () => {
  it("is better-sqlite3 12", () => expect(version).toMatch(/^12\./));
  for (const c of storeConformanceCases({
    name: "sqlite (better-sqlite3 12)",
    create: () => ({ ...openStore(), clock: fakeClock() }),
  })) {
    it(c.name, c.run);
  }
});

describe(`sqliteStore on better-sqlite3 ${version}`, () => {
  it("runs a tool once and replays its outcome to the repeat", async () => {
    const { store, cleanup } = openStore();
    try {
      expect(store.driver).toBe("better-sqlite3");
      let sends = 0;
      const sendEmail = idempotent(
        async (args: { to: string }) => {
          sends++;
          return { messageId: `m-${args.to}` };
        },
        { name: "send_email", store },
      );
      const first = await sendEmail({ to: "ann" }, { key: "turn-1" });
      const again = await sendEmail({ to: "ann" }, { key: "turn-1" });
      expect(sends).toBe(1);
      expect(again).toEqual({ ...first, was_replay: true });
    } finally {
      await cleanup();
    }
  });
});
