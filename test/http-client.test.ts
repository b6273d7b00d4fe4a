/**
 * idempotentFetch (seed OP-1) against undici's MockAgent intercepting the global fetch: the same key on
 * every attempt, what is retried and how long it waits, and the idempotency answers as typed errors.
 * Time is injected: no test sleeps.
 */
import { type Dispatcher, getGlobalDispatcher, MockAgent, setGlobalDispatcher } from "undici";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  type FetchFunction,
  IdempotentFetchError,
  type IdempotentFetchInit,
  idempotentFetch,
  isIdempotentFetchError,
} from "../src/http/index.js";
import type { Clock } from "../src/index.js";
import { fakeClock } from "../src/testing/index.js";

const origin = "https://api.test";
const url = `${origin}/payments`;
const start = Date.parse("2026-01-01T00:00:00Z");

/** A clock whose sleeps return at once and move time on; it remembers every wait. */
function instantClock(): Clock & { readonly sleeps: number[] } {
  let now = start;
  const sleeps: number[] = [];
  return {
    sleeps,
    now: () => now,
    async sleep(ms, signal) {
      signal?.throwIfAborted();
      sleeps.push(ms);
      now += ms;
    },
  };
}

interface Seen {
  readonly key: string | null;
  readonly contentType: string | null;
  readonly body: string;
}

let agent: MockAgent;
let previous: Dispatcher;
let seen: Seen[];

beforeEach(() => {
  previous = getGlobalDispatcher();
  agent = new MockAgent();
  agent.disableNetConnect();
  setGlobalDispatcher(agent);
  seen = [];
});

afterEach(async () => {
  setGlobalDispatcher(previous);
  await agent.close();
});

function header(headers: Headers | Record<string, string> | undefined, name: string): string | null {
  if (headers === undefined) return null;
  if (headers instanceof Headers) return headers.get(name);
  const found = Object.entries(headers).find(([key]) => key.toLowerCase() === name);
  return found ? String(found[1]) : null;
}

/** Queue one answer from the server for POST /payments; the request is remembered in `seen`. */
function answer(status: number, body: unknown = {}, headers: Record<string, string> = {}): void {
  agent
    .get(origin)
    .intercept({ path: "/payments", method: "POST" })
    .reply((opts) => {
      seen.push({
        key: header(opts.headers, "idempotency-key"),
        contentType: header(opts.headers, "content-type"),
        body:
          opts.body === undefined || opts.body === null
            ? ""
            : Buffer.from(opts.body as Uint8Array).toString(),
      });
      return {
        statusCode: status,
        data: typeof body === "string" ? body : JSON.stringify(body),
        responseOptions: { headers: { "content-type": "application/json", ...headers } },
      };
    });
}

/** Queue a network failure for POST /payments. */
function dropConnection(): void {
  agent
    .get(origin)
    .intercept({ path: "/payments", method: "POST" })
    .replyWithError(new Error("socket hang up"));
}

function send(overrides: Partial<IdempotentFetchInit> = {}) {
  const clock = instantClock();
  const done = idempotentFetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ amount: 1200 }),
    idempotencyKey: "pay-7f3a",
    clock,
    random: () => 0.5,
    retry: { timeoutMs: 0 },
    ...overrides,
  });
  return { done, sleeps: clock.sleeps };
}

