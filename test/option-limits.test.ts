/**
 * Every duration and size option of every API refuses, at configuration time, what no timer or date can
 * hold: NaN, ±Infinity, negatives, fractions, strings, and values past the documented limits
 * (docs/concepts.md, "Limits"). Each is `invalid_options` naming the option, and nothing runs: the
 * store is not called and the tool does not run.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import Database from "better-sqlite3";
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { idempotentTool } from "../src/ai-sdk/index.js";
import { listMcpTools } from "../src/audit/index.js";
import { chaos } from "../src/chaos/index.js";
import { idempotencyMiddleware, idempotentFetch } from "../src/http/index.js";
import {
  type IdempotencyStore,
  idempotent,
  maxTimerMs,
  maxTtlMs,
  memoryStore,
  tieredStore,
} from "../src/index.js";
import { loopTool } from "../src/loops/index.js";
import { registerIdempotentTool } from "../src/mcp/index.js";
import { checkpoint, sqliteTransactionalOnce } from "../src/ops/index.js";
import { otelEvents } from "../src/otel/index.js";
import { postgresStore } from "../src/postgres/index.js";
import { reconcileOnce, startReconciler } from "../src/reconcile/index.js";
import { redisStore } from "../src/redis/index.js";
import { saga } from "../src/saga/index.js";
import { fakeClock } from "../src/testing/index.js";
import {
  badValues,
  expectInvalidOption,
  expectInvalidOptionAsync,
  largestValue,
  type OptionKind,
} from "./fixtures/bad-options.js";
import { countingClient, testPool } from "./fixtures/pg-helpers.js";

/** A memory store that records every operation, to prove a bad option never reaches it. */
function watchedStore(): { store: IdempotencyStore; calls: string[] } {
  const inner = memoryStore();
  const calls: string[] = [];
  const store = new Proxy(inner, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        calls.push(String(property));
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store, calls };
}

interface OptionRow {
  /** The option as the error names it. */
  readonly option: string;
  readonly kind: OptionKind;
  readonly zeroAllowed?: boolean;
}

/** One test per option and bad value; `attempt` builds (or calls) the API with the value in place. */
function describeOptions(
  api: string,
  rows: readonly OptionRow[],
  attempt: (option: string, value: unknown, store: IdempotencyStore, ran: () => void) => unknown,
): void {
  describe(`${api} refuses bad numbers, naming the option, before anything runs`, () => {
    for (const row of rows) {
      for (const [label, value] of badValues(row.kind, { zeroAllowed: row.zeroAllowed ?? false })) {
        it(`${row.option}: ${label}`, async () => {
          const { store, calls } = watchedStore();
          let runs = 0;
          await expectInvalidOptionAsync(
            async () => attempt(row.option, value, store, () => runs++),
            row.option,
          );
          expect(calls).toEqual([]);
          expect(runs).toBe(0);
        });
      }
    }
  });
}

/** The options of `idempotent()` that every wrapper passes through. */
const coreRows: readonly OptionRow[] = [
  { option: "ttlMs", kind: "window" },
  { option: "leaseMs", kind: "timer" },
  { option: "waitMs", kind: "timer", zeroAllowed: true },
  { option: "maxResultBytes", kind: "size" },
];

describeOptions(
  "idempotent()",
  [...coreRows, { option: "similar.windowMs", kind: "window" }],
  async (option, value, store, ran) => {
    const options =
      option === "similar.windowMs"
        ? { similar: { fields: ["to"], windowMs: value as number } }
        : { [option]: value as number };
    const tool = idempotent(async () => ran(), { name: "send_email", store, clock: fakeClock(), ...options });
    await tool({ to: "alice@example.com" }, { key: "k-1" });
  },
);

