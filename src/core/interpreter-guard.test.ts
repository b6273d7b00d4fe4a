/**
 * The interpreter against a table it cannot carry out. decide.ts is the one place the protocol is written;
 * when a row there names an action a step has no way to do, the call must stop with an error that names
 * the action and the step, and do nothing more: no run, no settle, no loop. Here the table is swapped for
 * one that chooses such an action at one event, and every other event is decided by the real table.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { fakeClock } from "../testing/fake-clock.js";
import type { Action, Situation } from "./decide.js";
import { OutcomeUnknownError } from "./errors.js";
import { fingerprint } from "./fingerprint.js";
import { idempotent } from "./idempotent.js";
import { memoryStore } from "./memory-store.js";
import type { Effect, VerifyOutcome } from "./options.js";
import { definitiveFailure } from "./outcomes.js";
import type { IdempotencyStore } from "./store.js";

const swapped = vi.hoisted(() => ({
  choose: undefined as ((situation: Situation) => Action | undefined) | undefined,
}));

vi.mock("./decide.js", async (importOriginal) => {
  const real = await importOriginal<typeof import("./decide.js")>();
  return { ...real, decide: (situation: Situation) => swapped.choose?.(situation) ?? real.decide(situation) };
});

afterEach(() => {
  swapped.choose = undefined;
});

/** From now on the table chooses `action` whenever `event` happens (and `when` holds). */
function chooseAt(event: Situation["event"], action: Action, when: (s: Situation) => boolean = () => true) {
  swapped.choose = (situation) => (situation.event === event && when(situation) ? action : undefined);
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected the call to fail");
}

const bug = (action: string, after: string) =>
  `idempotool: the decision table chose "${action}" after ${after}; nothing more runs.`;

/** A send_sms tool counting its runs; `fail` makes it throw (the effect may have happened). */
function smsTool(
  store: IdempotencyStore,
  options: {
    effect?: Effect;
    verify?: () => VerifyOutcome<string>;
    fail?: () => unknown;
    clock?: ReturnType<typeof fakeClock>;
  } = {},
) {
  const clock = options.clock ?? fakeClock();
  const events: string[] = [];
  let runs = 0;
  const tool = idempotent(
    async (_args: { to: string }) => {
      runs++;
      if (options.fail) throw options.fail();
      return `msg-${runs}`;
    },
    {
      name: "send_sms",
      store,
      clock,
      effect: options.effect ?? "irreversible",
      leaseMs: 60_000,
      onEvent: (event) => events.push(event.type),
      ...(options.verify ? { verify: options.verify } : {}),
    },
  );
  return { tool, clock, events, runs: () => runs };
}

/** A worker claimed (default, "k") and died; its lease has passed by `clock`. */
async function crashedClaim(store: IdempotencyStore, clock: ReturnType<typeof fakeClock>) {
  await store.claim({
    scope: "default",
    key: "k",
    tool: "send_sms",
    fingerprint: fingerprint({ to: "bob" }),
    token: "dead-worker",
    leaseMs: 1_000,
    ttlMs: 86_400_000,
    now: clock.now(),
  });
  await clock.advance(1_000);
}