describe("idempotentFetch retries", () => {
  it("keeps the same key and body on every attempt, retrying 5xx with exponential backoff and jitter", async () => {
    answer(503);
    answer(502);
    answer(201, { id: "pay_1" });
    const { done, sleeps } = send();
    const { response, attempts, replayed } = await done;

    expect(response.status).toBe(201);
    expect(await response.json()).toEqual({ id: "pay_1" });
    expect(attempts).toBe(3);
    expect(replayed).toBe(false);
    expect(seen.map((s) => s.key)).toEqual(["pay-7f3a", "pay-7f3a", "pay-7f3a"]);
    expect(new Set(seen.map((s) => s.body))).toEqual(new Set(['{"amount":1200}']));
    // 200 ms doubled per retry, jitter 0.5 → three quarters of it.
    expect(sleeps).toEqual([150, 300]);
  });

  it("waits at least Retry-After, given in seconds or as an HTTP date", async () => {
    answer(503, {}, { "retry-after": "3" });
    answer(503, {}, { "retry-after": new Date(start + 3_000 + 5_000).toUTCString() });
    answer(201);
    const { done, sleeps } = send({ retry: { timeoutMs: 0, maxElapsedMs: 60_000 } });

    expect((await done).attempts).toBe(3);
    expect(sleeps).toEqual([3_000, 5_000]);
  });

  it("retries network errors with the same key", async () => {
    dropConnection();
    dropConnection();
    answer(200, { ok: true });
    const { done, sleeps } = send();

    expect((await done).attempts).toBe(3);
    expect(seen.map((s) => s.key)).toEqual(["pay-7f3a"]);
    expect(sleeps).toHaveLength(2);
  });

  it("retries 409 while the first request is in flight, then reports the server's replay", async () => {
    answer(
      409,
      { type: "about:blank", title: "Conflict", status: 409, code: "idempotency_key_in_use" },
      {
        "retry-after": "1",
        "content-type": "application/problem+json",
      },
    );
    answer(201, { id: "pay_1" }, { "idempotent-replayed": "true" });
    const { done, sleeps } = send();
    const result = await done;

    expect(result).toMatchObject({ attempts: 2, replayed: true, idempotencyKey: "pay-7f3a" });
    expect(result.response.status).toBe(201);
    expect(sleeps).toEqual([1_000]);
  });

  it("never retries a 4xx other than 409 in flight: it hands it back after one attempt", async () => {
    for (const status of [400, 404, 409, 429]) {
      answer(status, { error: "no" });
      const { done, sleeps } = send();
      const { response, attempts } = await done;
      expect([response.status, attempts, sleeps.length]).toEqual([status, 1, 0]);
    }
  });

  it("sends byte-identical multipart bodies on every attempt (one boundary, drawn once)", async () => {
    answer(500);
    answer(201);
    const form = new FormData();
    form.set("amount", "1200");
    form.set("receipt", new Blob(["%PDF-1.7"]), "receipt.pdf");
    const { done } = send({ headers: {}, body: form });
    await done;

    expect(seen).toHaveLength(2);
    expect(seen[0]!.contentType).toMatch(/^multipart\/form-data; boundary=/);
    expect(seen[1]).toEqual(seen[0]);
  });
});

