/**
 * OP-2: the business write and the dedup record in one SQLite transaction.
 *
 * An agent's `place_order` tool inserts an order and its line items. The first attempt crashes
 * between the writes (a thrown error): the transaction rolls back, leaving neither the order nor the
 * key. The retry places the order once; a repeat with the same key is handed the stored result
 * without writing; a buggy repeat with other arguments is refused, and so is another tool
 * (`cancel_order`) that reuses the order's key: it is never handed the order's result.
 *
 * Run: node --import tsx examples/op2-transaction.ts (exits non-zero if any check fails)
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { isIdempotencyError } from "idempotool";
import { sqliteDedupTableSql, sqliteTransactionalOnce } from "idempotool/ops";

const dir = mkdtempSync(join(tmpdir(), "idempotool-op2-example-"));
const db = new Database(join(dir, "shop.db"));
let failures = 0;
function check(ok: boolean, what: string): void {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures++;
}

try {
  db.exec(sqliteDedupTableSql("order_dedup"));
  db.exec("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT NOT NULL)");
  db.exec("CREATE TABLE order_items (order_id INTEGER NOT NULL, sku TEXT NOT NULL)");
  const count = (table: string) =>
    (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;

  const args = { customer: "alice", skus: ["book", "pen"] };
  let crashAfterOrder = true;
  const placeOrder = (tx: Database.Database) => {
    const orderId = Number(
      tx.prepare("INSERT INTO orders (customer) VALUES (?)").run(args.customer).lastInsertRowid,
    );
    if (crashAfterOrder) throw new Error("connection reset between the order and its items");
    for (const sku of args.skus)
      tx.prepare("INSERT INTO order_items (order_id, sku) VALUES (?, ?)").run(orderId, sku);
    return { orderId };
  };
  const options = {
    table: "order_dedup",
    tool: "place_order",
    key: "turn-7-place-order",
    scope: "user-alice",
    args,
  };

  const crashed = await sqliteTransactionalOnce(db, options, placeOrder).catch((error: unknown) => error);
  check(
    crashed instanceof Error && count("orders") === 0,
    "a failure mid-write leaves neither the order nor the key",
  );

  crashAfterOrder = false;
  const first = await sqliteTransactionalOnce(db, options, placeOrder);
  check(
    !first.was_replay && count("orders") === 1 && count("order_items") === 2,
    "the retry places the order once",
  );

  const again = await sqliteTransactionalOnce(db, options, placeOrder);
  check(
    again.was_replay && again.result.orderId === first.result.orderId,
    "a repeat replays the stored result",
  );
  check(count("orders") === 1, "and writes nothing");

  const conflict = await sqliteTransactionalOnce(
    db,
    { ...options, args: { ...args, skus: ["car"] } },
    placeOrder,
  ).catch((error: unknown) => error);
  check(
    isIdempotencyError(conflict, "idempotency_key_conflict"),
    "the same key with other arguments is refused",
  );

  const cancelOrder = (tx: Database.Database) => ({
    cancelled: tx.prepare("DELETE FROM orders WHERE customer = ?").run(args.customer).changes,
  });
  const otherTool = await sqliteTransactionalOnce(
    db,
    { ...options, tool: "cancel_order" },
    cancelOrder,
  ).catch((error: unknown) => error);
  check(
    isIdempotencyError(otherTool, "idempotency_key_conflict") &&
      otherTool.originalTool === "place_order" &&
      count("orders") === 1,
    "another tool under the same key is refused: it neither runs nor replays the order",
  );
} finally {
  db.close();
  rmSync(dir, { recursive: true, force: true });
}

if (failures > 0) {
  console.error(`${failures} check(s) failed`);
  process.exit(1);
}
