/**
 * durableObjectStore's default clock is the object's own: with no `clock` option, leases are judged by it
 * whatever `now` a caller sends, so a caller whose clock runs ahead cannot take over a live lease. Runs in
 * Node on a SQLite adapter with the two storage methods the store uses (Date.now() is the object's clock).
 */
import { expect, it } from "vitest";
import { durableObjectStore } from "../src/cloudflare/index.js";
import { claimRequest } from "./fixtures/claim-request.js";
import { sqliteStorage } from "./fixtures/durable-object-sqlite.js";

it("with no clock option, a caller whose clock runs hours ahead cannot take over a live lease", async () => {
  const store = durableObjectStore({ storage: sqliteStorage() });
  const claimed = await store.claim(claimRequest({ now: Date.now() }));
  expect(claimed.claimed).toBe(true);
  const ahead = Date.now() + 3 * 3_600_000;
  const taken = await store.takeover({
    scope: "tenant-a",
    key: "order-1",
    fromToken: "token-a",
    token: "token-b",
    leaseMs: 60_000,
    ttlMs: 86_400_000,
    now: ahead,
  });
  expect(taken, "a live lease was taken over on the caller's clock").toBeNull();
  const behind = await store.claim(claimRequest({ token: "token-c", now: Date.now() - 3 * 3_600_000 }));
  expect(behind.now).toBeGreaterThanOrEqual(claimed.now);
});
