/**
 * Property: for random interleavings of concurrent calls of two tools on shared keys, tool outcomes,
 * long calls, crashed workers (some after renewing for a long time) and clock moves, under long and
 * short windows: the effect happens at most once per (scope, key) per window — two effects on one key
 * are at least `ttlMs` apart — and every caller gets its own tool's original outcome or a typed error.
 * Some calls run where timers fail, so the lease cannot be started after the claim: the tool never runs
 * and the call frees the key before it fails. Some tools throw a value that cannot become a string, and one
 * key is refused by the store itself (as SQLite on Deno refuses a NUL): its callers are told so, its tool
 * never runs, and the store is not asked again and again to release it. Some calls come without a key and
 * are keyed by their tool and arguments, as `withoutKey` servers and the proxy key them.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { argumentsKey, keyedByArguments } from "../src/core/keys.js";
import {
  type Clock,
  definitiveFailure,
  type Effect,
  fingerprint,
  IdempotencyError,
  type IdempotencyStore,
  idempotent,
  isIdempotencyError,
  memoryStore,
  notExecuted,
  ReplayedFailureError,
} from "../src/index.js";
import { type FakeClock, fakeClock } from "../src/testing/index.js";

/**
 * What the tool does; `unprintable`: it throws a value that cannot become a string; `unstartable`: the call
 * runs where timers fail, so its lease cannot start.
 */
type Behaviour =
  | "ok"
  | "slow"
  | "long"
  | "definitive"
  | "not_executed"
  | "throw"
  | "unprintable"
  | "unstartable";
type Op =
  | { kind: "call"; tool: number; key: string; scope: string; variant: number; behaviour: Behaviour }
  | { kind: "crash"; tool: number; key: string; scope: string; variant: number; renewForMs: number }
  | { kind: "advance"; ms: number };

const toolNames = ["send", "notify"] as const;
const leaseMs = 30_000;

/** A key the store refuses to hold: every store operation naming it throws `invalid_arguments`. */
const refusedKey = "refused";
/** A call made without a key: keyed by its tool and arguments. */
const keyless = "(keyless)";
const keyArb = fc.constantFrom("a", "b", "a", "b", refusedKey, keyless);
const scopeArb = fc.constantFrom("s1", "s2");
const variantArb = fc.constantFrom(0, 0, 0, 1);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant("call" as const),
      tool: fc.constantFrom(0, 0, 1),
      key: keyArb,
      scope: scopeArb,
      variant: variantArb,
      behaviour: fc.constantFrom<Behaviour>(
        "ok",
        "slow",
        "long",
        "definitive",
        "not_executed",
        "throw",
        "unprintable",
        "unstartable",
      ),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("crash" as const),
      tool: fc.constantFrom(0, 0, 1),
      key: keyArb,
      scope: scopeArb,
      variant: variantArb,
      // How long the doomed worker kept renewing its lease before it died (a long call).
      renewForMs: fc.constantFrom(0, 150_000),
    }),
  },
  {
    weight: 2,
    // Up to past a lease, and now and then past a dead worker's long lease plus a short window.
    arbitrary: fc.record({
      kind: fc.constant("advance" as const),
      ms: fc.oneof(fc.integer({ min: 0, max: 90_000 }), fc.constant(170_000)),
    }),
  },
);

/** The key a keyless call of this tool with these arguments is given. */
function keyOf(tool: number, variant: number, behaviour: Behaviour): string {
  return argumentsKey(toolNames[tool]!, { variant, behaviour }, "reject");
}

/** A call running where timers fail, and the owner tokens of the claims it sent. */
interface Unstartable {
  readonly tokens: Set<string>;
}
const unstartable = new AsyncLocalStorage<Unstartable>();
const timersFail = new Error("timers are not available here");

/**
 * The clock of a runtime whose timers fail inside an unstartable call: a timer the lease sets (a background
 * sleep it can stop) throws at once, so the lease cannot be started.
 */
function failingTimers(clock: FakeClock): Clock {
  return {
    now: () => clock.now(),
    sleep: (ms, signal, options) => {
      if (unstartable.getStore() !== undefined && signal !== undefined && options?.ref === false) {
        throw timersFail;
      }
      return clock.sleep(ms, signal, options);
    },
  };
}

/** Values thrown that cannot become a string (`String(value)` throws). */
const unprintables = new WeakSet<object>();
function unprintable(): object {
  const value = Object.create(null) as object;
  unprintables.add(value);
  return value;
}

