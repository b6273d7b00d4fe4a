/**
 * The Idempotency-Key protocol on both sides, on the embedded SQLite store.
 *
 * A Hono payments API guarded by the idempotency middleware, and an agent's tool calling it with
 * idempotentFetch. The first response is lost on the way back (the server already charged the card);
 * the client retries with the same key and gets the original response back, marked as a replay, and the
 * card is charged once. Then a buggy caller reuses the key for another amount and is refused.
 *
 * Run: node --import tsx examples/http-server-and-client.ts (exits non-zero if any check fails)
 */
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { keys } from "idempotool";
import { type FetchFunction, idempotentFetch, isIdempotentFetchError } from "idempotool/http";
import { honoIdempotency } from "idempotool/http/hono";
import { sqliteStore } from "idempotool/sqlite";

const failures: string[] = [];
function check(what: string, ok: boolean): void {
  console.log(`${ok ? "ok " : "NO "} ${what}`);
  if (!ok) failures.push(what);
}

const dir = mkdtempSync(join(tmpdir(), "idempotool-http-example-"));
const store = sqliteStore({ path: join(dir, "idempotency.db") });

// --- The server: authentication first, so the middleware can scope keys by principal. -------------
const charges: { id: string; amount: number; customer: string }[] = [];
type Env = { Variables: { customer: string } };
const app = new Hono<Env>();
app.use("*", async (c, next) => {
  const token = c.req.header("authorization")?.replace(/^Bearer /, "");
  if (!token) return c.json({ error: "unauthorized" }, 401);
  c.set("customer", token === "token-alice" ? "cus_alice" : "cus_other");
  await next();
});
app.use("/charges", honoIdempotency<Env>({ store, scope: (c) => c.get("customer"), routes: ["/charges"] }));
app.post("/charges", async (c) => {
  const { amount } = await c.req.json<{ amount: number }>();
  const charge = { id: `ch_${charges.length + 1}`, amount, customer: c.get("customer") };
  charges.push(charge); // the side effect that must happen once
  c.header("Location", `/charges/${charge.id}`);
  return c.json(charge, 201);
});

const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }) as Server;
await once(server, "listening");
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/charges`;

try {
  // --- The client: the key comes from the agent's state, made once before the first attempt. -------
  const state: Record<string, unknown> = {};
  const key = keys.fromState(state, "charge_card");

  let lostOnce = false;
  const flakyNetwork: FetchFunction = async (input, init) => {
    const response = await fetch(input, init);
    if (lostOnce) return response;
    lostOnce = true;
    await response.arrayBuffer(); // the server answered and committed...
    throw new TypeError("fetch failed", { cause: new Error("connection reset") }); // ...but the answer is lost
  };
  const charge = (amount: number, fetchFn?: FetchFunction) =>
    idempotentFetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer token-alice" },
      body: JSON.stringify({ amount }),
      idempotencyKey: key,
      retry: { maxAttempts: 3, initialDelayMs: 10 },
      ...(fetchFn ? { fetch: fetchFn } : {}),
    });

  const { response, attempts, replayed } = await charge(1200, flakyNetwork);
  const body = (await response.json()) as { id: string; amount: number };
  console.log(`charge: HTTP ${response.status}, ${attempts} attempts, replayed: ${replayed}, id ${body.id}`);
  check("the lost response was retried with the same key (2 attempts)", attempts === 2);
  check("the retry got the original response, marked as a replay", replayed && response.status === 201);
  check("the replay kept the Location header", response.headers.get("location") === `/charges/${body.id}`);
  check("the card was charged once", charges.length === 1 && body.id === "ch_1");

  try {
    await charge(9900);
    check("reusing the key for another amount is refused", false);
  } catch (error) {
    const conflict = isIdempotentFetchError(error, "idempotency_key_conflict");
    console.log(`reuse for 9900: ${conflict ? `${error.code} (HTTP ${error.status})` : String(error)}`);
    check("reusing the key for another amount is refused with idempotency_key_conflict", conflict);
  }
  check("still one charge", charges.length === 1);

  const rows = JSON.stringify(store.database.prepare("SELECT * FROM idempotool_records").all());
  check("the store holds the response but no Authorization header", !/token-alice|authorization/i.test(rows));
} finally {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}

if (failures.length > 0) {
  console.error(`${failures.length} check(s) failed`);
  process.exit(1);
}
console.log("All checks passed.");
