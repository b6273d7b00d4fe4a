/**
 * `durableObjectStore` in workerd, Cloudflare's runtime (through miniflare): the conformance suite against
 * records kept in a Durable Object's SQLite storage, reached the way a Worker reaches them
 * (`durableObjectStoreClient` → RPC → `handleStoreCall`). Node sends each call to the Worker as JSON.
 */
import { join } from "node:path";
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  durableObjectStore,
  durableObjectStoreClient,
  handleStoreCall,
  type StoreCall,
} from "../src/cloudflare/index.js";
import { isIdempotencyError } from "../src/core/errors.js";
import { idempotent } from "../src/core/idempotent.js";
import { memoryStore } from "../src/core/memory-store.js";
import type { IdempotencyStore } from "../src/core/store.js";
import { storeConformanceCases } from "../src/testing/conformance.js";
import { fakeClock } from "../src/testing/fake-clock.js";
import { claimRequest } from "./fixtures/claim-request.js";
import { decode, encode } from "./fixtures/cloudflare/json-bridge.js";
import { rejection, thrown } from "./fixtures/tools.js";
import { startWorker } from "./fixtures/workerd.js";

let mf: Miniflare;
let objects = 0;

beforeAll(async () => {
  mf = await startWorker(join(import.meta.dirname, "fixtures/cloudflare/records-worker.ts"), {
    RECORDS: "Records",
  });
}, 60_000);

afterAll(async () => {
  await mf?.dispose();
});

interface Answer {
  readonly value?: unknown;
  readonly error?: { readonly name: string; readonly message: string };
}

async function post(path: string, object: string, body?: unknown): Promise<Answer> {
  const response = await mf.dispatchFetch(`http://records${path}?object=${encodeURIComponent(object)}`, {
    method: "POST",
    body: body === undefined ? "" : encode(body),
  });
  const answer = decode(await response.text()) as Answer;
  if (answer.error) {
    const Type = { TypeError, RangeError }[answer.error.name] ?? Error;
    throw new Type(answer.error.message);
  }
  return answer;
}

/** A store on a fresh Durable Object, judged by `clock`. */
async function objectStore(
  clock: "object" | "request",
): Promise<{ store: IdempotencyStore; object: string }> {
  const object = `records-${++objects}`;
  await mf.dispatchFetch(`http://records/configure?object=${object}&clock=${clock}`);
  const store = durableObjectStoreClient({
    idempotency: async (call: StoreCall) => (await post("/", object, call)).value,
  });
  return { store, object };
}

describe("durableObjectStore conformance, in workerd (request clock)", () => {
  for (const c of storeConformanceCases({
    name: "durableObjectStore",
    create: async () => ({ store: (await objectStore("request")).store, clock: fakeClock() }),
    // A client takes a new stub when one breaks, and a call sent on the old one may arrive later.
    claimsMayArriveLate: true,
  })) {
    it(c.name, c.run);
  }
});

/** The object's own clock, read in workerd. */
async function objectNow(): Promise<number> {
  return (await post("/now", "clock")).value as number;
}

describe("durableObjectStore judges leases by the object's clock", () => {
  it("never lets a caller whose clock runs hours ahead take over a live lease", async () => {
    const { store } = await objectStore("object");
    const before = await objectNow();
    const claimed = await store.claim(claimRequest({ now: before - 3 * 3_600_000 }));
    expect(claimed.claimed).toBe(true);
    // The record was made at the object's instant, whatever the caller's clock said.
    expect(claimed.now).toBeGreaterThanOrEqual(before);
    expect(claimed.record.createdAt).toBe(claimed.now);
    expect(claimed.record.leaseExpiresAt).toBe(claimed.now + 60_000);
    const ahead = Date.now() + 3 * 3_600_000;
    const takeover = await store.takeover({
      scope: "tenant-a",
      key: "order-1",
      fromToken: "token-a",
      token: "token-b",
      leaseMs: 60_000,
      ttlMs: 86_400_000,
      now: ahead,
    });
    expect(takeover).toBeNull();
    const held = await store.get({ scope: "tenant-a", key: "order-1" }, ahead);
    expect(held?.token).toBe("token-a");
  });

  it("runs a tool once through idempotent() and replays the outcome to a repeat", async () => {
    const { store } = await objectStore("object");
    let effects = 0;
    const send = idempotent(async (args: { to: string }) => ({ sentTo: args.to, n: ++effects }), {
      name: "send_email",
      store,
    });
    const first = await send({ to: "alice@example.com" }, { key: "turn-1-email" });
    const second = await send({ to: "alice@example.com" }, { key: "turn-1-email" });
    expect(effects).toBe(1);
    expect(first).toMatchObject({ result: { sentTo: "alice@example.com", n: 1 }, was_replay: false });
    expect(second).toMatchObject({ result: { sentTo: "alice@example.com", n: 1 }, was_replay: true });
    const other = await rejection(send({ to: "bob@example.com" }, { key: "turn-1-email" }));
    expect(isIdempotencyError(other, "idempotency_key_conflict")).toBe(true);
    expect(effects).toBe(1);
  });
});

