import { describe, expect, it, vi } from "vitest";
import { gate, rejection } from "../../test/fixtures/tools.js";
import { fakeClock } from "../testing/fake-clock.js";
import {
  ErrorCode,
  IdempotencyError,
  isIdempotencyError,
  LeaseLostError,
  ResultTooLargeError,
  ResultUnserializableError,
  StoreUnavailableError,
} from "./errors.js";
import type { IdempotencyEvent } from "./events.js";
import { idempotent } from "./idempotent.js";
import { memoryStore } from "./memory-store.js";
import { maxArgumentDepth } from "./option-checks.js";
import type { IdempotentOptions } from "./options.js";
import type { IdempotencyStore } from "./store.js";

/** A memory store that counts every operation, to prove bad input never reaches it. */
function countingStore() {
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

/** `levels` objects (`{ a: { a: … } }`) or arrays (`[[…]]`) inside one another. */
function nested(levels: number, shape: "object" | "array"): unknown {
  let value: unknown = "leaf";
  for (let i = 0; i < levels; i++) value = shape === "object" ? { a: value } : [value];
  return value;
}

function probeTool(options: Partial<IdempotentOptions<unknown, string>> = {}) {
  const { store, calls } = countingStore();
  let runs = 0;
  const tool = idempotent(
    async () => {
      runs++;
      return "ran";
    },
    { name: "create_record", store, clock: fakeClock(), ...options },
  );
  return { tool, calls, runs: () => runs };
}

describe("bad input is rejected before any side effect", () => {
  it("a missing key is idempotency_key_missing (400), never a generated key", async () => {
    const { tool, calls, runs } = probeTool();
    // @ts-expect-error -- a JavaScript caller: TypeScript requires the key (test/idempotent-types.test.ts)
    const error = await rejection(tool({ name: "Alice" }));
    expect(isIdempotencyError(error, "idempotency_key_missing")).toBe(true);
    expect((error as IdempotencyError).httpStatus).toBe(400);
    expect(calls).toEqual([]);
    expect(runs()).toBe(0);
  });

  const badKeys: [string, unknown][] = [
    ["empty", ""],
    ["over 255 characters", "k".repeat(256)],
    ["a number", 42],
    ["an object", { id: 1 }],
    ["holding a lone high surrogate", "order-\ud83d"],
    ["holding a lone low surrogate", "\ude00-order"],
    ["in the key space of saga compensations", `~compensation~${"0".repeat(64)}`],
  ];
  for (const [label, key] of badKeys) {
    it(`a key that is ${label} is idempotency_key_invalid (400)`, async () => {
      const { tool, calls, runs } = probeTool();
      const error = await rejection(tool({ name: "Alice" }, { key: key as string }));
      expect(isIdempotencyError(error, "idempotency_key_invalid")).toBe(true);
      expect((error as IdempotencyError).httpStatus).toBe(400);
      expect(calls).toEqual([]);
      expect(runs()).toBe(0);
    });
  }

  it("names where a key's lone surrogate is, and accepts a whole astral character", async () => {
    const { tool } = probeTool();
    const error = await rejection(tool({}, { key: "cut-\ud83d" }));
    expect((error as Error).message).toMatch(/lone UTF-16 surrogate at index 4/);
    expect((await tool({}, { key: "party-\ud83d\ude00" })).result).toBe("ran");
  });

  it("accepts a key of exactly 255 characters", async () => {
    const { tool } = probeTool();
    expect((await tool({}, { key: "k".repeat(255) })).result).toBe("ran");
  });

  const cyclic: Record<string, unknown> = { name: "loop" };
  cyclic.self = cyclic;
  const badArgs: [string, unknown][] = [
    ["a cycle", cyclic],
    ["a function", { callback: () => 1 }],
    ["a symbol", { tag: Symbol("x") }],
    ["a BigInt without a rule", { amount: 10n }],
  ];
  for (const [label, args] of badArgs) {
    it(`arguments holding ${label} are invalid_arguments (400)`, async () => {
      const { tool, calls, runs } = probeTool();
      const error = await rejection(tool(args, { key: "k" }));
      expect(isIdempotencyError(error, "invalid_arguments")).toBe(true);
      expect((error as IdempotencyError).httpStatus).toBe(400);
      expect(calls).toEqual([]);
      expect(runs()).toBe(0);
    });
  }

  it("fingerprints BigInt arguments when the tool gives the string rule", async () => {
    const { tool, runs } = probeTool({ bigint: "string" });
    await tool({ amount: 10n }, { key: "k" });
    expect((await tool({ amount: 10n }, { key: "k" })).was_replay).toBe(true);
    expect(
      isIdempotencyError(await rejection(tool({ amount: 11n }, { key: "k" })), "idempotency_key_conflict"),
    ).toBe(true);
    expect(runs()).toBe(1);
  });

  it("arguments nested 6,000 levels deep are invalid_arguments naming the limit, and the store is never touched", async () => {
    const { tool, calls, runs } = probeTool();
    const error = await rejection(tool(nested(6_000, "object"), { key: "k" }));
    expect(isIdempotencyError(error, "invalid_arguments")).toBe(true);
    expect((error as Error).message).toMatch(new RegExp(`deeper than ${maxArgumentDepth} levels`));
    expect(calls).toEqual([]);
    expect(runs()).toBe(0);
  });

  it("arguments nested exactly maxArgumentDepth levels deep are fingerprinted and run", async () => {
    const { tool, runs } = probeTool();
    for (const shape of ["object", "array"] as const) {
      expect((await tool(nested(maxArgumentDepth, shape), { key: `k-${shape}` })).result).toBe("ran");
      const error = await rejection(tool(nested(maxArgumentDepth + 1, shape), { key: `k-${shape}-deeper` }));
      expect(isIdempotencyError(error, "invalid_arguments"), shape).toBe(true);
    }
    expect(runs()).toBe(2);
  });

  for (const scope of ["", "tenant-\udc00"]) {
    it(`rejects a bad scope (${JSON.stringify(scope)}) before touching the store`, async () => {
      const { tool, calls } = probeTool();
      const error = await rejection(tool({}, { key: "k", scope }));
      expect(isIdempotencyError(error, "invalid_arguments")).toBe(true);
      expect(calls).toEqual([]);
    });
  }

  it("derives the key with the key option when the call gives none", async () => {
    let runs = 0;
    const tool = idempotent(
      async (_args: { name: string }) => {
        runs++;
        return "ran";
      },
      {
        name: "create_record",
        store: memoryStore(),
        clock: fakeClock(),
        key: (args) => `record-${args.name}`,
      },
    );
    const first = await tool({ name: "Alice" });
    const again = await tool({ name: "Alice" });
    expect(first.idempotency_key).toBe("record-Alice");
    expect(again.was_replay).toBe(true);
    expect(runs).toBe(1);
  });
});

describe("scopes", () => {
  it("treats the same key in two scopes as two operations, and never crosses them", async () => {
    const { tool, runs } = probeTool();
    await tool({ to: "a" }, { key: "k", scope: "tenant-a" });
    const other = await tool({ to: "b" }, { key: "k", scope: "tenant-b" });
    expect(other.was_replay).toBe(false);
    expect(runs()).toBe(2);
    expect((await tool({ to: "a" }, { key: "k", scope: "tenant-a" })).was_replay).toBe(true);
  });
});

describe("the store cannot be reached", () => {
  it("does not run the tool and answers store_unavailable (503)", async () => {
    const broken: IdempotencyStore = {
      ...memoryStore(),
      claim: () => Promise.reject(new Error("ECONNREFUSED 127.0.0.1:5432")),
    };
    const events: IdempotencyEvent[] = [];
    let runs = 0;
    const tool = idempotent(
      async () => {
        runs++;
        return 1;
      },
      { name: "charge", store: broken, clock: fakeClock(), onEvent: (e) => events.push(e) },
    );
    const error = await rejection(tool({}, { key: "k" }));
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as IdempotencyError).httpStatus).toBe(503);
    expect((error as Error).message).toBe(
      "The idempotency store failed during claim: ECONNREFUSED 127.0.0.1:5432. The tool did not run.",
    );
    expect(runs).toBe(0);
    expect(events.map((e) => e.type)).toEqual(["store_error"]);
  });

  it("hands the caller its result when the store fails after the effect, and fails closed on a repeat", async () => {
    const inner = memoryStore();
    let settleFails = true;
    const store: IdempotencyStore = {
      ...inner,
      settle: (request) =>
        settleFails ? Promise.reject(new Error("connection reset")) : inner.settle(request),
    };
    const clock = fakeClock();
    let runs = 0;
    const tool = idempotent(
      async () => {
        runs++;
        return "sent";
      },
      { name: "send_email", store, clock },
    );
    expect((await tool({}, { key: "k" })).result).toBe("sent");
    settleFails = false;
    await clock.advance(60_000);
    const repeat = await rejection(tool({}, { key: "k" }));
    expect(isIdempotencyError(repeat, "outcome_unknown")).toBe(true);
    expect(runs).toBe(1);
  });
});