/**
 * Interleave every store operation through fast-check's scheduler. An operation naming the refused key
 * throws, as a store that cannot hold the key does, and counts in `refused`.
 */
function scheduled(store: IdempotencyStore, s: fc.Scheduler, refused: { ops: number }): IdempotencyStore {
  const wrap =
    <A extends [{ key: string }, ...unknown[]], R>(name: string, op: (...args: A) => Promise<R>) =>
    (...args: A) =>
      s.schedule(Promise.resolve(name), name).then(() => {
        if (args[0].key !== refusedKey) return op(...args);
        refused.ops++;
        throw new IdempotencyError("invalid_arguments", "this store cannot hold that key");
      });
  // An unstartable call's claims, so the run can check that it gave each one up.
  const owned =
    <A extends [{ token: string }], R>(op: (...args: A) => Promise<R>) =>
    (...args: A) => {
      unstartable.getStore()?.tokens.add(args[0].token);
      return op(...args);
    };
  return {
    claim: owned(wrap("claim", store.claim)),
    takeover: owned(wrap("takeover", store.takeover)),
    settle: wrap("settle", store.settle),
    renew: wrap("renew", store.renew),
    release: wrap("release", store.release),
    get: wrap("get", store.get),
    delete: store.delete,
    list: store.list,
    purge: store.purge,
  };
}

/** Run scheduled store steps and clock sleepers until `done()` or the clock reaches `until`. */
async function drive(s: fc.Scheduler, clock: FakeClock, done: () => boolean, until?: number): Promise<void> {
  for (let steps = 0; steps < 100_000; steps++) {
    if (s.count() > 0) {
      await s.waitOne();
      continue;
    }
    await new Promise((resolve) => setImmediate(resolve));
    if (s.count() > 0) continue;
    if (until === undefined ? done() : clock.now() >= until) return;
    const next = clock.nextWakeAt;
    if (next === undefined) {
      if (until === undefined) return;
      await clock.advance(until - clock.now());
    } else if (until !== undefined && next > until) {
      await clock.advance(until - clock.now());
    } else {
      await clock.next();
    }
  }
  throw new Error("the run did not settle");
}

/**
 * One run: the ops in order against two tools on one memory store, every store step interleaved by the
 * scheduler; then the checks. Throws when an effect repeats within a window or a caller is misled.
 */
