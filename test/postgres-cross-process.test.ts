import { afterAll, afterEach, describe, expect, it } from "vitest";
import { idempotent, isIdempotencyError } from "../src/index.js";
import { postgresStore } from "../src/postgres/index.js";
import { fakeClock } from "../src/testing/index.js";
import {
  eventually,
  type TcpProxy,
  tablesDroppedAfterEach,
  tcpProxy,
  testPool,
} from "./fixtures/pg-helpers.js";
import { countedTool, rejection } from "./fixtures/tools.js";

const pool = testPool({ max: 6 });
const table = tablesDroppedAfterEach(pool);
afterAll(async () => {
  await pool.end();
});

describe("fencing: a worker paused past its lease", () => {
  it("cannot settle, renew or release once another worker took over", async () => {
    const name = table();
    const paused = postgresStore({ client: pool, table: name });
    const successor = postgresStore({ client: pool, table: name, clockOffsetMs: 2_000 });
    const id = { scope: "default", key: "charge-1" };
    const request = { ...id, tool: "charge", fingerprint: "f".repeat(64), ttlMs: 86_400_000, now: 0 };
    expect((await paused.claim({ ...request, token: "token-paused", leaseMs: 1_000 })).claimed).toBe(true);
    const taken = await successor.takeover({
      ...id,
      fromToken: "token-paused",
      token: "token-next",
      leaseMs: 60_000,
      ttlMs: 86_400_000,
      now: 0,
    });
    expect(taken).toMatchObject({ token: "token-next", attempts: 2 });

    const settle = {
      ...id,
      status: "completed",
      result: '"late"',
      error: null,
      ttlMs: 86_400_000,
      now: 0,
    } as const;
    expect(await paused.settle({ ...settle, token: "token-paused" })).toBeNull();
    expect(
      await paused.renew({ ...id, token: "token-paused", leaseMs: 60_000, ttlMs: 86_400_000, now: 0 }),
    ).toBe(false);
    expect(await paused.release({ ...id, token: "token-paused" })).toBe(false);
    expect(await paused.get(id, 0)).toEqual(taken);
  });

  it("reports LeaseLostError through idempotent() instead of claiming success", async () => {
    const name = table();
    let resume: () => void = () => {};
    const pausedUntil = new Promise<void>((resolve) => {
      resume = resolve;
    });
    let effects = 0;
    // A fake clock that nobody advances: the paused worker never renews, as if SIGSTOPped.
    const pausedTool = idempotent(
      async () => {
        effects++;
        await pausedUntil;
        return "paused-result";
      },
      {
        name: "charge",
        store: postgresStore({ client: pool, table: name }),
        clock: fakeClock(),
        leaseMs: 1_000,
        effect: "native-key",
      },
    );
    const successorTool = idempotent(
      async () => {
        effects++;
        return "successor-result";
      },
      {
        name: "charge",
        store: postgresStore({ client: pool, table: name, clockOffsetMs: 5_000 }),
        effect: "native-key",
      },
    );

    const pausedCall = rejection(pausedTool({ amount: 5 }, { key: "charge-1" }));
    await eventually(async () => effects === 1, "the paused worker has started its call");
    expect(await successorTool({ amount: 5 }, { key: "charge-1" })).toMatchObject({
      result: "successor-result",
      was_replay: false,
    });
    resume();
    const error = await pausedCall;
    expect(isIdempotencyError(error, "lease_lost")).toBe(true);
    // The record keeps the successor's outcome, and every repeat replays it.
    expect(await successorTool({ amount: 5 }, { key: "charge-1" })).toMatchObject({
      result: "successor-result",
      was_replay: true,
    });
    expect(effects).toBe(2);
  });
});

describe("outage: the server unreachable", () => {
  let proxy: TcpProxy | undefined;
  afterEach(async () => {
    await proxy?.stop();
    proxy = undefined;
  });

  it("fails closed with store_unavailable on a closed port, and the tool does not run", async () => {
    const closed = testPool({ port: 1, connectionTimeoutMillis: 1_000 });
    try {
      const { tool, runs } = countedTool(postgresStore({ client: closed, table: table() }));
      const error = await rejection(tool({ n: 1 }, { key: "k" }));
      expect(isIdempotencyError(error, "store_unavailable")).toBe(true);
      expect(runs()).toBe(0);
    } finally {
      await closed.end();
    }
  });

  it("fails closed while the server is gone, and proceeds once it is back", async () => {
    const name = table();
    proxy = await tcpProxy();
    const viaProxy = testPool({ port: proxy.port, max: 2, connectionTimeoutMillis: 2_000 });
    try {
      const { tool, runs } = countedTool(
        postgresStore({ client: viaProxy, table: name, statementTimeoutMs: 3_000 }),
      );
      expect(await tool({ n: 1 }, { key: "before" })).toMatchObject({ result: 1, was_replay: false });

      await proxy.stop();
      for (const key of ["before", "during"]) {
        const error = await rejection(tool({ n: 1 }, { key }));
        expect(isIdempotencyError(error, "store_unavailable"), key).toBe(true);
      }
      expect(runs()).toBe(1);

      await proxy.start();
      expect(await tool({ n: 1 }, { key: "during" })).toMatchObject({ result: 1, was_replay: false });
      expect(await tool({ n: 1 }, { key: "before" })).toMatchObject({ result: 1, was_replay: true });
      expect(runs()).toBe(2);
    } finally {
      await proxy.stop();
      await viaProxy.end();
    }
  });

  it("gives up on a query that never gets an answer within statementTimeoutMs, and recovers", async () => {
    const name = table();
    await postgresStore({ client: pool, table: name }).migrate();
    proxy = await tcpProxy();
    // The pool's connect timeout (which frees a slot stuck in a handshake) is longer than the store's
    // timeout on purpose: the store gives up first, by itself.
    const viaProxy = testPool({ port: proxy.port, max: 2, connectionTimeoutMillis: 3_000 });
    try {
      const { tool, runs } = countedTool(
        postgresStore({ client: viaProxy, table: name, statementTimeoutMs: 500 }),
      );
      expect(await tool({ n: 1 }, { key: "warm" })).toMatchObject({ was_replay: false });

      // Connections stay open but nothing comes back: a statement already sent, or a new connection
      // whose handshake never completes. Neither may wait forever.
      proxy.freeze();
      for (let i = 0; i < 3; i++) {
        const started = Date.now();
        const error = await rejection(tool({ n: 1 }, { key: "frozen" }));
        expect(isIdempotencyError(error, "store_unavailable")).toBe(true);
        expect(String((error as Error).cause)).toMatch(/statementTimeoutMs|Query read timeout/);
        expect(Date.now() - started).toBeLessThan(10_000);
      }
      expect(runs()).toBe(1);

      proxy.thaw();
      await eventually(async () => {
        const outcome = await tool({ n: 1 }, { key: "after" }).then(
          () => true,
          () => false,
        );
        return outcome;
      }, "calls proceed after the network recovers");
      expect(runs()).toBe(2);
    } finally {
      await proxy.stop();
      await viaProxy.end();
    }
  });
});