describe("results that cannot be kept", () => {
  it("records a completed call whose result cannot be serialized, and never runs it again", async () => {
    const clock = fakeClock();
    let runs = 0;
    const tool = idempotent(
      async () => {
        runs++;
        const result: Record<string, unknown> = { id: 7 };
        result.self = result;
        return result;
      },
      { name: "create_record", store: memoryStore(), clock },
    );
    const first = await tool({}, { key: "k" });
    expect(first.result.id).toBe(7);
    const replay = await rejection(tool({}, { key: "k" }));
    expect(replay).toBeInstanceOf(ResultUnserializableError);
    expect((replay as ResultUnserializableError).record.status).toBe("completed");
    expect((replay as Error).message).toContain("Do not run it again");
    expect(runs).toBe(1);
  });

  it("keeps no result over maxResultBytes (result_too_large, 413), and never runs it again", async () => {
    const clock = fakeClock();
    let runs = 0;
    const tool = idempotent(
      async () => {
        runs++;
        return "x".repeat(2_000);
      },
      { name: "render", store: memoryStore(), clock, maxResultBytes: 1_000 },
    );
    expect((await tool({}, { key: "k" })).result).toHaveLength(2_000);
    const replay = await rejection(tool({}, { key: "k" }));
    expect(replay).toBeInstanceOf(ResultTooLargeError);
    expect((replay as ResultTooLargeError).httpStatus).toBe(413);
    expect((replay as ResultTooLargeError).sizeBytes).toBe(2_002);
    expect(runs).toBe(1);
  });
});