describe("durableObjectStore keeps what it returns", () => {
  it("returns records as SQLite keeps them, lone surrogates included", async () => {
    const { store } = await objectStore("request");
    const scope = "tenant-\ud800";
    const claimed = await store.claim(claimRequest({ scope, now: 1_000 }));
    const settled = await store.settle({
      scope,
      key: "order-1",
      token: "token-a",
      status: "completed",
      result: '"\udc00 lone"',
      error: null,
      ttlMs: 60_000,
      now: 2_000,
    });
    const stored = (await store.list({})).records;
    expect(stored).toEqual([settled]);
    expect(claimed.record.scope).toBe(stored[0]?.scope);
  });
});

describe("handleStoreCall", () => {
  it("refuses a call that names no store operation", async () => {
    const { object } = await objectStore("request");
    for (const op of ["close", "constructor", "migrate", "toString", "__proto__"]) {
      await expect(post("/", object, { op, args: [] })).rejects.toThrow(/is not a store operation/);
    }
  });
});

describe("durableObjectStore and durableObjectStoreClient options", () => {
  const storage = {
    sql: { exec: () => ({ toArray: () => [] }) },
    transactionSync: <T>(closure: () => T) => closure(),
  };

  it("rejects what is not a Durable Object's SQLite storage, naming the option", () => {
    for (const bad of [undefined, {}, { sql: {} }, { sql: storage.sql }]) {
      expect(() => durableObjectStore({ storage: bad as never })).toThrow(/option `storage`/);
    }
  });

  it("rejects table names that are not plain identifiers, or are Cloudflare's", () => {
    for (const table of ["", "a-b", 'x"; DROP TABLE y; --', "_cf_records", "_CF_records", "a".repeat(64)]) {
      const error = thrown(() => durableObjectStore({ storage, table }));
      expect(isIdempotencyError(error, "invalid_options"), table).toBe(true);
      expect((error as Error).message).toContain("option `table`");
    }
    expect(() => durableObjectStore({ storage, table: "records_2" })).not.toThrow();
  });

  it("rejects a clock it does not know", () => {
    expect(() => durableObjectStore({ storage, clock: "server" as never })).toThrow(/option `clock`/);
  });

  it("rejects a stub without the idempotency method, given or returned by the function", () => {
    for (const bad of [undefined, {}, { idempotency: "yes" }]) {
      expect(() => durableObjectStoreClient(bad as never)).toThrow(/option `stub`/);
      expect(() => durableObjectStoreClient(() => bad as never)).toThrow(/option `stub`.*returned/);
    }
  });

  it("drops only the stub that broke: a call that fails late on it keeps the stub taken since", async () => {
    const records = memoryStore();
    const failures: ((error: Error) => void)[] = [];
    let taken = 0;
    const store = durableObjectStoreClient(() => {
      // The first stub's calls hang until the test breaks its connection; the later stubs reach the records.
      if (++taken === 1) return { idempotency: () => new Promise((_, reject) => failures.push(reject)) };
      return { idempotency: (call: StoreCall) => handleStoreCall(records, call) };
    });
    const lost = () => Object.assign(new Error("Network connection lost."), { retryable: true });
    const first = store.get({ scope: "s", key: "k" }, 0);
    const second = store.get({ scope: "s", key: "k" }, 0);
    failures[0]?.(lost());
    await expect(first).rejects.toThrow(/connection lost/);
    await expect(store.get({ scope: "s", key: "k" }, 0)).resolves.toBeUndefined();
    expect(taken).toBe(2);
    failures[1]?.(lost());
    await expect(second).rejects.toThrow(/connection lost/);
    await expect(store.get({ scope: "s", key: "k" }, 0)).resolves.toBeUndefined();
    expect(taken).toBe(2);
  });
});
