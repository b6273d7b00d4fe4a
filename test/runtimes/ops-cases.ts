/**
 * idempotool/ops's SQLite helpers on a caller's bun:sqlite `Database`, which fits their `SqliteDatabaseLike`
 * shape: bun:sqlite's `get()` answers `null` where the other drivers answer `undefined` for no row, and a
 * helper that took that `null` for a row would report a duplicate as a first insert.
 */
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import {
  type SqliteDatabaseLike,
  sqliteDedupTableSql,
  sqliteInsertOnce,
  sqliteTransactionalOnce,
} from "idempotool/ops";
import { type RuntimeCase, runtime, tempFile } from "./harness.js";

const require = createRequire(import.meta.url);

type BunDatabase = new (
  file: string,
  options?: { strict?: boolean },
) => SqliteDatabaseLike & { close(): void };

/** The cases for the running runtime: none but on Bun, whose own driver answers `null`. */
export function opsCases(): RuntimeCase[] {
  if (runtime.name !== "Bun") return [];
  const { Database } = require("bun:sqlite") as { Database: BunDatabase };
  return [false, true].flatMap((strict) => {
    const opened = `a bun:sqlite Database${strict ? " opened with { strict: true }" : ""}`;
    return [
      {
        name: `ops: sqliteInsertOnce on ${opened} hands back the existing row on a repeat, not "inserted"`,
        run: async () => {
          const database = new Database(tempFile(), { strict });
          try {
            database.exec(
              "CREATE TABLE orders (id INTEGER PRIMARY KEY, idempotency_key TEXT UNIQUE, item TEXT)",
            );
            const request = {
              table: "orders",
              values: { idempotency_key: "turn-7-order", item: "book" },
              conflict: ["idempotency_key"],
            };
            const first = sqliteInsertOnce(database, request);
            const again = sqliteInsertOnce(database, request);
            assert.equal(first.inserted, true);
            assert.deepEqual(again, { inserted: false, row: first.row });
          } finally {
            database.close();
          }
        },
      },
      {
        name: `ops: sqliteTransactionalOnce on ${opened} runs the write once, then replays it`,
        run: async () => {
          const database = new Database(tempFile(), { strict });
          try {
            database.exec(sqliteDedupTableSql("order_dedup"));
            let orders = 0;
            const options = {
              table: "order_dedup",
              tool: "place_order",
              key: "turn-7-order",
              args: { item: "book" },
            };
            const place = () => ({ orderId: ++orders });
            const first = await sqliteTransactionalOnce(database, options, place);
            const again = await sqliteTransactionalOnce(database, options, place);
            assert.equal(orders, 1);
            assert.deepEqual([first.was_replay, first.result], [false, { orderId: 1 }]);
            assert.deepEqual([again.was_replay, again.result], [true, { orderId: 1 }]);
          } finally {
            database.close();
          }
        },
      },
    ];
  });
}