describe("fencing: a worker that lost its claim", () => {
  it("reports lease_lost instead of success when another caller took over, and its settle is rejected", async () => {
    const inner = memoryStore();
    // Renewals fail (a network partition), so the lease passes while the tool still runs.
    const store: IdempotencyStore = { ...inner, renew: () => Promise.reject(new Error("partition")) };
    const clock = fakeClock();
    const { opened: held, open: release } = gate();
    let aborted = false;
    let runs = 0;
    const tool = idempotent(
      async (_args: object, context) => {
        runs++;
        if (runs === 1) {
          context.signal.addEventListener("abort", () => {
            aborted = true;
          });
          await held;
        }
        return `run ${runs}`;
      },
      { name: "charge", store, clock, effect: "native-key", leaseMs: 3_000 },
    );
    const paused = tool({}, { key: "k" });
    for (let i = 0; i < 4; i++) await clock.advance(1_000);
    const takeover = await tool({}, { key: "k" });
    expect(takeover).toMatchObject({ result: "run 2", was_replay: false });
    release();
    const error = await rejection(paused);
    expect(error).toBeInstanceOf(LeaseLostError);
    expect((error as IdempotencyError).code).toBe("lease_lost");
    expect((await tool({}, { key: "k" })).result).toBe("run 2");
    // Renewals failed with errors until the lease passed: the tool was told to stop, finished anyway, and the
    // settle's fencing caught it.
    expect(aborted).toBe(true);
  });

  it("aborts the tool's signal when a renewal finds the claim taken over", async () => {
    const inner = memoryStore();
    let dropRenewals = true;
    // Renewals are lost on the way (the store never sees them) until another caller has taken over.
    const store: IdempotencyStore = {
      ...inner,
      renew: (request) => (dropRenewals ? Promise.resolve(true) : inner.renew(request)),
    };
    const clock = fakeClock();
    let signal: AbortSignal | undefined;
    const { opened: held, open: release } = gate();
    let runs = 0;
    const tool = idempotent(
      async (_args: object, context) => {
        runs++;
        if (runs === 1) {
          signal = context.signal;
          await held;
        }
        return runs;
      },
      { name: "charge", store, clock, effect: "native-key", leaseMs: 3_000 },
    );
    const paused = tool({}, { key: "k" });
    for (let i = 0; i < 4; i++) await clock.advance(1_000);
    expect((await tool({}, { key: "k" })).result).toBe(2);
    dropRenewals = false;
    await clock.advance(1_000);
    expect(signal?.aborted).toBe(true);
    expect(signal?.reason).toBeInstanceOf(LeaseLostError);
    release();
    expect(await rejection(paused)).toBeInstanceOf(LeaseLostError);
  });
});

describe("events", () => {
  it("reports run, completed, replay and conflict in order", async () => {
    const events: IdempotencyEvent[] = [];
    const { tool } = probeTool({ onEvent: (e) => events.push(e) });
    await tool({ a: 1 }, { key: "k" });
    await tool({ a: 1 }, { key: "k" });
    await rejection(tool({ a: 2 }, { key: "k" }));
    expect(events.map((e) => e.type)).toEqual(["run", "completed", "replay", "conflict"]);
    expect(events[0]).toMatchObject({ tool: "create_record", key: "k", scope: "default", attempt: 1 });
  });

  it("never lets a throwing hook change the call", async () => {
    const { tool } = probeTool({
      onEvent: () => {
        throw new Error("metrics down");
      },
    });
    expect((await tool({}, { key: "k" })).result).toBe("ran");
  });
});