describe("idempotentFetch bounds", () => {
  it("after maxAttempts, hands back the last 5xx", async () => {
    for (let i = 0; i < 3; i++) answer(500, { error: "down" });
    const { done, sleeps } = send({ retry: { timeoutMs: 0, maxAttempts: 3 } });
    const { response, attempts } = await done;

    expect([response.status, attempts]).toEqual([500, 3]);
    expect(sleeps).toHaveLength(2);
  });

  it("after maxAttempts, a request still in flight is idempotency_key_in_use, with the server's Retry-After", async () => {
    for (let i = 0; i < 2; i++) {
      answer(
        409,
        { status: 409, title: "Conflict", type: "about:blank", code: "idempotency_key_in_use" },
        {
          "retry-after": "2",
          "content-type": "application/problem+json",
        },
      );
    }
    const { done } = send({ retry: { timeoutMs: 0, maxAttempts: 2 } });
    const error = await done.catch((e: unknown) => e);

    expect(isIdempotentFetchError(error, "idempotency_key_in_use")).toBe(true);
    expect(error).toMatchObject({ attempts: 2, retryAfterMs: 2_000, status: 409, httpStatus: 409 });
    expect((error as IdempotentFetchError).problem?.code).toBe("idempotency_key_in_use");
  });

  it("when no attempt got an answer, says plainly that the outcome is unknown", async () => {
    for (let i = 0; i < 2; i++) dropConnection();
    const { done } = send({ retry: { timeoutMs: 0, maxAttempts: 2 } });
    const error = await done.catch((e: unknown) => e);

    expect(error).toBeInstanceOf(IdempotentFetchError);
    expect(error).toMatchObject({ code: "outcome_unknown", attempts: 2, response: undefined });
    expect((error as Error).message).toMatch(/may or may not have processed.*same idempotency key/);
    expect((error as Error).cause).toBeInstanceOf(Error);
  });

  it("starts no retry whose wait would run past maxElapsedMs", async () => {
    answer(503, {}, { "retry-after": "120" });
    const { done, sleeps } = send({ retry: { timeoutMs: 0, maxElapsedMs: 30_000 } });
    const { response, attempts } = await done;

    expect([response.status, attempts]).toEqual([503, 1]);
    expect(sleeps).toEqual([]);
  });

  it("abandons an attempt that times out and retries it with the same key", async () => {
    const clock = fakeClock(start);
    const keys: (string | null)[] = [];
    const hangsOnce: FetchFunction = (_input, init) => {
      keys.push(new Headers(init?.headers).get("idempotency-key"));
      if (keys.length > 1) return Promise.resolve(new Response("ok"));
      return new Promise((_resolve, reject) => {
        init?.signal?.addEventListener("abort", () => reject(init.signal?.reason));
      });
    };
    const pending = idempotentFetch(url, {
      method: "POST",
      idempotencyKey: "pay-timeout",
      fetch: hangsOnce,
      clock,
      random: () => 0,
      retry: { timeoutMs: 1_000 },
    });

    await clock.advance(1_000); // the first attempt times out
    expect(keys).toHaveLength(1);
    await clock.advance(100); // the backoff: half of 200 ms with jitter 0
    const { attempts, response } = await pending;

    expect([attempts, response.status]).toEqual([2, 200]);
    expect(keys).toEqual(["pay-timeout", "pay-timeout"]);
  });

  it("stops at once when the caller aborts, without retrying", async () => {
    const controller = new AbortController();
    let calls = 0;
    const aborts: FetchFunction = (_input, init) => {
      calls++;
      controller.abort(new Error("user cancelled"));
      return Promise.reject(init?.signal?.reason);
    };
    const { done } = send({ fetch: aborts, signal: controller.signal });

    await expect(done).rejects.toThrow("user cancelled");
    expect(calls).toBe(1);
  });

  it("throws idempotency_key_missing before sending anything when the key is missing", async () => {
    let calls = 0;
    const counting: FetchFunction = async () => {
      calls++;
      return new Response();
    };
    const { done } = send({ fetch: counting, idempotencyKey: undefined as unknown as string });

    await expect(done).rejects.toMatchObject({ code: "idempotency_key_missing" });
    expect(calls).toBe(0);
  });

  it("writes the key as an sf-string when asked", async () => {
    answer(200);
    await send({ keyFormat: "sf-string" }).done;
    expect(seen[0]!.key).toBe('"pay-7f3a"');
  });
});

describe("idempotentFetch errors", () => {
  it("maps 422 to idempotency_key_conflict, with the response and problem details attached", async () => {
    const problem = {
      type: "about:blank",
      title: "Unprocessable Content",
      status: 422,
      detail: "key pay-7f3a was used with another body",
      code: "idempotency_key_conflict",
    };
    answer(422, problem, { "content-type": "application/problem+json" });
    const error = await send().done.catch((e: unknown) => e);

    expect(isIdempotentFetchError(error, "idempotency_key_conflict")).toBe(true);
    const conflict = error as IdempotentFetchError;
    expect(conflict).toMatchObject({ attempts: 1, status: 422, httpStatus: 422, idempotencyKey: "pay-7f3a" });
    expect(conflict.problem).toEqual(problem);
    expect(conflict.message).toContain("used with another body");
    expect(await conflict.response?.json()).toEqual(problem);
    expect(seen).toHaveLength(1);
  });

  it("maps a 400 about the key to the key error codes, and returns other 400s", async () => {
    answer(400, { status: 400, title: "Bad Request", type: "about:blank", code: "idempotency_key_invalid" });
    await expect(send().done).rejects.toMatchObject({ code: "idempotency_key_invalid", attempts: 1 });

    answer(400, { error: { type: "idempotency_error", message: "Idempotency-Key header is missing" } });
    await expect(send().done).rejects.toMatchObject({
      code: "idempotency_key_missing",
      problem: { type: "idempotency_error", detail: "Idempotency-Key header is missing" },
    });

    answer(400, { error: "amount must be positive" });
    expect((await send().done).response.status).toBe(400);
  });

  it("throws outcome_unknown at once for a 409 that says nobody knows whether the request took effect", async () => {
    answer(
      409,
      { status: 409, title: "Conflict", type: "about:blank", code: "outcome_unknown" },
      {
        "content-type": "application/problem+json",
      },
    );
    const { done, sleeps } = send();

    await expect(done).rejects.toMatchObject({ code: "outcome_unknown", attempts: 1 });
    expect(sleeps).toEqual([]);
  });
});
