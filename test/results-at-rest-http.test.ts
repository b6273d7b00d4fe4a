/**
 * Stored responses of the HTTP middleware are data at rest like tool results: `encryption` seals them for
 * their record and keys the request fingerprints, `redact` keeps named JSON body fields out of the store.
 */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { fingerprint } from "../src/core/fingerprint.js";
import { idempotencyMiddleware, type NextHandler } from "../src/http/index.js";
import { requestPrint } from "../src/http/request-fingerprint.js";
import { type IdempotencyStore, memoryStore } from "../src/index.js";
import { tamper } from "./fixtures/tamper.js";

const k1 = randomBytes(32);
const encryption = { keys: { k1 }, current: "k1" };

function post(key: string, body: unknown): Request {
  return new Request("http://api.test/payments", {
    method: "POST",
    headers: { "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify(body),
  });
}

/** Every record's stored strings, as a store dump would show them. */
async function dump(store: IdempotencyStore): Promise<string> {
  const page = await store.list({ limit: 100 });
  return JSON.stringify(page.records);
}

describe("the HTTP middleware's stored responses at rest", () => {
  it("seals stored responses with `encryption`, and keys the request fingerprint", async () => {
    const store = memoryStore();
    let runs = 0;
    const next: NextHandler = async () => {
      runs++;
      return Response.json({ id: "pay_1", card: { number: "4242424242424242" } }, { status: 201 });
    };
    const guard = idempotencyMiddleware({ store, scope: () => "tenant-a", encryption });
    const first = await guard(post("k-1", { otp: "493027", cents: 100 }), next);
    const replay = await guard(post("k-1", { otp: "493027", cents: 100 }), next);
    expect(await first.json()).toEqual({ id: "pay_1", card: { number: "4242424242424242" } });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(await replay.json()).toEqual({ id: "pay_1", card: { number: "4242424242424242" } });
    expect(runs).toBe(1);
    const stored = await dump(store);
    expect(stored).not.toContain("4242");
    expect(stored).not.toContain("pay_1");
    const record = (await store.get({ scope: "tenant-a", key: "k-1" }, Date.now()))!;
    expect(record.fingerprint).toMatch(/^hmac-sha256:k1:[0-9a-f]{16}:[0-9a-f]{64}$/);
    // The plain fingerprint of the request would let a dump test guesses of the one-time code.
    const plain = fingerprint(await requestPrint(post("k-1", { otp: "493027", cents: 100 })));
    expect(record.fingerprint).not.toContain(plain);
  });

  it("never serves one tenant's sealed response to another, even copied into its record", async () => {
    const store = memoryStore();
    const next: NextHandler = async (request) =>
      Response.json({ tenant: request.headers.get("x-tenant") }, { status: 201 });
    const guard = idempotencyMiddleware({
      store,
      scope: (request) => request.headers.get("x-tenant") ?? "anonymous",
      encryption,
    });
    const as = (tenant: string) => {
      const request = post("k-1", { cents: 100 });
      request.headers.set("x-tenant", tenant);
      return request;
    };
    await guard(as("tenant-a"), next);
    await guard(as("tenant-b"), next);
    const a = (await store.get({ scope: "tenant-a", key: "k-1" }, Date.now()))!;
    // Overwrite B's record with A's sealed response, keeping B's own fingerprint.
    await tamper(store, "k-1", { scope: "tenant-b", status: "completed", result: a.result, error: null });
    const replay = await guard(as("tenant-b"), next);
    expect(replay.status).toBe(500);
    expect(await replay.json()).toMatchObject({ code: "result_undecryptable" });
  });

  it("redacts named fields of a JSON response body in what is stored: replays get the redacted body", async () => {
    const store = memoryStore();
    const next: NextHandler = async () =>
      Response.json({ id: "pay_1", card: { number: "4242424242424242", brand: "visa" } }, { status: 201 });
    const guard = idempotencyMiddleware({ store, scope: () => "tenant-a", redact: ["card.number"] });
    const first = await guard(post("k-1", { cents: 100 }), next);
    expect(await first.json()).toMatchObject({ card: { number: "4242424242424242" } });
    expect(await dump(store)).not.toContain("4242");
    const replay = await guard(post("k-1", { cents: 100 }), next);
    expect(await replay.json()).toEqual({ id: "pay_1", card: { number: "[redacted]", brand: "visa" } });
    expect(replay.headers.get("content-type")).toContain("application/json");
  });

  it("names the option at fault for a bad `redact` or `encryption`", () => {
    const scope = () => "t";
    expect(() => idempotencyMiddleware({ store: memoryStore(), scope, redact: ["card..number"] })).toThrow(
      /idempotencyMiddleware\(\): option `redact`/,
    );
    expect(() =>
      idempotencyMiddleware({ store: memoryStore(), scope, encryption: { keys: { k1 }, current: "k2" } }),
    ).toThrow(/idempotencyMiddleware\(\): option `encryption.current`/);
  });
});