describe("options are checked when the tool is wrapped", () => {
  const store = memoryStore();
  const fn = async () => 1;
  const cases: [string, Partial<IdempotentOptions<unknown, number>>][] = [
    ["name", { name: "" }],
    ["store", { store: {} as IdempotencyStore }],
    ["effect", { effect: "maybe" as "irreversible" }],
    ["ttlMs", { ttlMs: -1 }],
    ["leaseMs", { leaseMs: 0 }],
    ["waitMs", { waitMs: 1.5 }],
    ["maxResultBytes", { maxResultBytes: 0 }],
    ["significant", { significant: "to" as unknown as string[] }],
    [
      "reconcile",
      { verify: () => ({ status: "not_executed" }), reconcile: () => ({ status: "not_executed" }) },
    ],
    ["bigint", { bigint: "number" as "string" }],
  ];
  it("tells the wrapped tool's name, effect, window and wait, as resolved", () => {
    const wrapped = idempotent(fn, { name: "tool", store, effect: "native-key", ttlMs: 120_000 });
    expect({
      toolName: wrapped.toolName,
      effect: wrapped.effect,
      ttlMs: wrapped.ttlMs,
      waitMs: wrapped.waitMs,
    }).toEqual({ toolName: "tool", effect: "native-key", ttlMs: 120_000, waitMs: 10_000 });
  });

  it("refuses a tool that is not a function, saying what the first argument must be", () => {
    let thrown: unknown;
    try {
      idempotent({ send: fn } as unknown as typeof fn, { name: "tool", store });
    } catch (error) {
      thrown = error;
    }
    expect(isIdempotencyError(thrown, "invalid_options")).toBe(true);
    expect((thrown as Error).message).toBe("idempotent(): the first argument must be the tool function.");
  });
  for (const [option, bad] of cases) {
    it(`names \`${option}\` when it is wrong`, () => {
      let thrown: unknown;
      try {
        idempotent(fn, { name: "tool", store, ...bad });
      } catch (error) {
        thrown = error;
      }
      expect(isIdempotencyError(thrown, "invalid_options")).toBe(true);
      expect((thrown as Error).message).toContain(`\`${option}\``);
    });
  }

  it("warns when the window is below one hour", () => {
    const warn = vi.spyOn(process, "emitWarning").mockImplementation(() => undefined);
    idempotent(fn, { name: "tool", store, ttlMs: 60_000 });
    expect(warn).toHaveBeenCalledWith(expect.stringContaining("Below 1 h"), expect.anything());
    warn.mockRestore();
  });

  it("warns on the console where the runtime has no process.emitWarning", () => {
    const emitWarning = process.emitWarning;
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    // A runtime without Node's process API (a browser, a worker) has no emitWarning.
    Reflect.deleteProperty(process, "emitWarning");
    try {
      idempotent(fn, { name: "tool", store, ttlMs: 60_000 });
      expect(warn).toHaveBeenCalledWith(expect.stringMatching(/^\(IDEMPOTOOL_SHORT_TTL\) .*Below 1 h/));
    } finally {
      process.emitWarning = emitWarning;
      warn.mockRestore();
    }
  });
});

describe("errors", () => {
  it("gives every code its HTTP status", () => {
    const expected: Record<string, number> = {
      idempotency_key_missing: 400,
      idempotency_key_invalid: 400,
      idempotency_key_conflict: 422,
      idempotency_key_in_use: 409,
      outcome_unknown: 409,
      store_unavailable: 503,
      invalid_arguments: 400,
      result_too_large: 413,
    };
    for (const [code, status] of Object.entries(expected)) {
      expect(new IdempotencyError(code as ErrorCode, "x").httpStatus).toBe(status);
    }
    expect(Object.values(ErrorCode)).toEqual(expect.arrayContaining(Object.keys(expected)));
  });

  it("isIdempotencyError tells our errors from others, by code when asked", () => {
    const error = new IdempotencyError("store_unavailable", "down", { cause: new Error("ECONNRESET") });
    expect(isIdempotencyError(error)).toBe(true);
    expect(isIdempotencyError(error, "store_unavailable")).toBe(true);
    expect(isIdempotencyError(error, "outcome_unknown")).toBe(false);
    expect(isIdempotencyError(new Error("x"))).toBe(false);
    expect(error.cause).toBeInstanceOf(Error);
  });

  it("narrows by code only to errors that carry the code's data; another error with the code is matched by its code", () => {
    // An HTTP client's 422 is a conflict too, but knows no fingerprints.
    const foreign: unknown = new IdempotencyError("idempotency_key_conflict", "422 from the server");
    expect(isIdempotencyError(foreign, "idempotency_key_conflict")).toBe(false);
    if (!isIdempotencyError(foreign)) throw new Error("expected an idempotool error");
    expect(foreign.code).toBe("idempotency_key_conflict");
  });
});
