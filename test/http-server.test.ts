/**
 * The Idempotency-Key middleware (draft-ietf-httpapi-idempotency-key-header) behind each framework: one
 * spec, run against Hono (app.request), Express (a real listening socket) and Fastify (inject).
 */
import type { AddressInfo } from "node:net";
import express from "express";
import Fastify from "fastify";
import { Hono } from "hono";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { expressIdempotency } from "../src/http/express.js";
import { fastifyIdempotency } from "../src/http/fastify.js";
import { honoIdempotency } from "../src/http/hono.js";
import type { SharedMiddlewareOptions } from "../src/http/index.js";
import { type IdempotencyStore, memoryStore } from "../src/index.js";

/** What the routes do, the same in every framework. */
class PaymentsApp {
  runs: { path: string; principal: string; body: unknown }[] = [];
  private release: (() => void) | undefined;
  private gate: Promise<void> | undefined;

  /** Hold `/payments/slow` until `open()`. */
  hold(): void {
    this.gate = new Promise((resolve) => {
      this.release = resolve;
    });
  }

  open(): void {
    this.release?.();
  }

  async respond(path: string, principal: string, body: unknown): Promise<AppReply> {
    this.runs.push({ path, principal, body });
    const n = this.runs.length;
    const json = { "content-type": "application/json" };
    switch (path) {
      case "/payments/throw":
        // What a handler that sent the email and then failed looks like: the framework answers 500.
        throw new Error("SMTP connection reset after DATA");
      case "/payments/fail":
        return { status: 500, headers: json, body: JSON.stringify({ error: "database down" }) };
      case "/payments/invalid":
        return { status: 400, headers: json, body: JSON.stringify({ error: "amount is required" }) };
      case "/payments/declined":
        return { status: 402, headers: json, body: JSON.stringify({ error: "card declined", attempt: n }) };
      case "/payments/slow":
        await this.gate;
        break;
    }
    return {
      status: 201,
      headers: {
        ...json,
        location: `/payments/pay_${n}`,
        "set-cookie": "session=server-secret-cookie; HttpOnly",
        "x-request-id": `req-${n}`,
      },
      body: JSON.stringify({ id: `pay_${n}`, principal, body }),
    };
  }
}