async function checkRun(effect: Effect, ttlMs: number, ops: readonly Op[], s: fc.Scheduler): Promise<void> {
  const clock = fakeClock();
  const inner = memoryStore();
  const refused = { ops: 0 };
  const store = scheduled(inner, s, refused);
  // When an effect may have reached the outside world, per (scope, key).
  const maybeEffects = new Map<string, number[]>();
  // The values of successful runs, per (scope, key, tool).
  const returned = new Map<string, number[]>();
  const attemptsSeen = new Map<string, number[]>();
  const released = new Set<string>();
  // Which tool and arguments ran under each key made from a keyless call's arguments: only ever one.
  const argumentsRun = new Map<string, Set<string>>();
  const undoneOnThrow = effect === "native-key" || effect === "owned-store";
  let nextId = 0;
  const count = (id: string, at = clock.now()) => maybeEffects.set(id, [...(maybeEffects.get(id) ?? []), at]);

  const tools = toolNames.map((name) =>
    idempotent(
      async (args: { variant: number; behaviour: Behaviour }, context) => {
        const id = `${context.scope}/${context.key}`;
        attemptsSeen.set(id, [...(attemptsSeen.get(id) ?? []), context.attempt]);
        if (context.key.startsWith("~args~")) {
          argumentsRun.set(id, new Set([...(argumentsRun.get(id) ?? []), `${name} ${JSON.stringify(args)}`]));
        }
        const result = ++nextId;
        switch (args.behaviour) {
          case "not_executed":
            released.add(id);
            throw notExecuted(new Error("invalid"));
          case "throw":
          case "unprintable":
            if (undoneOnThrow) released.add(id);
            else count(id);
            throw args.behaviour === "throw" ? new Error("boom") : unprintable();
          case "definitive":
            count(id);
            throw definitiveFailure(new Error("declined"));
          case "slow":
            await clock.sleep(20_000);
            break;
          case "long":
            // Longer than the lease and than the short window: it lives by renewing.
            await clock.sleep(120_000);
            break;
          case "ok":
          case "unstartable":
            break;
        }
        count(id);
        returned.set(`${id}/${name}`, [...(returned.get(`${id}/${name}`) ?? []), result]);
        return result;
      },
      {
        name,
        store,
        clock: failingTimers(clock),
        effect,
        ttlMs,
        leaseMs,
        waitMs: 5_000,
        significant: ["variant"],
      },
    ),
  );

  const calls: { id: string; tool: string; keyless: boolean; promise: Promise<unknown>; settled: boolean }[] =
    [];
  // Claims an unstartable call still held when it failed: the key stays blocked for nobody's call.
  const keptByUnstartable: string[] = [];
  let dyingWorkers = 0;
  for (const op of ops) {
    if (op.kind === "advance") {
      await drive(s, clock, () => true, clock.now() + op.ms);
    } else if (op.kind === "crash") {
      // A worker claimed the key, renewed its lease for a while, maybe did the effect, and died.
      if (op.key === refusedKey) continue;
      // A keyless worker died in a call whose tool had nothing unusual to do.
      const key = op.key === keyless ? keyOf(op.tool, op.variant, "ok") : op.key;
      const id = `${op.scope}/${key}`;
      const record = {
        scope: op.scope,
        key,
        tool: toolNames[op.tool]!,
        fingerprint: fingerprint({ variant: op.variant }),
        token: `dead-${nextId++}`,
      };
      const claim = await inner.claim({ ...record, leaseMs, ttlMs, now: clock.now() });
      if (!claim.claimed) continue;
      if (undoneOnThrow) continue;
      count(id);
      dyingWorkers++;
      void (async () => {
        for (let lived = 0; lived + leaseMs / 3 <= op.renewForMs; lived += leaseMs / 3) {
          await clock.sleep(leaseMs / 3);
          const renewed = await inner.renew({ ...record, leaseMs, ttlMs, now: clock.now() });
          if (!renewed) return;
          // The effect may come as late as the last sign of life.
          const times = maybeEffects.get(id)!;
          times[times.length - 1] = clock.now();
        }
      })().finally(() => dyingWorkers--);
    } else {
      const tool = toolNames[op.tool]!;
      const key = op.key === keyless ? keyOf(op.tool, op.variant, op.behaviour) : op.key;
      const call = {
        id: `${op.scope}/${key}`,
        tool,
        keyless: op.key === keyless,
        promise: Promise.resolve() as Promise<unknown>,
        settled: false,
      };
      const fault = op.behaviour === "unstartable" ? { tokens: new Set<string>() } : undefined;
      const callOptions =
        op.key === keyless
          ? keyedByArguments({ key: "", scope: op.scope })
          : { key: op.key, scope: op.scope };
      const run = () => tools[op.tool]!({ variant: op.variant, behaviour: op.behaviour }, callOptions);
      call.promise = (fault === undefined ? run() : unstartable.run(fault, run))
        .then(
          (envelope) => envelope,
          async (error: unknown) => {
            if (error === timersFail) {
              // The tool was never called: its claim must be gone by the time the caller hears of it.
              released.add(call.id);
              const record = await inner.get({ scope: op.scope, key }, clock.now());
              if (record !== undefined && fault?.tokens.has(record.token)) {
                keptByUnstartable.push(`${call.id} (${record.status})`);
              }
            }
            return { error };
          },
        )
        .finally(() => {
          call.settled = true;
        });
      calls.push(call);
    }
  }
  await drive(s, clock, () => dyingWorkers === 0 && calls.every((c) => c.settled));

  expect(keptByUnstartable, "a call whose lease could not start kept its claim").toEqual([]);
  for (const [id, runs] of argumentsRun) {
    expect([...runs], `one key made from arguments, ${id}, for several calls`).toHaveLength(1);
  }

  const refusedCalls = calls.filter((call) => call.id.endsWith(`/${refusedKey}`));
  expect(
    [...attemptsSeen.keys()].filter((id) => id.endsWith(`/${refusedKey}`)),
    "a refused key ran",
  ).toEqual([]);
  // Each refused call may ask once to claim and once to give the claim up: never again and again.
  expect(refused.ops, "store operations on the refused key").toBeLessThanOrEqual(2 * refusedCalls.length);
  for (const call of refusedCalls) {
    expect(await call.promise, `${call.tool} on ${call.id}`).toMatchObject({
      error: { code: "invalid_arguments" },
    });
  }

  for (const [id, times] of maybeEffects) {
    for (let i = 1; i < times.length; i++) {
      expect(
        times[i]! - times[i - 1]!,
        `effects for ${id} under ${effect} with a window of ${ttlMs} ms, at ${times.join(", ")}`,
      ).toBeGreaterThanOrEqual(ttlMs);
    }
  }
  for (const [id, results] of returned) {
    if (ttlMs > 86_000_000) expect(results.length, `successful runs for ${id}`).toBeLessThanOrEqual(1);
  }
  if (effect === "native-key" && ttlMs > 86_000_000) {
    // Takeovers run again, with the same key and a higher attempt: the downstream dedupes on the key.
    for (const [id, attempts] of attemptsSeen) {
      if (!released.has(id)) expect([...attempts].sort()).toEqual(attempts);
    }
  }
  for (const call of calls) {
    const outcome = (await call.promise) as {
      result?: number;
      was_replay?: boolean;
      error?: unknown;
    };
    if ("error" in outcome) {
      const error = outcome.error;
      const typed =
        isIdempotencyError(error) ||
        error instanceof ReplayedFailureError ||
        error === timersFail ||
        (typeof error === "object" && error !== null && unprintables.has(error)) ||
        (error instanceof Error && ["invalid", "boom", "declined"].includes(error.message));
      if (!typed) expect.fail(`untyped error: ${String(error)}`);
      // A call without a key is keyed by its arguments: its key is never found missing or malformed, and
      // a key made from its arguments never meets other arguments.
      if (call.keyless && isIdempotencyError(error)) {
        expect(error.code).not.toMatch(/^idempotency_key_(missing|invalid|conflict)$/);
      }
    } else {
      // A value handed back is a successful run's value of this very tool on this key.
      expect(
        returned.get(`${call.id}/${call.tool}`) ?? [],
        `${call.tool} on ${call.id} was handed a value no run of it returned`,
      ).toContain(outcome.result);
    }
  }
}