describe("idempotent() at the limits", () => {
  it("accepts ttlMs of ten years and leaseMs and waitMs of 2^31 − 1 ms, and its records expire on a real date", async () => {
    const clock = fakeClock();
    const tool = idempotent(async () => "sent", {
      name: "send_email",
      store: memoryStore(),
      clock,
      ttlMs: largestValue("window"),
      leaseMs: largestValue("timer"),
      waitMs: largestValue("timer"),
      maxResultBytes: largestValue("size"),
    });
    const first = await tool({ to: "alice@example.com" }, { key: "k-1" });
    const again = await tool({ to: "alice@example.com" }, { key: "k-1" });
    expect(again.was_replay).toBe(true);
    expect(Date.parse(first.expires_at) - clock.now()).toBe(maxTtlMs);
  });

  it("keeps a tool's name to 200 well-formed characters: it is stored in every record", () => {
    const make = (name: string) => () => idempotent(async () => "sent", { name, store: memoryStore() });
    expect(make("t".repeat(200))).not.toThrow();
    expectInvalidOption(make("t".repeat(201)), "name");
    expect(make("t".repeat(201))).toThrow(/`name` must be at most 200 characters, got 201/);
    // Stored as U+FFFD, "send\ud800" and "send\ud801" would be one tool to a store.
    expect(make("send\ud800")).toThrow(/`name` has a lone UTF-16 surrogate at index 4/);
    expect(make("send_\u{1F4E7}")).not.toThrow();
    // checkpoint() keeps its tool in the record alike.
    const cp = checkpoint(memoryStore(), { tool: "send\udfff", key: "k-1", args: {} });
    return expect(cp).rejects.toThrow(/`tool` has a lone UTF-16 surrogate at index 4/);
  });

  it("accepts waitMs: 0, which fails at once", () => {
    expect(() =>
      idempotent(async () => "sent", { name: "send_email", store: memoryStore(), waitMs: 0 }),
    ).not.toThrow();
  });
});

describeOptions("memoryStore()", [{ option: "maxRecords", kind: "size" }], (_option, value) =>
  memoryStore({ maxRecords: value as number }),
);

describeOptions("tieredStore()", [{ option: "maxEntries", kind: "size" }], (_option, value, store) =>
  tieredStore({ store, maxEntries: value as number }),
);

describe("postgresStore() refuses bad numbers, naming the option, before any statement", () => {
  const pool = testPool();
  afterAll(() => pool.end());
  for (const [label, value] of badValues("timer")) {
    it(`statementTimeoutMs: ${label}`, () => {
      const client = countingClient(pool);
      expectInvalidOption(
        () => postgresStore({ client, statementTimeoutMs: value as number }),
        "statementTimeoutMs",
      );
      expect(client.count).toBe(0);
    });
  }
  it("accepts statementTimeoutMs of 2^31 − 1 ms", () => {
    expect(() => postgresStore({ client: pool, statementTimeoutMs: maxTimerMs })).not.toThrow();
  });
});

describe("redisStore() refuses bad numbers, naming the option, before any command", () => {
  // Never connected: the store must refuse the option before it sends anything.
  const client = new Redis({ lazyConnect: true });
  afterAll(() => client.disconnect());
  for (const [label, value] of badValues("timer")) {
    it(`commandTimeoutMs: ${label}`, () => {
      expectInvalidOption(
        () => redisStore({ client, commandTimeoutMs: value as number }),
        "commandTimeoutMs",
      );
      expect(client.status).toBe("wait");
    });
  }
  it("accepts commandTimeoutMs of 2^31 − 1 ms", () => {
    expect(() => redisStore({ client, commandTimeoutMs: maxTimerMs })).not.toThrow();
  });
});

describeOptions("checkpoint()", coreRows, async (option, value, store, ran) => {
  await checkpoint(store, { tool: "send_sms", key: "k-1", args: {}, [option]: value });
  ran();
});

describe("sqliteTransactionalOnce() refuses bad numbers, naming the option, before the transaction", () => {
  const db = new Database(":memory:");
  afterAll(() => db.close());
  const rows: OptionRow[] = [
    { option: "ttlMs", kind: "window" },
    { option: "maxResultBytes", kind: "size" },
  ];
  for (const row of rows) {
    for (const [label, value] of badValues(row.kind)) {
      it(`${row.option}: ${label}`, async () => {
        let writes = 0;
        await expectInvalidOptionAsync(
          () =>
            sqliteTransactionalOnce(
              db,
              { table: "dedup", tool: "t", key: "k-1", args: {}, [row.option]: value },
              () => {
                writes++;
              },
            ),
          row.option,
        );
        expect(writes).toBe(0);
        // The dedup table was never even looked for.
        expect(db.prepare("SELECT count(*) AS n FROM sqlite_master").get()).toEqual({ n: 0 });
      });
    }
  }
});

