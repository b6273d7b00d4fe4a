import { describe, expect, it } from "vitest";
import { isLockBusy } from "./lock-wait.js";

/** An error shaped as a driver throws it: `message` plus the driver's own fields. */
function driverError(message: string, fields: object): Error {
  return Object.assign(new Error(message), fields);
}

describe("isLockBusy", () => {
  it("knows another connection's lock by each driver's way of saying it", () => {
    const busy = [
      driverError("database is locked", { code: "SQLITE_BUSY" }), // better-sqlite3, bun:sqlite
      driverError("database table is locked", { code: "SQLITE_LOCKED_SHAREDCACHE" }),
      driverError("database is locked", { code: "ERR_SQLITE_ERROR", errcode: 5 }), // node:sqlite on Node, Bun
      driverError("database is locked", { code: "ERR_SQLITE_ERROR", errcode: 517 }), // SQLITE_BUSY_SNAPSHOT
      // Deno's node:sqlite gives no errcode: SQLite's own message is all there is.
      driverError("database is locked", { code: "ERR_SQLITE_ERROR" }),
      driverError("database table is locked: idempotool_records", { code: "ERR_SQLITE_ERROR" }),
      driverError("database schema is locked: main", { code: "ERR_SQLITE_ERROR" }),
    ];
    for (const error of busy) expect(isLockBusy(error), error.message).toBe(true);
  });

  it("does not take another failure for a lock, so the store never retries it", () => {
    const notBusy = [
      driverError("UNIQUE constraint failed: t.x", { code: "SQLITE_CONSTRAINT_PRIMARYKEY" }),
      driverError("UNIQUE constraint failed: t.x", { code: "ERR_SQLITE_ERROR", errcode: 1555 }),
      driverError("UNIQUE constraint failed: t.x", { code: "ERR_SQLITE_ERROR" }),
      // The message decides only where the driver gives no code: a number that says otherwise wins.
      driverError("database is locked", { code: "ERR_SQLITE_ERROR", errcode: 1 }),
      // A tool's own error that happens to say so is not the driver's.
      driverError("database is locked", {}),
      driverError("the database is locked for maintenance", { code: "ERR_SQLITE_ERROR" }),
      new Error("disk I/O error"),
      undefined,
      "database is locked",
    ];
    for (const error of notBusy)
      expect(isLockBusy(error), String((error as Error)?.message ?? error)).toBe(false);
  });
});