describe("the state machine under random interleavings", () => {
  it("runs the effect at most once per (scope, key) and answers every caller honestly", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<Effect>("irreversible", "compensatable", "native-key", "owned-store"),
        // A day, or a window shorter than a long call, so records expire while the property runs.
        fc.constantFrom(86_400_000, 50_000),
        fc.array(opArb, { minLength: 1, maxLength: 10 }),
        fc.scheduler(),
        checkRun,
      ),
      { numRuns: 500 },
    );
  }, 120_000);

  // Runs the random search may take a while to reach, each under an interleaving of its own.
  const scheduler = () => fc.sample(fc.scheduler(), 1)[0]!;
  const call = (tool: number, behaviour: Behaviour = "ok", key = "a"): Op => ({
    kind: "call",
    tool,
    key,
    scope: "s1",
    variant: 0,
    behaviour,
  });

  it("a worker that renewed past a short window and then died is not run again within a window", async () => {
    for (const effect of ["irreversible", "compensatable"] as const) {
      const crash: Op = { kind: "crash", tool: 0, key: "a", scope: "s1", variant: 0, renewForMs: 150_000 };
      await checkRun(effect, 50_000, [crash, { kind: "advance", ms: 175_000 }, call(0)], scheduler());
    }
  });

  it("a call whose lease cannot start frees the key, on a fresh claim and on a takeover", async () => {
    const crash: Op = { kind: "crash", tool: 0, key: "a", scope: "s1", variant: 0, renewForMs: 0 };
    for (const effect of ["irreversible", "compensatable", "native-key", "owned-store"] as const) {
      await checkRun(effect, 86_400_000, [call(0, "unstartable"), call(0)], scheduler());
      await checkRun(
        effect,
        86_400_000,
        [crash, { kind: "advance", ms: 35_000 }, call(0, "unstartable"), call(0)],
        scheduler(),
      );
    }
  });

  it("a second tool on the same key neither runs nor gets the first tool's outcome", async () => {
    for (const behaviour of ["ok", "slow", "definitive", "throw"] as const) {
      await checkRun("irreversible", 86_400_000, [call(0, behaviour), call(1), call(1, "slow")], scheduler());
    }
  });

  it("a tool that throws a value that cannot become a string ends as any throw does, under every effect", async () => {
    for (const effect of ["irreversible", "compensatable", "native-key", "owned-store"] as const) {
      await checkRun(effect, 86_400_000, [call(0, "unprintable"), call(0), call(1, "slow")], scheduler());
    }
  });

  it("a key the store refuses is never run, and its claim is not given up again and again", async () => {
    for (const effect of ["irreversible", "native-key"] as const) {
      const refusedCalls = [
        call(0, "ok", refusedKey),
        call(0, "slow", refusedKey),
        call(1, "ok", refusedKey),
      ];
      await checkRun(
        effect,
        86_400_000,
        [...refusedCalls, { kind: "advance", ms: 170_000 }, call(0)],
        scheduler(),
      );
    }
  });
});
