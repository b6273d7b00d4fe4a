/**
 * The timeout every postgresStore statement runs under: one timer for all statements in flight, armed for
 * the oldest deadline. Fake clients and fake timers: nothing here sleeps or needs a server.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { boundedQueries } from "../src/postgres/bounded-query.js";
import type { PgQueryConfig } from "../src/postgres/index.js";
import { cancelStatement } from "../src/postgres/postgres-clients.js";

/** A client whose every answer the test gives by hand. */
function handClient() {
  const calls: { config: PgQueryConfig; answer: (rows: unknown[]) => void; fail: (error: Error) => void }[] =
    [];
  return {
    calls,
    query(config: PgQueryConfig) {
      return new Promise<{ rows: unknown[] }>((resolve, reject) => {
        calls.push({ config, answer: (rows) => resolve({ rows }), fail: reject });
      });
    },
  };
}

/** Whether a promise has settled, without waiting for it. */
async function state(promise: Promise<unknown>): Promise<"pending" | "fulfilled" | "rejected"> {
  const pending = Symbol("pending");
  try {
    return (await Promise.race([promise, Promise.resolve(pending)])) === pending ? "pending" : "fulfilled";
  } catch {
    return "rejected";
  }
}

describe("boundedQueries", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance", "Date"] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("answers the client's rows and hands pg the config with twice the timeout as query_timeout", async () => {
    const client = handClient();
    const run = boundedQueries(client, 1_000);
    const answer = run("get", {
      name: "n",
      text: "SELECT 1",
      values: [1],
      query_timeout: run.queryTimeoutMs,
    });
    expect(client.calls[0]?.config).toEqual({
      name: "n",
      text: "SELECT 1",
      values: [1],
      query_timeout: 2_000,
    });
    client.calls[0]?.answer([{ one: 1 }]);
    await expect(answer).resolves.toEqual([{ one: 1 }]);
  });

  it("caps pg's query_timeout at what setTimeout can hold", () => {
    expect(boundedQueries(handClient(), 2_147_483_647).queryTimeoutMs).toBe(2_147_483_647);
  });

  it("fails each statement at its own deadline, never earlier, naming the operation", async () => {
    const client = handClient();
    const run = boundedQueries(client, 1_000);
    const first = run("claim", { text: "a" });
    first.catch(() => {});
    await vi.advanceTimersByTimeAsync(400);
    const second = run("settle", { text: "b" });
    second.catch(() => {});
    await vi.advanceTimersByTimeAsync(599);
    expect(await state(first)).toBe("pending");
    await vi.advanceTimersByTimeAsync(1);
    await expect(first).rejects.toThrow(/claim got no answer within 1000 ms \(statementTimeoutMs\)/);
    expect(await state(second)).toBe("pending");
    await vi.advanceTimersByTimeAsync(399);
    expect(await state(second)).toBe("pending");
    await vi.advanceTimersByTimeAsync(1);
    await expect(second).rejects.toThrow(/settle got no answer/);
  });

  it("still times out a statement that started after the ones before it answered", async () => {
    const client = handClient();
    const run = boundedQueries(client, 1_000);
    for (let i = 0; i < 3; i++) {
      const quick = run("get", { text: "q" });
      client.calls.at(-1)?.answer([]);
      await quick;
      await vi.advanceTimersByTimeAsync(300);
    }
    const stuck = run("get", { text: "stuck" });
    stuck.catch(() => {});
    await vi.advanceTimersByTimeAsync(999);
    expect(await state(stuck)).toBe("pending");
    await vi.advanceTimersByTimeAsync(1);
    await expect(stuck).rejects.toThrow(/statementTimeoutMs/);
  });

  it("hands a late answer to onLateRows, and swallows a late failure", async () => {
    const client = handClient();
    const run = boundedQueries(client, 100);
    const late: unknown[] = [];
    const answered = run("claim", { text: "a" }, (rows) => late.push(...rows));
    const failed = run("claim", { text: "b" }, (rows) => late.push(...rows));
    for (const p of [answered, failed]) p.catch(() => {});
    await vi.advanceTimersByTimeAsync(100);
    await expect(answered).rejects.toThrow(/statementTimeoutMs/);
    await expect(failed).rejects.toThrow(/statementTimeoutMs/);
    client.calls[0]?.answer([{ claimed: true }]);
    client.calls[1]?.fail(new Error("connection lost"));
    await vi.advanceTimersByTimeAsync(0);
    expect(late).toEqual([{ claimed: true }]);
  });

  it("asks a client that can stop a statement to stop the one it gave up on, and only that one", async () => {
    const client = handClient();
    const cancelled: string[] = [];
    const stoppable = {
      query(config: PgQueryConfig) {
        return Object.assign(client.query(config), {
          [cancelStatement]: () => cancelled.push(config.text),
        });
      },
    };
    const run = boundedQueries(stoppable, 100);
    const quick = run("get", { text: "quick" });
    const stuck = run("claim", { text: "stuck" });
    stuck.catch(() => {});
    client.calls[0]?.answer([]);
    await quick;
    await vi.advanceTimersByTimeAsync(99);
    expect(cancelled).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    await expect(stuck).rejects.toThrow(/statementTimeoutMs/);
    expect(cancelled).toEqual(["stuck"]);
  });

  it("passes on the client's failure, and a client that throws instead of rejecting", async () => {
    const client = handClient();
    const run = boundedQueries(client, 1_000);
    const failing = run("get", { text: "a" });
    client.calls[0]?.fail(new Error("syntax error"));
    await expect(failing).rejects.toThrow("syntax error");
    const throwing = boundedQueries(
      {
        query() {
          throw new TypeError("not connected");
        },
      },
      1_000,
    );
    await expect(throwing("get", { text: "a" })).rejects.toThrow("not connected");
  });
});

describe("boundedQueries and the event loop", () => {
  const timeouts = () => process.getActiveResourcesInfo().filter((kind) => kind === "Timeout").length;

  it("keeps the process alive while a statement is in flight, and not once none is", async () => {
    const client = handClient();
    const run = boundedQueries(client, 60_000);
    const idle = timeouts();
    const first = run("get", { text: "a" });
    expect(timeouts()).toBe(idle + 1);
    client.calls[0]?.answer([]);
    await first;
    expect(timeouts()).toBe(idle);
    const second = run("get", { text: "b" });
    expect(timeouts()).toBe(idle + 1);
    client.calls[1]?.answer([]);
    await second;
    expect(timeouts()).toBe(idle);
  });
});