interface AppReply {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

interface Reply {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
}

interface TestRequest {
  readonly method?: string;
  readonly path?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string;
}

interface Server {
  request(request: TestRequest): Promise<Reply>;
  close(): Promise<void>;
}

interface Driver {
  readonly name: string;
  start(options: SharedMiddlewareOptions, app: PaymentsApp): Promise<Server>;
}

/** "Bearer alice" is alice: what an authentication layer would have established. */
function principalOf(authorization: string | undefined | null): string {
  return authorization?.replace(/^Bearer\s+/i, "") ?? "anonymous";
}

const routes = [
  "/payments",
  "/payments/throw",
  "/payments/fail",
  "/payments/invalid",
  "/payments/declined",
  "/payments/slow",
];

const drivers: Driver[] = [
  {
    name: "Hono (app.request)",
    async start(options, app) {
      const hono = new Hono();
      hono.onError((_error, c) => c.json({ error: "internal" }, 500));
      hono.use(
        "*",
        honoIdempotency({ ...options, scope: (c) => principalOf(c.req.header("authorization")) }),
      );
      for (const path of routes) {
        hono.post(path, async (c) => {
          const text = await c.req.text();
          const reply = await app.respond(
            path,
            principalOf(c.req.header("authorization")),
            text ? JSON.parse(text) : null,
          );
          return new Response(reply.body, { status: reply.status, headers: reply.headers });
        });
      }
      hono.get("/payments", (c) => c.json({ list: [] }));
      return {
        async request(r) {
          const response = await hono.request(r.path ?? "/payments", {
            method: r.method ?? "POST",
            headers: { "content-type": "application/json", ...r.headers },
            ...(r.body === undefined ? {} : { body: r.body }),
          });
          return { status: response.status, headers: response.headers, text: await response.text() };
        },
        async close() {},
      };
    },
  },
  {
    name: "Express (listening socket)",
    async start(options, app) {
      const server = express();
      server.use(express.json());
      server.use(expressIdempotency({ ...options, scope: (req) => principalOf(req.headers.authorization) }));
      for (const path of routes) {
        server.post(path, async (req, res) => {
          const reply = await app.respond(path, principalOf(req.headers.authorization), req.body ?? null);
          res.status(reply.status).set(reply.headers).send(reply.body);
        });
      }
      server.get("/payments", (_req, res) => {
        res.json({ list: [] });
      });
      const listening = server.listen(0, "127.0.0.1");
      await new Promise<void>((resolve) => listening.once("listening", () => resolve()));
      const { port } = listening.address() as AddressInfo;
      return {
        async request(r) {
          const response = await fetch(`http://127.0.0.1:${port}${r.path ?? "/payments"}`, {
            method: r.method ?? "POST",
            headers: { "content-type": "application/json", ...r.headers },
            ...(r.body === undefined ? {} : { body: r.body }),
          });
          return { status: response.status, headers: response.headers, text: await response.text() };
        },
        close: () =>
          new Promise<void>((resolve, reject) => {
            listening.closeAllConnections();
            listening.close((error) => (error ? reject(error) : resolve()));
          }),
      };
    },
  },
  {
    name: "Fastify (inject)",
    async start(options, app) {
      const server = Fastify();
      await server.register(
        fastifyIdempotency({ ...options, scope: (request) => principalOf(request.headers.authorization) }),
      );
      for (const path of routes) {
        server.post(path, async (request, reply) => {
          const answer = await app.respond(
            path,
            principalOf(request.headers.authorization),
            request.body ?? null,
          );
          return reply.code(answer.status).headers(answer.headers).send(answer.body);
        });
      }
      server.get("/payments", async () => ({ list: [] }));
      await server.ready();
      return {
        async request(r) {
          const response = await server.inject({
            method: (r.method ?? "POST") as "POST",
            url: r.path ?? "/payments",
            headers: { "content-type": "application/json", ...r.headers },
            ...(r.body === undefined ? {} : { payload: r.body }),
          });
          const headers = new Headers();
          for (const [name, value] of Object.entries(response.headers)) {
            if (Array.isArray(value)) for (const v of value) headers.append(name, v);
            else if (value !== undefined) headers.append(name, String(value));
          }
          return { status: response.statusCode, headers, text: response.body };
        },
        close: () => server.close(),
      };
    },
  },
];

const alice = { authorization: "Bearer alice" };
const bob = { authorization: "Bearer bob" };
const payment = JSON.stringify({ amount: 1200, currency: "eur" });

describe.each(drivers)("idempotency middleware behind $name", (driver) => {
  let app: PaymentsApp;
  let store: IdempotencyStore;
  let server: Server | undefined;

  beforeEach(() => {
    app = new PaymentsApp();
    store = memoryStore();
  });
  afterEach(async () => {
    app.open();
    await server?.close();
    server = undefined;
  });

  async function start(options: Partial<SharedMiddlewareOptions> = {}): Promise<Server> {
    server = await driver.start({ store, routes: ["/payments/*"], ...options }, app);
    return server;
  }

  const post = (s: Server, key: string | undefined, extra: TestRequest = {}) =>
    s.request({
      body: payment,
      ...extra,
      headers: { ...alice, ...(key === undefined ? {} : { "idempotency-key": key }), ...extra.headers },
    });

  it("runs the first request and replays it with the same status, body and allowed headers, marked Idempotent-Replayed", async () => {
    const s = await start();
    const first = await post(s, '"8e03978e-40d5-43e8-bc93-6894a57f9324"');
    const again = await post(s, '"8e03978e-40d5-43e8-bc93-6894a57f9324"');

    expect(first.status).toBe(201);
    expect(first.headers.get("set-cookie")).toContain("session=server-secret-cookie");
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    expect(again.status).toBe(201);
    expect(again.text).toBe(first.text);
    expect(again.headers.get("location")).toBe("/payments/pay_1");
    expect(again.headers.get("content-type")).toBe(first.headers.get("content-type"));
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.headers.get("set-cookie")).toBeNull();
    expect(again.headers.get("x-request-id")).toBeNull();
    expect(app.runs).toHaveLength(1);
  });

  it("answers a missing key with 400 problem+json and does not run the handler", async () => {
    const s = await start();
    const reply = await post(s, undefined);

    expect(reply.status).toBe(400);
    expect(reply.headers.get("content-type")).toBe("application/problem+json");
    expect(JSON.parse(reply.text)).toEqual({
      type: "about:blank",
      title: "Bad Request",
      status: 400,
      detail: expect.stringContaining("requires an Idempotency-Key header"),
      code: "idempotency_key_missing",
    });
    expect(app.runs).toHaveLength(0);
  });

  it("answers a malformed key (two keys, an unterminated string, an empty string) with 400", async () => {
    const s = await start();
    for (const key of ['"a", "b"', '"unterminated', '""', "has space"]) {
      const reply = await post(s, key);
      expect(reply.status, key).toBe(400);
      expect(JSON.parse(reply.text).code, key).toBe("idempotency_key_invalid");
    }
    expect(app.runs).toHaveLength(0);
  });

  it("takes the quoted sf-string and the bare token as the same key", async () => {
    const s = await start();
    await post(s, '"order-42"');
    const again = await post(s, "order-42");

    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(app.runs).toHaveLength(1);
  });

  it("answers the same key with a different body or path with 422, without running the handler", async () => {
    const s = await start();
    await post(s, "k-422");
    const otherBody = await post(s, "k-422", { body: JSON.stringify({ amount: 9900, currency: "eur" }) });
    const otherPath = await post(s, "k-422", { path: "/payments/declined" });

    for (const reply of [otherBody, otherPath]) {
      expect(reply.status).toBe(422);
      expect(reply.headers.get("content-type")).toBe("application/problem+json");
      expect(JSON.parse(reply.text)).toMatchObject({ status: 422, code: "idempotency_key_conflict" });
    }
    expect(app.runs).toHaveLength(1);
  });

  it("counts a JSON body by its canonical form: key order and whitespace do not make a conflict", async () => {
    const s = await start();
    await post(s, "k-json", { body: '{"amount":1200,"currency":"eur"}' });
    const again = await post(s, "k-json", { body: '{ "currency": "eur",\n  "amount": 1200 }' });

    expect(again.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(app.runs).toHaveLength(1);
  });

  it("answers 409 with Retry-After while the first request runs, and the handler runs once", async () => {
    const s = await start();
    app.hold();
    const first = post(s, "k-slow", { path: "/payments/slow" });
    await until(() => app.runs.length === 1);

    const concurrent = await post(s, "k-slow", { path: "/payments/slow" });
    expect(concurrent.status).toBe(409);
    expect(concurrent.headers.get("retry-after")).toBe("1");
    expect(JSON.parse(concurrent.text)).toMatchObject({ status: 409, code: "idempotency_key_in_use" });

    app.open();
    expect((await first).status).toBe(201);
    const later = await post(s, "k-slow", { path: "/payments/slow" });
    expect(later.headers.get("idempotent-replayed")).toBe("true");
    expect(app.runs).toHaveLength(1);
  });

  it("with waitMs, concurrent identical requests run the handler once and all get its response", async () => {
    const s = await start({ waitMs: 10_000 });
    app.hold();
    const replies = [1, 2, 3].map(() => post(s, "k-wait", { path: "/payments/slow" }));
    await until(() => app.runs.length === 1);
    app.open();
    const done = await Promise.all(replies);

    expect(done.map((r) => r.status)).toEqual([201, 201, 201]);
    expect(new Set(done.map((r) => r.text)).size).toBe(1);
    expect(done.filter((r) => r.headers.get("idempotent-replayed") === "true")).toHaveLength(2);
    expect(app.runs).toHaveLength(1);
  });

  it("by default, a handler that throws gets 409 outcome_unknown, and a retry does not run it again", async () => {
    const s = await start();
    const first = await post(s, "k-throw", { path: "/payments/throw" });
    const retry = await post(s, "k-throw", { path: "/payments/throw" });

    for (const reply of [first, retry]) {
      expect(reply.status).toBe(409);
      expect(reply.headers.get("content-type")).toBe("application/problem+json");
      expect(JSON.parse(reply.text)).toMatchObject({ status: 409, code: "outcome_unknown" });
      expect(reply.text).not.toContain("SMTP");
    }
    expect(app.runs).toHaveLength(1);
    expect((await store.list({})).records).toMatchObject([{ status: "unknown" }]);
  });

  it("by default, a 5xx leaves the outcome unknown: 409 outcome_unknown, and a retry does not run the handler", async () => {
    const s = await start();
    const first = await post(s, "k-500d", { path: "/payments/fail" });
    const retry = await post(s, "k-500d", { path: "/payments/fail" });

    expect([first.status, retry.status]).toEqual([409, 409]);
    expect(JSON.parse(retry.text)).toMatchObject({ code: "outcome_unknown" });
    expect(app.runs).toHaveLength(1);
  });

  it("under owned-store, a handler that throws releases the key: the framework's 500, and a retry runs again", async () => {
    const s = await start({ effect: "owned-store" });
    const first = await post(s, "k-throw-owned", { path: "/payments/throw" });
    const retry = await post(s, "k-throw-owned", { path: "/payments/throw" });

    expect([first.status, retry.status]).toEqual([500, 500]);
    expect(app.runs).toHaveLength(2);
    expect(await store.list({})).toEqual({ records: [] });
  });

  it("under owned-store, does not record a 5xx: the key is released and a retry runs the handler again", async () => {
    const s = await start({ effect: "owned-store" });
    const first = await post(s, "k-500", { path: "/payments/fail" });
    const retry = await post(s, "k-500", { path: "/payments/fail" });

    expect([first.status, retry.status]).toEqual([500, 500]);
    expect(retry.headers.get("idempotent-replayed")).toBeNull();
    expect(app.runs).toHaveLength(2);
    expect(await store.list({})).toEqual({ records: [] });
  });

  it("does not record a 400 validation failure, so the corrected retry is free to run", async () => {
    const s = await start();
    await post(s, "k-400", { path: "/payments/invalid" });
    const retry = await post(s, "k-400", { path: "/payments/invalid" });

    expect(retry.status).toBe(400);
    expect(retry.headers.get("idempotent-replayed")).toBeNull();
    expect(app.runs).toHaveLength(2);
  });

  it("records a 402 (a declined payment is an outcome) and replays it", async () => {
    const s = await start();
    const first = await post(s, "k-402", { path: "/payments/declined" });
    const again = await post(s, "k-402", { path: "/payments/declined" });

    expect(again.status).toBe(402);
    expect(again.text).toBe(first.text);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(app.runs).toHaveLength(1);
  });

  it("records what the configured `record` says: 5xx too, if asked", async () => {
    const s = await start({ record: () => true });
    await post(s, "k-500r", { path: "/payments/fail" });
    const again = await post(s, "k-500r", { path: "/payments/fail" });

    expect(again.status).toBe(500);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(app.runs).toHaveLength(1);
  });

  it("keeps principals apart: the same key from two principals is two requests, each replaying its own", async () => {
    const s = await start();
    const forAlice = await post(s, "shared-key");
    const forBob = await post(s, "shared-key", { headers: bob });
    const aliceAgain = await post(s, "shared-key");

    expect(JSON.parse(forAlice.text).principal).toBe("alice");
    expect(JSON.parse(forBob.text).principal).toBe("bob");
    expect(forBob.headers.get("idempotent-replayed")).toBeNull();
    expect(aliceAgain.text).toBe(forAlice.text);
    expect(app.runs).toHaveLength(2);
  });

  it("never stores Authorization, request cookies or Set-Cookie: the raw records hold none of them", async () => {
    const s = await start();
    await post(s, "k-secrets", {
      headers: { authorization: "Bearer alice", cookie: "client=client-secret-cookie" },
    });

    const { records } = await store.list({});
    expect(records).toHaveLength(1);
    const raw = JSON.stringify(records);
    for (const secret of [
      "Bearer",
      "client-secret-cookie",
      "server-secret-cookie",
      "set-cookie",
      "authorization",
    ]) {
      expect(raw.toLowerCase()).not.toContain(secret.toLowerCase());
    }
    expect(JSON.parse(records[0]!.result!)).toMatchObject({ status: 201, encoding: "utf8" });
  });

  it("passes through what it does not guard: other methods, other routes, and a missing key when not required", async () => {
    const s = await start({ routes: ["/payments/:action"] });
    expect((await s.request({ method: "GET", path: "/payments" })).status).toBe(200);
    expect((await post(s, undefined, { path: "/payments" })).status).toBe(201);
    expect((await post(s, undefined, { path: "/payments/declined" })).status).toBe(400);
    await server?.close();

    const optional = await start({ required: false });
    expect((await post(optional, undefined, { path: "/payments/declined" })).status).toBe(402);
    expect(app.runs).toHaveLength(2);
  });
});

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 2));
  expect(condition()).toBe(true);
}

describe("the Express adapter on routes it does not guard", () => {
  it("passes a streaming response through as it is written, not buffered", async () => {
    const server = express();
    server.use(expressIdempotency({ store: memoryStore(), scope: () => "anyone" }));
    let finish: (() => void) | undefined;
    server.get("/events", (_req, res) => {
      res.setHeader("content-type", "text/event-stream");
      res.write("data: first\n\n");
      finish = () => res.end("data: last\n\n");
    });
    const listening = server.listen(0, "127.0.0.1");
    await new Promise<void>((resolve) => listening.once("listening", () => resolve()));
    try {
      const { port } = listening.address() as AddressInfo;
      // The headers and the first event arrive while the handler is still writing.
      const response = await fetch(`http://127.0.0.1:${port}/events`);
      const reader = response.body!.getReader();
      expect(new TextDecoder().decode((await reader.read()).value)).toBe("data: first\n\n");
      finish?.();
      await reader.cancel();
    } finally {
      listening.closeAllConnections();
      await new Promise((resolve) => listening.close(resolve));
    }
  });
});
