/**
 * Property: for random interleavings of concurrent calls, tool outcomes, crashed workers and clock
 * moves, the effect happens at most once per (scope, key), and every caller gets the original
 * outcome or a typed error.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  definitiveFailure,
  type Effect,
  fingerprint,
  type IdempotencyStore,
  idempotent,
  isIdempotencyError,
  memoryStore,
  notExecuted,
  ReplayedFailureError,
} from "../src/index.js";
import { type FakeClock, fakeClock } from "../src/testing/index.js";

type Behaviour = "ok" | "slow" | "definitive" | "not_executed" | "throw";
type Op =
  | { kind: "call"; key: string; scope: string; variant: number; behaviour: Behaviour }
  | { kind: "crash"; key: string; scope: string; variant: number }
  | { kind: "advance"; ms: number };

const keyArb = fc.constantFrom("a", "b");
const scopeArb = fc.constantFrom("s1", "s2");
const variantArb = fc.constantFrom(0, 0, 0, 1);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant("call" as const),
      key: keyArb,
      scope: scopeArb,
      variant: variantArb,
      behaviour: fc.constantFrom<Behaviour>("ok", "slow", "definitive", "not_executed", "throw"),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("crash" as const),
      key: keyArb,
      scope: scopeArb,
      variant: variantArb,
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant("advance" as const), ms: fc.integer({ min: 0, max: 90_000 }) }),
  },
);

/** Interleave every store operation through fast-check's scheduler. */
function scheduled(store: IdempotencyStore, s: fc.Scheduler): IdempotencyStore {
  const wrap =
    <A extends unknown[], R>(name: string, op: (...args: A) => Promise<R>) =>
    (...args: A) =>
      s.schedule(Promise.resolve(name), name).then(() => op(...args));
  return {
    claim: wrap("claim", store.claim),
    takeover: wrap("takeover", store.takeover),
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

describe("the state machine under random interleavings", () => {
  it("runs the effect at most once per (scope, key) and answers every caller honestly", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<Effect>("irreversible", "compensatable", "native-key", "owned-store"),
        fc.array(opArb, { minLength: 1, maxLength: 10 }),
        fc.scheduler(),
        async (effect, ops, s) => {
          const clock = fakeClock();
          const inner = memoryStore();
          const store = scheduled(inner, s);
          // What may have reached the outside world, per (scope, key).
          const maybeEffects = new Map<string, number>();
          const returned = new Map<string, number[]>();
          const attemptsSeen = new Map<string, number[]>();
          const undoneOnThrow = effect === "native-key" || effect === "owned-store";
          let nextId = 0;
          const count = (id: string) => maybeEffects.set(id, (maybeEffects.get(id) ?? 0) + 1);

          const tool = idempotent(
            async (args: { variant: number; behaviour: Behaviour }, context) => {
              const id = `${context.scope}/${context.key}`;
              attemptsSeen.set(id, [...(attemptsSeen.get(id) ?? []), context.attempt]);
              const result = ++nextId;
              switch (args.behaviour) {
                case "not_executed":
                  throw notExecuted(new Error("invalid"));
                case "throw":
                  if (!undoneOnThrow) count(id);
                  throw new Error("boom");
                case "definitive":
                  count(id);
                  throw definitiveFailure(new Error("declined"));
                case "slow":
                  await clock.sleep(20_000);
                  break;
                case "ok":
                  break;
              }
              count(id);
              returned.set(id, [...(returned.get(id) ?? []), result]);
              return result;
            },
            { name: "send", store, clock, effect, leaseMs: 30_000, waitMs: 5_000, significant: ["variant"] },
          );

          const calls: { id: string; promise: Promise<unknown>; settled: boolean }[] = [];
          for (const op of ops) {
            if (op.kind === "advance") {
              await drive(s, clock, () => true, clock.now() + op.ms);
            } else if (op.kind === "crash") {
              // A worker claimed the key, maybe did the effect, and died without renewing or settling.
              const id = `${op.scope}/${op.key}`;
              const claim = await inner.claim({
                scope: op.scope,
                key: op.key,
                tool: "send",
                fingerprint: fingerprint({ variant: op.variant }),
                token: `dead-${nextId++}`,
                leaseMs: 30_000,
                ttlMs: 86_400_000,
                now: clock.now(),
              });
              if (claim.claimed && !undoneOnThrow) count(id);
            } else {
              const call = {
                id: `${op.scope}/${op.key}`,
                promise: Promise.resolve() as Promise<unknown>,
                settled: false,
              };
              call.promise = tool(
                { variant: op.variant, behaviour: op.behaviour },
                { key: op.key, scope: op.scope },
              )
                .then(
                  (envelope) => envelope,
                  (error: unknown) => ({ error }),
                )
                .finally(() => {
                  call.settled = true;
                });
              calls.push(call);
            }
          }
          await drive(s, clock, () => calls.every((c) => c.settled));

          for (const [id, n] of maybeEffects) {
            expect(n, `effects for ${id} under ${effect}`).toBeLessThanOrEqual(1);
          }
          for (const [id, results] of returned)
            expect(results.length, `successful runs for ${id}`).toBeLessThanOrEqual(1);
          if (effect === "native-key") {
            // Takeovers run again, with the same key and a higher attempt: the downstream dedupes on the key.
            for (const attempts of attemptsSeen.values()) expect([...attempts].sort()).toEqual(attempts);
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
                (error instanceof Error && ["invalid", "boom", "declined"].includes(error.message));
              expect(typed, `untyped error: ${String(error)}`).toBe(true);
            } else {
              // A value handed back is the one successful run's value.
              expect(returned.get(call.id)).toEqual([outcome.result]);
            }
          }
        },
      ),
      { numRuns: 150 },
    );
  }, 120_000);
});
