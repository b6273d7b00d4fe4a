/**
 * How long `durableObjectStore` remembers a released token: a day after its last release, by the object's
 * clock, whatever `purge` is told and whichever clock judges the records. Runs in Node on a SQLite adapter
 * with the store's two storage methods, so the test can move the object's clock (`Date.now()`); the
 * conformance suite checks the refusal itself in workerd.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { durableObjectStore } from "../src/cloudflare/index.js";
import type { IdempotencyStore } from "../src/core/store.js";
import { claimRequest } from "./fixtures/claim-request.js";
import { sqliteStorage } from "./fixtures/durable-object-sqlite.js";

const hourMs = 3_600_000;
const start = Date.UTC(2026, 5, 1);

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["Date"], now: start });
});
afterEach(() => {
  vi.useRealTimers();
});

/** Move the object's clock to `ms` after the start. */
function at(ms: number) {
  vi.setSystemTime(start + ms);
}

const release = (store: IdempotencyStore, token: string, key = "order-1") =>
  store.release({ scope: "tenant-a", key, token });

/** The claim by `token` on order-1: "refused" when the store remembers the token, else whether it won. */
async function lateClaim(store: IdempotencyStore, token: string): Promise<"refused" | boolean> {
  try {
    return (await store.claim(claimRequest({ token, now: Date.now() }))).claimed;
  } catch (error) {
    expect((error as Error).message).toMatch(/released before it arrived.*call again with a new token/);
    return "refused";
  }
}

describe("durableObjectStore remembers a released token", () => {
  it("for a day after the release: purge keeps it until then, and forgets it once the day passed", async () => {
    const store = durableObjectStore({ storage: sqliteStorage() });
    expect(await release(store, "token-late")).toBe(false);
    at(24 * hourMs - 1);
    expect(await store.purge({ now: Date.now() })).toEqual({ deleted: 0 });
    expect(await lateClaim(store, "token-late")).toBe("refused");
    at(24 * hourMs);
    await store.purge({ now: Date.now() });
    expect(await lateClaim(store, "token-late")).toBe(true);
  });

  it("for a day after its last release, when released twice", async () => {
    const store = durableObjectStore({ storage: sqliteStorage() });
    await release(store, "token-late");
    at(12 * hourMs);
    await release(store, "token-late");
    at(24 * hourMs);
    await store.purge({ now: Date.now() });
    expect(await lateClaim(store, "token-late")).toBe("refused");
    at(36 * hourMs);
    await store.purge({ now: Date.now() });
    expect(await lateClaim(store, "token-late")).toBe(true);
  });

  it("and a later release forgets tokens whose day passed, without a purge", async () => {
    const store = durableObjectStore({ storage: sqliteStorage() });
    await release(store, "token-late");
    at(24 * hourMs);
    await release(store, "token-other", "order-2");
    expect(await lateClaim(store, "token-late")).toBe(true);
  });

  it("by the object's clock when records follow the request clock: a purge told a later time keeps it", async () => {
    const store = durableObjectStore({ storage: sqliteStorage(), clock: "request" });
    await release(store, "token-late");
    await store.purge({ now: start + 30 * 24 * hourMs });
    expect(await lateClaim(store, "token-late")).toBe("refused");
  });

  it("only on its own key and for its own token", async () => {
    const store = durableObjectStore({ storage: sqliteStorage() });
    await release(store, "token-late", "order-2");
    expect(await lateClaim(store, "token-late")).toBe(true);
    await release(store, "token-b");
    expect(await lateClaim(store, "token-c")).toBe(false);
  });
});
