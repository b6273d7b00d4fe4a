/**
 * The OP-1 client against the middleware, end to end: a real Hono server on @hono/node-server over the
 * embedded SQLite store, and idempotentFetch over a real socket.
 */
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { honoIdempotency } from "../src/http/hono.js";
import { type FetchFunction, idempotentFetch, isIdempotentFetchError } from "../src/http/index.js";
import type { Clock } from "../src/index.js";
import { type SqliteStore, sqliteStore } from "../src/sqlite/index.js";

interface Payment {
  readonly id: string;
  readonly amount: number;
  readonly principal: string;
}

let dir: string;
let store: SqliteStore;
let server: Server;
let base: string;
/** Payments the server made: the side effect that must happen once. */
let payments: Payment[];
/** The Idempotency-Key of every request the server received, before the middleware. */
let keysSeen: (string | undefined)[];
let failNext: number;
let release: (() => void) | undefined;
let gate: Promise<void> | undefined;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), "idempotool-http-"));
  store = sqliteStore({ path: join(dir, "idempotency.db") });
  payments = [];
  keysSeen = [];
  failNext = 0;
  gate = undefined;

  type Env = { Variables: { principal: string } };
  const app = new Hono<Env>();
  app.use("*", async (c, next) => {
    keysSeen.push(c.req.header("idempotency-key"));
    const auth = c.req.header("authorization");
    if (!auth?.startsWith("Bearer ")) return c.json({ error: "unauthorized" }, 401);
    c.set("principal", auth.slice("Bearer ".length));
    await next();
  });
  // Payments are rows in the server's own database, written in one transaction: a 503 left nothing behind.
  app.use(
    "/payments",
    honoIdempotency<Env>({ store, scope: (c) => c.get("principal"), effect: "owned-store" }),
  );
  app.post("/payments", async (c) => {
    const { amount } = await c.req.json<{ amount: number }>();
    await gate;
    if (failNext > 0) {
      failNext--;
      return c.json({ error: "database restarting" }, 503);
    }
    const payment = { id: `pay_${payments.length + 1}`, amount, principal: c.get("principal") };
    payments.push(payment);
    c.header("Location", `/payments/${payment.id}`);
    c.header("Set-Cookie", "session=server-secret; HttpOnly");
    return c.json(payment, 201);
  });

  server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }) as Server;
  await once(server, "listening");
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(async () => {
  release?.();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A clock whose sleeps return at once (or run `during` first); it remembers every wait. */
function instantClock(during?: () => Promise<void>): Clock & { readonly sleeps: number[] } {
  let now = Date.now();
  const sleeps: number[] = [];
  return {
    sleeps,
    now: () => now,
    async sleep(ms) {
      sleeps.push(ms);
      now += ms;
      await during?.();
    },
  };
}

function pay(amount: number, key: string, extra: { fetch?: FetchFunction; clock?: Clock } = {}) {
  return idempotentFetch(`${base}/payments`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: "Bearer alice" },
    body: JSON.stringify({ amount }),
    idempotencyKey: key,
    clock: extra.clock ?? instantClock(),
    retry: { timeoutMs: 0 },
    ...(extra.fetch ? { fetch: extra.fetch } : {}),
  });
}

describe("idempotentFetch against the Hono middleware on a real socket", () => {
  it("retries a response lost after the server committed, with the same key, and gets the replay: one payment", async () => {
    let lost: string | undefined;
    // The server answers, then the connection drops before the client reads the answer.
    const losesFirstResponse: FetchFunction = async (input, init) => {
      const response = await fetch(input, init);
      if (lost !== undefined) return response;
      lost = await response.text();
      throw new TypeError("fetch failed", { cause: new Error("other side closed") });
    };
    const { response, attempts, replayed } = await pay(1200, "checkout-1", { fetch: losesFirstResponse });

    expect([response.status, attempts, replayed]).toEqual([201, 2, true]);
    expect(await response.text()).toBe(lost);
    expect(response.headers.get("location")).toBe("/payments/pay_1");
    expect(response.headers.get("set-cookie")).toBeNull();
    expect(payments).toHaveLength(1);
    expect(keysSeen).toEqual(["checkout-1", "checkout-1"]);
  });

  it("retries a 503 the server did not record, and the handler runs again to success", async () => {
    failNext = 1;
    const clock = instantClock();
    const { response, attempts, replayed } = await pay(500, "checkout-2", { clock });

    expect([response.status, attempts, replayed]).toEqual([201, 2, false]);
    expect(payments).toHaveLength(1);
    expect(clock.sleeps).toHaveLength(1);
  });

  it("a duplicate sent while the first runs gets 409, waits Retry-After with the same key, and gets the replay", async () => {
    gate = new Promise((resolve) => {
      release = resolve;
    });
    const first = pay(700, "checkout-3");
    await until(() => keysSeen.length === 1);
    // While the duplicate waits out Retry-After, the first request finishes.
    const clock = instantClock(async () => {
      release?.();
      await first;
    });
    const duplicate = await pay(700, "checkout-3", { clock });

    expect([duplicate.response.status, duplicate.attempts, duplicate.replayed]).toEqual([201, 2, true]);
    expect(clock.sleeps[0]).toBeGreaterThanOrEqual(1_000);
    expect(await (await first).response.json()).toEqual(await duplicate.response.json());
    expect(payments).toHaveLength(1);
  });

  it("turns the same key with another amount into idempotency_key_conflict, and pays nothing more", async () => {
    await pay(1200, "checkout-4");
    const error = await pay(9900, "checkout-4").catch((e: unknown) => e);

    expect(isIdempotentFetchError(error, "idempotency_key_conflict")).toBe(true);
    expect(error).toMatchObject({ attempts: 1, status: 422, problem: { code: "idempotency_key_conflict" } });
    expect(payments).toHaveLength(1);
  });

  it("keeps no Authorization and no cookie in the raw SQLite rows", async () => {
    await pay(1200, "checkout-5");
    const rows = store.database.prepare("SELECT * FROM idempotool_records").all();

    expect(rows).toHaveLength(1);
    const raw = JSON.stringify(rows).toLowerCase();
    for (const secret of ["bearer", "authorization", "cookie", "server-secret"])
      expect(raw).not.toContain(secret);
    expect(raw).toContain("pay_1");
  });
});

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 2));
  expect(condition()).toBe(true);
}