describeOptions(
  "idempotencyMiddleware()",
  [
    { option: "ttlMs", kind: "window" },
    { option: "leaseMs", kind: "timer" },
    { option: "waitMs", kind: "timer", zeroAllowed: true },
    { option: "maxResponseBytes", kind: "size" },
    { option: "retryAfterSeconds", kind: "timer", zeroAllowed: true },
  ],
  (option, value, store) => idempotencyMiddleware({ store, scope: () => "tenant-1", [option]: value }),
);

describeOptions(
  "idempotentFetch()",
  [
    { option: "retry.maxAttempts", kind: "size" },
    { option: "retry.maxElapsedMs", kind: "timer", zeroAllowed: true },
    { option: "retry.initialDelayMs", kind: "timer", zeroAllowed: true },
    { option: "retry.maxDelayMs", kind: "timer", zeroAllowed: true },
    { option: "retry.timeoutMs", kind: "timer", zeroAllowed: true },
  ],
  (option, value, _store, ran) =>
    idempotentFetch("https://api.example.test/charges", {
      method: "POST",
      idempotencyKey: "k-1",
      retry: { [option.slice("retry.".length)]: value },
      fetch: async () => {
        ran();
        return new Response("{}");
      },
    }),
);

describeOptions(
  "reconcileOnce()",
  [
    { option: "leaseMs", kind: "timer" },
    { option: "limit", kind: "size" },
    { option: "pageSize", kind: "size" },
    { option: "tools.send_email.ttlMs", kind: "window" },
    { option: "tools.send_email.maxResultBytes", kind: "size" },
  ],
  (option, value, store, ran) => {
    const tool = option.startsWith("tools.") ? { [option.split(".")[2]!]: value } : {};
    const top = option.startsWith("tools.") ? {} : { [option]: value };
    return reconcileOnce({
      store,
      tools: {
        send_email: {
          verify: () => {
            ran();
            return { status: "not_executed" };
          },
          ...tool,
        },
      },
      ...top,
    });
  },
);

describeOptions("startReconciler()", [{ option: "intervalMs", kind: "timer" }], (_option, value, store) =>
  startReconciler({ store, tools: {}, intervalMs: value as number }),
);

describeOptions(
  "saga()",
  [
    { option: "ttlMs", kind: "window" },
    { option: "leaseMs", kind: "timer" },
    { option: "waitMs", kind: "timer", zeroAllowed: true },
  ],
  (option, value, store, ran) =>
    saga({
      name: "charge_card",
      store,
      run: () => {
        ran();
        return { externalId: "ch_1" };
      },
      [option]: value,
    }),
);

describeOptions(
  "otelEvents()",
  [
    { option: "abandonAfterMs", kind: "window" },
    { option: "maxOpenCalls", kind: "size" },
  ],
  (option, value) => otelEvents({ [option]: value }),
);

describeOptions(
  "chaos()",
  [
    { option: "leaseMs", kind: "timer" },
    { option: "timeoutMs", kind: "timer" },
  ],
  (option, value, _store, ran) =>
    chaos(
      () => {
        ran();
        return async () => "sent";
      },
      { [option]: value },
    ),
);

// The command would fail if it were started: the option is refused before it is.
describeOptions("listMcpTools()", [{ option: "timeoutMs", kind: "timer" }], (_option, value) =>
  listMcpTools({ command: "false" }, { timeoutMs: value as number }),
);

describeOptions("loopTool()", coreRows, async (option, value, store, ran) => {
  loopTool(async () => ran(), { name: "send_email", store, [option]: value });
});

describeOptions("ai-sdk idempotentTool()", coreRows, (option, value, store, ran) =>
  idempotentTool(
    {
      description: "Send an email",
      inputSchema: undefined as never,
      execute: async () => {
        ran();
        return {};
      },
    },
    { name: "send_email", store, [option]: value },
  ),
);

describeOptions("registerIdempotentTool()", coreRows, (option, value, store, ran) =>
  registerIdempotentTool(
    new McpServer({ name: "limits", version: "1.0.0" }),
    "send_email",
    { description: "Send an email", inputSchema: {} },
    async () => {
      ran();
      return { content: [] };
    },
    { store, [option]: value },
  ),
);
