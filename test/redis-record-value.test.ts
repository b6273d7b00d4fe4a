// The Redis store keeps a record as one string value: a header of decimal fields, then its strings back
// to back, each as long as the header says. These cases hold the strings the header could be confused
// with, and the values a record's key must never be mistaken for.
import { describe, expect, it } from "vitest";
import type { IdempotencyRecord } from "../src/index.js";
import { redisStore } from "../src/redis/index.js";
import { recordName } from "../src/redis/record-key.js";
import { claimRequest } from "./fixtures/claim-request.js";
import { redisTestFile } from "./fixtures/redis-test-file.js";

const { client, fresh } = redisTestFile("value");

async function freshStore(clock: "server" | "request" = "server") {
  const prefix = await fresh();
  return { prefix, store: redisStore({ client, prefix, clock }) };
}

const DAY = 86_400_000;

// Strings that look like a header, hold its delimiters, or are not ASCII.
const awkward = [
  "",
  " ",
  "-",
  "\n",
  "a b\nc",
  "1 completed 2 3 4 1 7 10 64 - -\n",
  "ends with a newline\n",
  "\r\n\t\u0000\u007f",
  "héllo wörld — ☃ 中文",
  "𝄞 👩‍👩‍👧 e\u0301",
  "\u2028\u2029",
  '{"text":"quoted \\"and\\" escaped"}',
];

describe("redisStore keeps every string byte for byte", () => {
  it("round-trips tool, fingerprint, token, result and error holding delimiters, newlines and any Unicode", async () => {
    const { store } = await freshStore();
    for (const [i, text] of awkward.entries()) {
      const request = claimRequest({
        key: `k${i}`,
        tool: `tool ${text}`,
        fingerprint: `fp\n${text}`,
        token: `t ${text}`,
      });
      const claimed = await store.claim(request);
      expect(claimed.claimed).toBe(true);
      const held = await store.claim({ ...request, token: "other" });
      expect(held.record).toMatchObject({
        tool: request.tool,
        fingerprint: request.fingerprint,
        token: request.token,
      });

      const settled = await store.settle({
        scope: request.scope,
        key: request.key,
        token: request.token,
        status: "failed",
        result: text,
        error: `${text}|${text}`,
        ttlMs: DAY,
        now: 0,
      });
      expect(settled).toMatchObject({ tool: request.tool, fingerprint: request.fingerprint, result: text });
      for (const record of [
        (await store.claim({ ...request, token: "other" })).record,
        await store.get(request, 0),
        (await store.list({ keyPrefix: request.key, scope: request.scope })).records[0],
      ]) {
        expect(record).toMatchObject({
          tool: request.tool,
          fingerprint: request.fingerprint,
          token: request.token,
          status: "failed",
          result: text,
          error: `${text}|${text}`,
        });
      }
    }
  });

  it("keeps null apart from the empty string, for the result and the error alike", async () => {
    const { store } = await freshStore();
    const outcomes = [
      [null, null],
      ["", null],
      [null, ""],
      ["", ""],
      ["-", "-"],
    ] as const;
    for (const [i, [result, error]] of outcomes.entries()) {
      const request = claimRequest({ key: `k${i}` });
      await store.claim(request);
      const settle = { ...request, status: "completed" as const, result, error, ttlMs: DAY, now: 0 };
      expect(await store.settle(settle)).toMatchObject({ result, error });
      expect(await store.get(request, 0)).toMatchObject({ result, error });
      expect((await store.claim({ ...request, token: "other" })).record).toMatchObject({ result, error });
    }
  });

  it("keeps a result of several megabytes, multi-byte characters included", async () => {
    const { store } = await freshStore();
    const result = JSON.stringify({ text: "ü€𝄞 ".repeat(300_000) });
    await store.claim(claimRequest());
    await store.settle({ ...claimRequest(), status: "completed", result, error: "e\n", ttlMs: DAY, now: 0 });
    const replay = await store.claim(claimRequest({ token: "token-b" }));
    expect(replay.record.result).toBe(result);
    expect(replay.record.error).toBe("e\n");
  });

  it("keeps every string through renew and takeover: a takeover drops the result and keeps the error", async () => {
    const { store } = await freshStore("request");
    const now = Date.now() + 30 * DAY;
    const request = claimRequest({ now, tool: "t\n1", fingerprint: "é f", token: "tok en" });
    await store.claim(request);
    expect(await store.renew({ ...request, leaseMs: 90_000 })).toBe(true);
    expect(await store.get(request, now)).toMatchObject({
      tool: "t\n1",
      fingerprint: "é f",
      token: "tok en",
      leaseExpiresAt: now + 90_000,
      result: null,
      error: null,
    });
    for (const [i, error] of [null, "", "time\nout ☃"].entries()) {
      const from = i === 0 ? "tok en" : `new ${i - 1}`;
      await store.settle({
        ...request,
        token: from,
        status: "unknown",
        result: "partial",
        error,
        ttlMs: DAY,
        now,
      });
      const taken = await store.takeover({
        ...request,
        fromToken: from,
        token: `new ${i}`,
        leaseMs: 1_000,
        now,
      });
      const expected: Partial<IdempotencyRecord> = {
        tool: "t\n1",
        fingerprint: "é f",
        token: `new ${i}`,
        status: "in_progress",
        attempts: i + 2,
        result: null,
        error,
      };
      expect(taken).toMatchObject(expected);
      expect(await store.get(request, now)).toMatchObject(expected);
    }
  });
});

describe("redisStore never takes another value at a record's key for a record", () => {
  const foreign: readonly [string, (name: string) => Promise<unknown>][] = [
    ["a plain string", (name) => client.set(name, "hello world")],
    [
      "a string that starts like a header",
      (name) => client.set(name, "1 completed 2 3 4 1 5 5 5 - -\nshort"),
    ],
    ["an expired-looking string", (name) => client.set(name, "5 in_progress")],
    ["a hash", (name) => client.hset(name, "status", "completed", "expiresAt", "1")],
  ];

  for (const [label, write] of foreign) {
    it(`fails closed on ${label}, and leaves it as it was`, async () => {
      const { prefix, store } = await freshStore();
      const name = recordName(prefix, "tenant-a", "order-1");
      await write(name);
      const type = await client.type(name);
      const before = type === "string" ? await client.get(name) : await client.hgetall(name);

      await expect(store.claim(claimRequest())).rejects.toThrow();
      await expect(store.get(claimRequest(), 0)).rejects.toThrow();
      const id = { scope: "tenant-a", key: "order-1" };
      if (type === "string") {
        expect(
          await store.settle({
            ...id,
            token: "token-a",
            status: "completed",
            result: "1",
            error: null,
            ttlMs: DAY,
            now: 0,
          }),
        ).toBeNull();
        expect(
          await store.renew({ ...id, token: "token-a", leaseMs: 1_000, ttlMs: 86_400_000, now: 0 }),
        ).toBe(false);
        expect(await store.release({ ...id, token: "token-a" })).toBe(false);
        expect(
          await store.takeover({
            ...id,
            fromToken: "token-a",
            token: "b",
            leaseMs: 1,
            ttlMs: 86_400_000,
            now: 0,
          }),
        ).toBeNull();
        expect((await store.list({})).records).toEqual([]);
      }
      const after = type === "string" ? await client.get(name) : await client.hgetall(name);
      expect(after).toEqual(before);
    });
  }
});