describe("a table that chooses what a step cannot do stops the call, naming both", () => {
  it("after a claim with no answer: no release is tried and the tool never runs", async () => {
    const inner = memoryStore();
    let releases = 0;
    const store: IdempotencyStore = {
      ...inner,
      claim: () => Promise.reject(new Error("connection reset")),
      release: (request) => {
        releases++;
        return inner.release(request);
      },
    };
    chooseAt("claim_failed", "run");
    const { tool, runs } = smsTool(store);
    expect(((await rejection(tool({ to: "bob" }, { key: "k" }))) as Error).message).toBe(
      bug("run", "a claim with no answer"),
    );
    expect(releases).toBe(0);
    expect(runs()).toBe(0);
  });

  it("after a claim that landed", async () => {
    chooseAt("claimed", "replay");
    const { tool, runs } = smsTool(memoryStore());
    expect(((await rejection(tool({ to: "bob" }, { key: "k" }))) as Error).message).toBe(
      bug("replay", "a claim that landed"),
    );
    expect(runs()).toBe(0);
  });

  it("after a claim that found a record, instead of claiming again and again", async () => {
    const store = memoryStore();
    const { tool, runs } = smsTool(store);
    await tool({ to: "bob" }, { key: "k" });
    chooseAt("found", "lease_lost");
    expect(((await rejection(tool({ to: "bob" }, { key: "k" }))) as Error).message).toBe(
      bug("lease_lost", "a claim that found a record"),
    );
    expect(runs()).toBe(1);
  });

  it("after a takeover that did not land: nothing runs on a record another caller holds", async () => {
    const inner = memoryStore();
    const clock = fakeClock();
    await crashedClaim(inner, clock);
    // Another caller moves the record first, so this call's compare-and-swap finds it gone.
    const store: IdempotencyStore = {
      ...inner,
      takeover: async (request) => {
        await inner.takeover({ ...request, token: "faster-caller" });
        return inner.takeover(request);
      },
    };
    chooseAt("takeover", "run");
    const { tool, runs } = smsTool(store, { clock, effect: "native-key" });
    expect(((await rejection(tool({ to: "bob" }, { key: "k" }))) as Error).message).toBe(
      bug("run", "a takeover that did not land"),
    );
    expect(runs()).toBe(0);
  });

  it("after a takeover that landed, instead of looking again", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    await crashedClaim(store, clock);
    chooseAt("takeover", "replay");
    const { tool, runs } = smsTool(store, { clock, effect: "native-key" });
    expect(((await rejection(tool({ to: "bob" }, { key: "k" }))) as Error).message).toBe(
      bug("replay", "a takeover"),
    );
    expect(runs()).toBe(0);
  });

  it("a takeover the table calls unknown fails closed with the record it took", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    await crashedClaim(store, clock);
    chooseAt("takeover", "outcome_unknown");
    const { tool, runs, events } = smsTool(store, { clock, effect: "native-key" });
    const error = await rejection(tool({ to: "bob" }, { key: "k" }));
    expect(error).toBeInstanceOf(OutcomeUnknownError);
    expect((error as OutcomeUnknownError).record).toMatchObject({ status: "in_progress", attempts: 2 });
    expect((error as Error).message).toContain("stopped renewing its lease");
    expect(events).toEqual(["takeover", "outcome_unknown"]);
    expect(runs()).toBe(0);
  });

  it("a verify the table chooses with no hook given", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    await crashedClaim(store, clock);
    chooseAt("takeover", "verify");
    const { tool, runs } = smsTool(store, { clock, effect: "native-key" });
    expect(((await rejection(tool({ to: "bob" }, { key: "k" }))) as Error).message).toBe(
      bug("verify", "a takeover with no verify hook"),
    );
    expect(runs()).toBe(0);
  });

  it("after the tool returned: its result is not recorded", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    chooseAt("tool", "release");
    const { tool, runs } = smsTool(store, { clock });
    expect(((await rejection(tool({ to: "bob" }, { key: "k" }))) as Error).message).toBe(
      bug("release", "the tool returned"),
    );
    expect(runs()).toBe(1);
    expect(await store.get({ scope: "default", key: "k" }, clock.now())).toMatchObject({
      status: "in_progress",
    });
  });

  it("after the tool threw", async () => {
    chooseAt("tool", "return_result");
    const { tool } = smsTool(memoryStore(), { fail: () => new Error("socket hang up") });
    expect(((await rejection(tool({ to: "bob" }, { key: "k" }))) as Error).message).toBe(
      bug("return_result", "the tool threw"),
    );
  });

  it.each([
    ["completed", "settle_failed", { status: "completed", result: "msg-0" }],
    ["failed", "settle_completed", { status: "failed", error: new Error("bounced") }],
    ["undefined", "settle_completed", undefined],
    ["undefined", "settle_failed", undefined],
  ] as const)(
    "after verify answered %s, when the table settles something else",
    async (answered, action, outcome) => {
      const store = memoryStore();
      const clock = fakeClock();
      const first = smsTool(store, { clock, fail: () => new Error("socket hang up") });
      await rejection(first.tool({ to: "bob" }, { key: "k" }));
      chooseAt("verified", action);
      const { tool, runs } = smsTool(store, {
        clock,
        verify: () => {
          if (outcome === undefined) throw new Error("gateway down");
          return outcome as VerifyOutcome<string>;
        },
      });
      expect(((await rejection(tool({ to: "bob" }, { key: "k" }))) as Error).message).toBe(
        bug(action, `verify answered ${answered}`),
      );
      expect(runs()).toBe(0);
      expect(await store.get({ scope: "default", key: "k" }, clock.now())).toMatchObject({
        status: "in_progress",
        attempts: 2,
      });
    },
  );

  it.each([
    ["completed", "throw_failure", "a completed settle", undefined],
    ["failed", "return_result", "a failed settle", () => definitiveFailure(new Error("bounced"))],
    ["unknown", "return_result", "an unknown settle", () => new Error("socket hang up")],
  ] as const)("after a %s settle", async (status, action, after, fail) => {
    const store = memoryStore();
    const clock = fakeClock();
    chooseAt("settled", action);
    const { tool } = smsTool(store, { clock, ...(fail ? { fail } : {}) });
    expect(((await rejection(tool({ to: "bob" }, { key: "k" }))) as Error).message).toBe(bug(action, after));
    expect(await store.get({ scope: "default", key: "k" }, clock.now())).toMatchObject({ status });
  });
});
