/**
 * The web-standard middleware itself, with no framework: options, routes, bodies that are not JSON,
 * binary and empty responses, store failures, crashes and effect classes.
 */
import { describe, expect, it } from "vitest";
import {
  createIdempotencyHandler,
  type IdempotencyMiddlewareOptions,
  idempotencyMiddleware,
  type NextHandler,
  recordsByDefault,
} from "../src/http/index.js";
import {
  type IdempotencyEvent,
  type IdempotencyStore,
  isIdempotencyError,
  memoryStore,
} from "../src/index.js";
import { fakeClock } from "../src/testing/index.js";

const scope = () => "tenant-1";

function post(
  path: string,
  key: string | undefined,
  body?: string | Uint8Array,
  headers: Record<string, string> = {},
): Request {
  return new Request(`http://api.test${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(key ? { "idempotency-key": key } : {}), ...headers },
    ...(body === undefined ? {} : { body }),
  });
}

/** A handler that counts its runs and answers what `answer` makes of the request. */
function counting(answer: (request: Request, run: number) => Response | Promise<Response>) {
  const runs: Request[] = [];
  const next: NextHandler = async (request) => {
    runs.push(request);
    return answer(request, runs.length);
  };
  return { runs, next };
}

function middleware(options: Partial<IdempotencyMiddlewareOptions> = {}) {
  return idempotencyMiddleware({ store: memoryStore(), scope, ...options });
}

describe("idempotencyMiddleware options", () => {
  it("refuses to start without a scope function, naming the option", () => {
    expect(() =>
      idempotencyMiddleware({ store: memoryStore() } as unknown as IdempotencyMiddlewareOptions),
    ).toThrow(/option `scope`/);
  });

  it("refuses to replay Set-Cookie, credentials or framing headers, whatever the configuration", () => {
    for (const header of ["Set-Cookie", "authorization", "Content-Length"]) {
      expect(() => middleware({ replayHeaders: ["content-type", header] })).toThrow(/option `replayHeaders`/);
    }
  });

  it("names the option at fault for bad methods, routes and retryAfterSeconds", () => {
    expect(() => middleware({ methods: [] })).toThrow(/option `methods`/);
    expect(() => middleware({ routes: ["orders"] })).toThrow(/option `routes\[0\]`/);
    expect(() => middleware({ retryAfterSeconds: -1 })).toThrow(/option `retryAfterSeconds`/);
    try {
      middleware({ methods: [] });
    } catch (error) {
      expect(isIdempotencyError(error, "invalid_options")).toBe(true);
    }
  });

  it("records by default everything but 5xx and the 4xx that refuse a request", () => {
    expect([200, 201, 204, 302, 402, 409, 410].map(recordsByDefault)).toEqual(Array(7).fill(true));
    expect([400, 401, 403, 404, 413, 415, 422, 429, 500, 502, 503].map(recordsByDefault)).toEqual(
      Array(11).fill(false),
    );
  });
});

describe("idempotencyMiddleware routes and methods", () => {
  it("guards only the configured path patterns: :param is one segment, a final * the rest", async () => {
    const guard = middleware({ routes: ["/orders/:id", "/files/*", /^\/v\d+\/charges$/] });
    const { next } = counting(() => new Response("ok"));
    const status = async (path: string) => (await guard(post(path, undefined, "{}"), next)).status;

    expect(await status("/orders/7")).toBe(400);
    expect(await status("/orders/7/")).toBe(400);
    expect(await status("/files")).toBe(400);
    expect(await status("/files/a/b.txt")).toBe(400);
    expect(await status("/v2/charges")).toBe(400);
    expect(await status("/orders/7/items")).toBe(200);
    expect(await status("/orders")).toBe(200);
    expect(await status("/v2/refunds")).toBe(200);
  });

  it("takes a predicate of the request and a list of methods", async () => {
    const guard = middleware({
      methods: ["put"],
      routes: (request) => request.headers.get("x-guard") === "yes",
    });
    const { next } = counting(() => new Response("ok"));
    const put = (guarded: string) =>
      new Request("http://api.test/anything", { method: "PUT", headers: { "x-guard": guarded }, body: "x" });

    expect((await guard(put("yes"), next)).status).toBe(400);
    expect((await guard(put("no"), next)).status).toBe(200);
    expect((await guard(post("/anything", undefined, "{}", { "x-guard": "yes" }), next)).status).toBe(200);
  });
});

describe("idempotencyMiddleware answers", () => {
  it("types problems under problemTypeBase, with titles that name the problem", async () => {
    const guard = middleware({ problemTypeBase: "https://api.example.com/problems/" });
    const reply = await guard(post("/payments", undefined, "{}"), counting(() => new Response()).next);

    expect(await reply.json()).toEqual({
      type: "https://api.example.com/problems/idempotency_key_missing",
      title: "Idempotency-Key is missing",
      status: 400,
      detail: expect.any(String),
      code: "idempotency_key_missing",
    });
  });

  it("replays a binary body byte for byte (kept as base64)", async () => {
    const store = memoryStore();
    const guard = middleware({ store });
    const bytes = new Uint8Array([0xff, 0x00, 0x80, 0xfe, 0x41]);
    const { runs, next } = counting(
      () => new Response(bytes, { headers: { "content-type": "application/octet-stream" } }),
    );

    const first = await guard(post("/files", "k-bin", "{}"), next);
    const again = await guard(post("/files", "k-bin", "{}"), next);

    expect(new Uint8Array(await first.arrayBuffer())).toEqual(bytes);
    expect(new Uint8Array(await again.arrayBuffer())).toEqual(bytes);
    expect(again.headers.get("content-type")).toBe("application/octet-stream");
    expect(runs).toHaveLength(1);
    const { records } = await store.list({});
    expect(JSON.parse(records[0]!.result!)).toMatchObject({ encoding: "base64" });
  });

  it("replays a 204 with no body and adds no Content-Type the original did not have", async () => {
    const guard = middleware();
    const { next } = counting(() => new Response(null, { status: 204 }));
    await guard(post("/orders/7", "k-204", "{}"), next);
    const again = await guard(post("/orders/7", "k-204", "{}"), next);

    expect(again.status).toBe(204);
    expect(again.body).toBeNull();
    expect(again.headers.get("content-type")).toBeNull();
    expect(again.headers.get("idempotent-replayed")).toBe("true");
  });

  it("fingerprints a body that is not JSON byte for byte", async () => {
    const guard = middleware();
    const { runs, next } = counting(() => new Response("done"));
    const text = (body: string) => post("/notes", "k-text", body, { "content-type": "text/plain" });

    expect((await guard(text("hello"), next)).status).toBe(200);
    expect((await guard(text("hello"), next)).headers.get("idempotent-replayed")).toBe("true");
    expect((await guard(text("hello "), next)).status).toBe(422);
    expect(runs).toHaveLength(1);
  });

  it("lets the handler read the body the middleware fingerprinted", async () => {
    const guard = middleware();
    const { runs, next } = counting(async (request) => Response.json(await request.json()));
    const reply = await guard(post("/orders", "k-read", JSON.stringify({ sku: "A-1" })), next);

    expect(await reply.json()).toEqual({ sku: "A-1" });
    expect(runs).toHaveLength(1);
  });

  it("replays the headers named in replayHeaders", async () => {
    const guard = middleware({ replayHeaders: ["content-type", "x-order-id"] });
    const { next } = counting(
      () => new Response("{}", { headers: { "x-order-id": "o-1", location: "/o/1" } }),
    );
    await guard(post("/orders", "k-h", "{}"), next);
    const again = await guard(post("/orders", "k-h", "{}"), next);

    expect(again.headers.get("x-order-id")).toBe("o-1");
    expect(again.headers.get("location")).toBeNull();
  });

  it("fails closed with 503 problem+json when the store is down: the handler does not run", async () => {
    const broken: IdempotencyStore = {
      ...memoryStore(),
      claim: () => Promise.reject(new Error("connection refused")),
    };
    const guard = middleware({ store: broken });
    const { runs, next } = counting(() => new Response("ok"));
    const reply = await guard(post("/payments", "k-down", "{}"), next);

    expect(reply.status).toBe(503);
    const problem = (await reply.json()) as { detail: string };
    expect(problem).toMatchObject({ status: 503, code: "store_unavailable" });
    expect(problem.detail).not.toContain("connection refused");
    expect(runs).toHaveLength(0);
  });

  it.each([
    ["undefined", undefined],
    ["null", null],
    ["an empty string", ""],
    ["blanks", "   "],
    ["a number", 42],
    ["an object", { id: "alice" }],
    ['"undefined" (String(undefined))', "undefined"],
    ['"null"', "null"],
    ['"[object Object]"', "[object Object]"],
    ["256 characters", "u".repeat(256)],
  ])(
    "refuses a request whose scope() gives %s with 500 problem+json: the handler does not run, nothing is stored",
    async (_what, value) => {
      const store = memoryStore();
      const guard = middleware({ store, scope: () => value as string });
      const { runs, next } = counting(() => new Response("ok"));
      const reply = await guard(post("/payments", "k-scope", "{}"), next);

      expect(reply.status).toBe(500);
      expect(reply.headers.get("content-type")).toBe("application/problem+json");
      const problem = (await reply.json()) as { code: string; detail: string };
      expect(problem.code).toBe("invalid_options");
      expect(problem.detail).toMatch(/scope\(\).*authenticat/s);
      expect(runs).toHaveLength(0);
      expect((await store.list({})).records).toEqual([]);
    },
  );

  it("runs a request again whose first worker died mid-flight under owned-store (its lease passed, so it is taken over)", async () => {
    const store = memoryStore();
    const start = Date.parse("2026-01-01T00:00:00Z");
    const at = (ms: number) =>
      idempotencyMiddleware({
        store,
        scope,
        clock: fakeClock(start + ms),
        leaseMs: 5_000,
        effect: "owned-store",
      });
    // The first worker claims the key and hangs; its clock never moves, so it never renews: as good as dead.
    void at(0)(post("/payments", "k-crash", "{}"), () => new Promise<Response>(() => {}));
    await new Promise((resolve) => setImmediate(resolve));

    expect(
      (await at(1_000)(post("/payments", "k-crash", "{}"), counting(() => new Response()).next)).status,
    ).toBe(409);
    const { runs, next } = counting(() => Response.json({ id: "pay_1" }, { status: 201 }));
    const retried = await at(10_000)(post("/payments", "k-crash", "{}"), next);

    expect(retried.status).toBe(201);
    expect(runs).toHaveLength(1);
    expect((await store.list({})).records[0]).toMatchObject({ status: "completed", attempts: 2 });
  });

  it("by default never runs again a request whose first worker died mid-flight: 409 outcome_unknown after the lease", async () => {
    const store = memoryStore();
    const start = Date.parse("2026-01-01T00:00:00Z");
    const at = (ms: number) =>
      idempotencyMiddleware({ store, scope, clock: fakeClock(start + ms), leaseMs: 5_000 });
    void at(0)(post("/emails", "k-crash", "{}"), () => new Promise<Response>(() => {}));
    await new Promise((resolve) => setImmediate(resolve));

    const { runs, next } = counting(() => Response.json({ sent: true }, { status: 201 }));
    const retried = await at(10_000)(post("/emails", "k-crash", "{}"), next);
    const again = await at(20_000)(post("/emails", "k-crash", "{}"), next);

    for (const reply of [retried, again]) {
      expect(reply.status).toBe(409);
      expect(reply.headers.get("content-type")).toBe("application/problem+json");
      expect(await reply.json()).toMatchObject({ status: 409, code: "outcome_unknown" });
    }
    expect(runs).toHaveLength(0);
  });

  it("by default, a handler that throws leaves the outcome unknown: 409 outcome_unknown, first and on every repeat", async () => {
    const store = memoryStore();
    const guard = middleware({ store });
    let runs = 0;
    const next: NextHandler = () => {
      runs++;
      return Promise.reject(new Error("SMTP connection to 10.0.0.7 reset after DATA"));
    };
    const first = await guard(post("/emails", "k-throw", "{}"), next);
    const again = await guard(post("/emails", "k-throw", "{}"), next);

    for (const reply of [first, again]) {
      expect(reply.status).toBe(409);
      const problem = (await reply.json()) as { code: string; detail: string };
      expect(problem.code).toBe("outcome_unknown");
      expect(problem.detail).toMatch(/may have taken effect/);
      // The handler's own error can name hosts and internals: it goes to onEvent, not to the client.
      expect(problem.detail).not.toContain("10.0.0.7");
    }
    expect(runs).toBe(1);
    expect((await store.list({})).records[0]).toMatchObject({ status: "unknown" });
  });

  it("by default, a 5xx the handler answered leaves the outcome unknown instead of releasing the key", async () => {
    const guard = middleware();
    const { runs, next } = counting(() =>
      Response.json({ error: "mail provider timed out" }, { status: 502 }),
    );
    const first = await guard(post("/emails", "k-502", "{}"), next);
    const again = await guard(post("/emails", "k-502", "{}"), next);

    for (const reply of [first, again]) {
      expect(reply.status).toBe(409);
      expect(await reply.json()).toMatchObject({ code: "outcome_unknown" });
    }
    expect(runs).toHaveLength(1);
  });

  it("still releases the key after a 4xx refusal under the default: the corrected retry runs", async () => {
    const guard = middleware();
    const { runs, next } = counting((_request, run) =>
      run === 1 ? Response.json({ error: "to is required" }, { status: 400 }) : Response.json({ sent: true }),
    );
    expect((await guard(post("/emails", "k-400", "{}"), next)).status).toBe(400);
    expect((await guard(post("/emails", "k-400", "{}"), next)).status).toBe(200);
    expect(runs).toHaveLength(2);
  });

  it("under the irreversible effect, a handler that throws leaves the outcome unknown: 409 outcome_unknown", async () => {
    const guard = middleware({ effect: "irreversible" });
    const next: NextHandler = () => Promise.reject(new Error("socket closed mid-send"));
    const first = await guard(post("/sms", "k-sms", "{}"), next);
    const again = await guard(post("/sms", "k-sms", "{}"), next);

    for (const reply of [first, again]) {
      expect(reply.status).toBe(409);
      expect(await reply.json()).toMatchObject({ code: "outcome_unknown" });
    }
  });

  it("passes a handler's throw on under owned-store, with the key released for the retry", async () => {
    const store = memoryStore();
    const guard = middleware({ store, effect: "owned-store" });
    await expect(
      guard(post("/orders", "k-throw", "{}"), () => Promise.reject(new Error("boom"))),
    ).rejects.toThrow("boom");
    expect((await store.list({})).records).toEqual([]);
  });

  it("sends the first caller its response when it is over maxResponseBytes, and answers a repeat 413 result_too_large naming the option", async () => {
    const guard = middleware({ maxResponseBytes: 16 });
    const { runs, next } = counting(() => Response.json({ report: "x".repeat(100) }));
    const first = await guard(post("/reports", "k-big", "{}"), next);
    const again = await guard(post("/reports", "k-big", "{}"), next);

    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ report: "x".repeat(100) });
    expect(again.status).toBe(413);
    expect(again.headers.get("content-type")).toBe("application/problem+json");
    const problem = (await again.json()) as { status: number; code: string; detail: string };
    expect(problem).toMatchObject({ status: 413, code: "result_too_large" });
    expect(problem.detail).toContain("maxResponseBytes");
    expect(problem.detail).not.toContain("maxResultBytes");
    expect(runs).toHaveLength(1);
  });

  it("names maxResponseBytes in the event that tells the operator the first response was not kept", async () => {
    const events: IdempotencyEvent[] = [];
    const guard = middleware({ maxResponseBytes: 16, onEvent: (event) => events.push(event) });
    await guard(
      post("/reports", "k-big", "{}"),
      counting(() => Response.json({ report: "x".repeat(100) })).next,
    );

    const completed = events.find((event) => event.type === "completed");
    expect(isIdempotencyError(completed?.error, "result_too_large")).toBe(true);
    expect(completed?.error).toMatchObject({ message: expect.stringContaining("maxResponseBytes") });
  });
});

describe("idempotencyMiddleware and deeply nested bodies", () => {
  /** `[[[…]]]`, `levels` deep: as a framework's JSON parser hands it over, and as bytes. */
  const deepText = (levels: number) => `${"[".repeat(levels)}${"]".repeat(levels)}`;

  it("answers 400 invalid_arguments for a parsed body no JSON text can hold, without running the handler", async () => {
    const store = memoryStore();
    const calls: string[] = [];
    const watched = new Proxy(store, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver);
        if (typeof value !== "function") return value;
        return (...args: unknown[]) => {
          calls.push(String(property));
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    const handle = createIdempotencyHandler({ store: watched });
    const { runs, next } = counting(() => new Response("created", { status: 201 }));
    const parsed = JSON.parse(deepText(50_000)) as unknown;
    const response = await handle(post("/notes", "k-deep"), next, { scope, body: () => parsed });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ code: "invalid_arguments" });
    expect(runs).toHaveLength(0);
    expect(calls).toEqual([]);
  });

  it("still tells deep raw JSON bodies apart byte for byte, and replays a repeat", async () => {
    const guard = middleware();
    const { runs, next } = counting((_request, run) => new Response(`run ${run}`, { status: 201 }));
    const first = await guard(post("/notes", "k-raw", deepText(50_000)), next);
    const again = await guard(post("/notes", "k-raw", deepText(50_000)), next);
    const other = await guard(post("/notes", "k-raw", deepText(50_001)), next);
    expect(await first.text()).toBe("run 1");
    expect(await again.text()).toBe("run 1");
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(other.status).toBe(422);
    expect(runs).toHaveLength(1);
  });
});
