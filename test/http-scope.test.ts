/**
 * The scope of the Idempotency-Key middleware comes from the authenticated principal, as the adapters'
 * examples show: real Express, Hono and Fastify servers on listening sockets, each with an authentication
 * middleware in front that leaves the user on the request (and lets a request without one through, as a
 * misconfigured app would).
 */
import { once } from "node:events";
import type { Server as NodeServer } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import express from "express";
import Fastify, { type FastifyRequest } from "fastify";
import { Hono } from "hono";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { expressIdempotency } from "../src/http/express.js";
import { fastifyIdempotency } from "../src/http/fastify.js";
import { honoIdempotency } from "../src/http/hono.js";
import { type IdempotencyStore, memoryStore } from "../src/index.js";

interface User {
  readonly id: string;
}

/** The authentication in front: "Bearer <id>" is user <id>; anything else leaves no user. */
function userOf(authorization: string | undefined): User | undefined {
  const id = authorization?.match(/^Bearer\s+(\S+)$/i)?.[1];
  return id === undefined ? undefined : { id };
}

/** How `scope` reads the user the authentication left: the part each test varies. */
type ScopeOf = (user: User | undefined) => string | undefined;

interface Started {
  readonly base: string;
  close(): Promise<void>;
}

interface Driver {
  readonly name: string;
  /** A server with authentication, then the middleware, then `POST /payments`, which records who ran it. */
  start(store: IdempotencyStore, scopeOf: ScopeOf, runs: string[]): Promise<Started>;
}

async function listening(server: NodeServer): Promise<Started> {
  if (!server.listening) await once(server, "listening");
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

const drivers: Driver[] = [
  {
    name: "Express",
    async start(store, scopeOf, runs) {
      type AuthenticatedRequest = express.Request & { user?: User | undefined };
      const app = express();
      app.use(express.json());
      app.use((req: AuthenticatedRequest, _res, next) => {
        req.user = userOf(req.headers.authorization);
        next();
      });
      app.use(expressIdempotency<AuthenticatedRequest>({ store, scope: (req) => scopeOf(req.user) }));
      app.post("/payments", (req: AuthenticatedRequest, res) => {
        runs.push(req.user?.id ?? "nobody");
        res.status(201).json({ for: req.user?.id ?? "nobody" });
      });
      return listening(app.listen(0, "127.0.0.1"));
    },
  },
  {
    name: "Hono",
    async start(store, scopeOf, runs) {
      type Env = { Variables: { user: User | undefined } };
      const app = new Hono<Env>();
      app.use("*", async (c, next) => {
        c.set("user", userOf(c.req.header("authorization")));
        await next();
      });
      app.use("/payments", honoIdempotency<Env>({ store, scope: (c) => scopeOf(c.get("user")) }));
      app.post("/payments", (c) => {
        runs.push(c.get("user")?.id ?? "nobody");
        return c.json({ for: c.get("user")?.id ?? "nobody" }, 201);
      });
      return listening(serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }) as NodeServer);
    },
  },
  {
    name: "Fastify",
    async start(store, scopeOf, runs) {
      // Where an auth plugin (@fastify/jwt) would put `request.user`, kept here without a type augmentation.
      const users = new WeakMap<FastifyRequest, User>();
      const app = Fastify();
      app.addHook("onRequest", async (request) => {
        const user = userOf(request.headers.authorization);
        if (user) users.set(request, user);
      });
      await app.register(fastifyIdempotency({ store, scope: (request) => scopeOf(users.get(request)) }));
      app.post("/payments", async (request, reply) => {
        runs.push(users.get(request)?.id ?? "nobody");
        return reply.code(201).send({ for: users.get(request)?.id ?? "nobody" });
      });
      await app.listen({ port: 0, host: "127.0.0.1" });
      return listening(app.server);
    },
  },
];

describe.each(drivers)("the scope behind $name comes from the authenticated principal", (driver) => {
  let store: IdempotencyStore;
  let runs: string[];
  let server: Started | undefined;

  beforeEach(() => {
    store = memoryStore();
    runs = [];
  });
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  async function start(scopeOf: ScopeOf): Promise<Started> {
    server = await driver.start(store, scopeOf, runs);
    return server;
  }

  const post = (s: Started, key: string, headers: Record<string, string> = {}) =>
    fetch(`${s.base}/payments`, {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": key, ...headers },
      body: JSON.stringify({ amount: 1200 }),
    });

  it("keeps users apart whatever header the client sends: naming another user replays nothing of theirs", async () => {
    const s = await start((user) => user?.id);
    const alice = await post(s, "k-1", { authorization: "Bearer alice" });
    const bob = await post(s, "k-1", { authorization: "Bearer bob", "x-user": "alice" });

    expect(await alice.json()).toEqual({ for: "alice" });
    expect(await bob.json()).toEqual({ for: "bob" });
    expect(bob.headers.get("idempotent-replayed")).toBeNull();
    expect(runs).toEqual(["alice", "bob"]);
  });

  it("refuses a request with no authenticated user with 500 problem+json: the handler does not run, nothing is stored", async () => {
    const s = await start((user) => user?.id);
    const reply = await post(s, "k-anon", { "x-user": "alice" });

    expect(reply.status).toBe(500);
    expect(reply.headers.get("content-type")).toBe("application/problem+json");
    const problem = (await reply.json()) as { code: string; detail: string };
    expect(problem.code).toBe("invalid_options");
    expect(problem.detail).toContain("scope() gave undefined");
    expect(runs).toEqual([]);
    expect((await store.list({})).records).toEqual([]);
  });

  it('refuses the "undefined" a String() of no user makes, so requests without a user never share one scope', async () => {
    const s = await start((user) => String(user?.id));
    const first = await post(s, "k-shared");
    const second = await post(s, "k-shared", { "x-user": "mallory" });

    for (const reply of [first, second]) {
      expect(reply.status).toBe(500);
      expect(await reply.json()).toMatchObject({ code: "invalid_options" });
    }
    expect(runs).toEqual([]);
    expect((await store.list({})).records).toEqual([]);
  });
});
