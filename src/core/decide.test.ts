import { describe, expect, it } from "vitest";
import {
  Action,
  type ActionOf,
  actionsOf,
  type CallEvent,
  callEvents,
  decide,
  domains,
  firstMatch,
  found,
  matches,
  type Request,
  type Row,
  type Situation,
  situationsOf,
  table,
  type When,
} from "./decide.js";
import type { IdempotencyRecord } from "./store.js";

const all = callEvents.flatMap((event) => situationsOf(event));
const where = (event: CallEvent, facts: Record<string, string>) =>
  situationsOf(event).filter((s) => Object.entries(facts).every(([f, v]) => (s as never)[f] === v));

/**
 * What an action needs of its situation to be carried out, where that is more than its event: settling a
 * result needs the result (the tool returned it, or verify found it), a failure a throw, going on after a
 * takeover the record taken, asking verify the hook, handing back an outcome a settle of that status. The
 * interpreter (execute.ts, idempotent.ts) relies on it instead of checking at run time; a test below holds
 * every situation of the table to it.
 */
const needs: {
  readonly [E in CallEvent]?: { readonly [A in ActionOf<E>]?: When<E> };
} = {
  takeover: {
    run: { taken: "yes" },
    verify: { taken: "yes", verify: "given" },
    outcome_unknown: { taken: "yes" },
  },
  tool: {
    settle_completed: { outcome: "returned" },
    // It rethrows what the tool threw.
    release: { outcome: ["declared_failed", "declared_not_executed", "threw"] },
    settle_failed: { outcome: ["declared_failed", "declared_not_executed", "threw"] },
    settle_unknown: { outcome: ["declared_failed", "declared_not_executed", "threw"] },
  },
  verified: {
    settle_completed: { outcome: "completed" },
    settle_failed: { outcome: "failed" },
  },
  settled: {
    return_result: { status: "completed" },
    replay: { status: "completed" },
    throw_failure: { status: "failed" },
    replay_failure: { status: "failed" },
    outcome_unknown: { status: "unknown" },
  },
};

describe("decide()", () => {
  it("enumerates every combination of every event's facts", () => {
    for (const event of callEvents) {
      const size = Object.values(domains[event] as Record<string, readonly string[]>).reduce(
        (n, values) => n * values.length,
        1,
      );
      const situations = situationsOf(event);
      expect(situations).toHaveLength(size);
      expect(new Set(situations.map((s) => JSON.stringify(s))).size).toBe(size);
    }
    expect(all.length).toBeGreaterThan(1000);
  });

  it("decides every situation of the whole domain, with an action it knows", () => {
    const actions = new Set<string>(Object.values(Action));
    for (const situation of all) expect(actions.has(decide(situation))).toBe(true);
  });

  it("decides each situation as the first row that matches it", () => {
    for (const event of callEvents) {
      const rows = table[event] as readonly Row<CallEvent>[];
      for (const situation of situationsOf(event))
        expect(decide(situation)).toBe(firstMatch(rows, situation));
    }
  });

  it("chooses at each event only that event's own actions, each where it can be carried out", () => {
    for (const event of callEvents) {
      const own: readonly string[] = actionsOf[event];
      const wanted = (needs[event] ?? {}) as Record<string, Record<string, string | readonly string[]>>;
      for (const situation of situationsOf(event)) {
        const action = decide(situation);
        expect(own).toContain(action);
        const facts = situation as unknown as Record<string, string>;
        if (wanted[action])
          expect(matches(wanted[action], facts), `${action} in ${JSON.stringify(situation)}`).toBe(true);
      }
    }
  });

  it("has no dead rows: each row is the first match of some situation", () => {
    for (const event of callEvents) {
      const rows = table[event] as readonly Row<CallEvent>[];
      const firsts = new Set(situationsOf(event).map((s) => rows.findIndex((row) => rowMatches(row, s))));
      expect([...firsts].sort((a, b) => a - b)).toEqual(rows.map((_, i) => i));
    }
  });

  it("ends every event's rows with one that matches everything, and names only facts the event has", () => {
    for (const event of callEvents) {
      const rows = table[event] as readonly Row<CallEvent>[];
      expect(rows.at(-1)?.when).toEqual({});
      const facts = Object.keys(domains[event]);
      for (const row of rows) {
        for (const [fact, value] of Object.entries(row.when)) {
          expect(facts).toContain(fact);
          const values = (domains[event] as Record<string, readonly string[]>)[fact]!;
          for (const v of [value].flat()) expect(values).toContain(v);
        }
        expect(row.why).toMatch(/^[A-Z].*\.$/);
      }
    }
  });

  it("refuses a key held by another tool or for other arguments, whatever else holds", () => {
    for (const s of [...where("found", { tool: "other" }), ...where("found", { fingerprint: "other" })]) {
      expect(decide(s)).toBe(Action.conflict);
    }
  });

  it("never runs on a record another caller holds: it replays, waits, takes over first or fails closed", () => {
    for (const s of where("found", { token: "other" })) expect(decide(s)).not.toBe(Action.run);
  });

  it("runs again on this call's own claim only while it is in progress", () => {
    const runs = all.filter((s) => s.event === "found" && decide(s) === Action.run);
    expect(runs.length).toBeGreaterThan(0);
    for (const s of runs) {
      expect(s).toMatchObject({
        tool: "same",
        fingerprint: "same",
        token: "own",
        status: "in_progress",
        lease: "live",
      });
    }
    expect(decide(pick("found", { token: "own", status: "completed" }))).toBe(Action.replay);
    expect(decide(pick("found", { token: "own", status: "in_progress", lease: "passed" }))).toBe(
      Action.takeOver,
    );
  });

  it("replays settled outcomes of the same call", () => {
    const same = { tool: "same", fingerprint: "same", token: "other" };
    for (const s of where("found", { ...same, status: "completed" })) expect(decide(s)).toBe(Action.replay);
    for (const s of where("found", { ...same, status: "failed" }))
      expect(decide(s)).toBe(Action.replayFailure);
  });

  it("waits on a live claim of another caller until the wait runs out, then gives up", () => {
    const live = { tool: "same", fingerprint: "same", token: "other", status: "in_progress", lease: "live" };
    for (const s of where("found", { ...live, waited: "within" })) expect(decide(s)).toBe(Action.wait);
    for (const s of where("found", { ...live, waited: "out" })) expect(decide(s)).toBe(Action.giveUp);
  });

  it("fails closed on an unknown or stale record unless the effect class or verify makes it safe", () => {
    const same = { tool: "same", fingerprint: "same", token: "other" };
    const doubtful = [
      ...where("found", { ...same, status: "unknown" }),
      ...where("found", { ...same, status: "in_progress", lease: "passed" }),
    ];
    for (const s of doubtful) {
      const safe =
        s.event === "found" &&
        (s.effect === "native-key" || s.effect === "owned-store" || s.verify === "given");
      expect(decide(s)).toBe(safe ? Action.takeOver : Action.outcomeUnknown);
    }
  });

  it("after a takeover, runs only where running again is safe, and asks verify otherwise", () => {
    for (const s of where("takeover", { taken: "no" })) expect(decide(s)).toBe(Action.lookAgain);
    for (const s of where("takeover", { taken: "yes", token: "own" })) expect(decide(s)).toBe(Action.run);
    for (const s of where("takeover", { taken: "yes", token: "other" })) {
      if (s.event !== "takeover") continue;
      const rerunSafe = s.effect === "native-key" || s.effect === "owned-store";
      expect(decide(s)).toBe(
        rerunSafe ? Action.run : s.verify === "given" ? Action.verify : Action.outcomeUnknown,
      );
    }
  });

  it("records what the tool declared, and an undeclared throw by the effect class", () => {
    const decided = (outcome: string, effect: string) => decide(pick("tool", { outcome, effect }));
    for (const effect of domains.tool.effect) {
      expect(decided("returned", effect)).toBe(Action.settleCompleted);
      expect(decided("declared_failed", effect)).toBe(Action.settleFailed);
      expect(decided("declared_not_executed", effect)).toBe(Action.release);
    }
    expect(decided("threw", "native-key")).toBe(Action.release);
    expect(decided("threw", "owned-store")).toBe(Action.release);
    expect(decided("threw", "compensatable")).toBe(Action.settleUnknown);
    expect(decided("threw", "irreversible")).toBe(Action.settleUnknown);
  });

  it("records what verify found, and keeps the outcome unknown when it cannot tell", () => {
    const decided = (outcome: string) => decide(pick("verified", { outcome }));
    expect(decided("not_executed")).toBe(Action.run);
    expect(decided("completed")).toBe(Action.settleCompleted);
    expect(decided("failed")).toBe(Action.settleFailed);
    expect(decided("unknown")).toBe(Action.settleUnknown);
    expect(decided("hook_failed")).toBe(Action.settleUnknown);
    // Running needs the claim still held; a settle is fenced by the store anyway.
    expect(decide({ event: "verified", outcome: "not_executed", claim: "lost" })).toBe(Action.leaseLost);
    for (const outcome of ["completed", "failed", "unknown", "hook_failed"] as const) {
      expect(decide({ event: "verified", outcome, claim: "lost" })).toBe(
        decide({ event: "verified", outcome, claim: "held" }),
      );
    }
  });

  it("reports a settle another owner refused as lease_lost, and otherwise the outcome settled", () => {
    for (const s of where("settled", { answer: "lost" })) expect(decide(s)).toBe(Action.leaseLost);
    for (const answer of ["settled", "store_failed"]) {
      const decided = (status: string, by: string) => decide(pick("settled", { status, after: by, answer }));
      expect(decided("completed", "run")).toBe(Action.returnResult);
      expect(decided("completed", "verify")).toBe(Action.replay);
      expect(decided("failed", "run")).toBe(Action.throwFailure);
      expect(decided("failed", "verify")).toBe(Action.replayFailure);
      expect(decided("unknown", "run")).toBe(Action.outcomeUnknown);
      expect(decided("unknown", "verify")).toBe(Action.outcomeUnknown);
    }
  });

  it("refuses a fact value outside its domain instead of guessing", () => {
    expect(() => decide({ event: "tool", outcome: "bogus", effect: "irreversible" } as never)).toThrow(
      /tool has no outcome "bogus"/,
    );
  });

  it("matches a row naming one value or a list of values, and refuses a situation no row decides", () => {
    const rows = [
      { when: { outcome: "returned" }, act: Action.settleCompleted, why: "one value" },
      { when: { outcome: ["declared_failed", "threw"] }, act: Action.settleFailed, why: "a list" },
    ] as Row<CallEvent>[];
    const situation = (outcome: string) => ({ event: "tool", outcome, effect: "irreversible" }) as Situation;
    expect(firstMatch(rows, situation("returned"))).toBe(Action.settleCompleted);
    expect(firstMatch(rows, situation("threw"))).toBe(Action.settleFailed);
    // One value is matched whole, never as a part of a longer one.
    expect(matches({ outcome: "declared_failed" }, { outcome: "failed" })).toBe(false);
    expect(matches({ outcome: ["declared_failed"] }, { outcome: "failed" })).toBe(false);
    expect(() => firstMatch(rows, situation("declared_not_executed"))).toThrow(
      'decide(): no row of tool matches {"event":"tool","outcome":"declared_not_executed","effect":"irreversible"}',
    );
  });

  it("runs a fresh claim, frees one whose reply was lost, and drops a lease when refused or left to pass", () => {
    expect(decide({ event: "claimed" })).toBe(Action.run);
    expect(decide({ event: "claim_failed" })).toBe(Action.releaseUnrun);
    for (const lease of ["live", "passed"] as const) {
      // A renewal that landed holds the claim, however late its answer came: nobody took it over meanwhile.
      expect(decide({ event: "renewed", answer: "renewed", lease })).toBe(Action.keepLease);
      expect(decide({ event: "renewed", answer: "refused", lease })).toBe(Action.loseLease);
    }
    expect(decide({ event: "renewed", answer: "store_failed", lease: "live" })).toBe(Action.keepLease);
    expect(decide({ event: "renewed", answer: "store_failed", lease: "passed" })).toBe(Action.loseLease);
  });
});

describe("found()", () => {
  const record: IdempotencyRecord = {
    scope: "default",
    key: "k",
    tool: "send_email",
    fingerprint: "fp-1",
    status: "in_progress",
    token: "t-1",
    createdAt: 1_000,
    updatedAt: 1_000,
    leaseExpiresAt: 5_000,
    expiresAt: 90_000,
    attempts: 1,
    result: null,
    error: null,
  };
  const request: Request = {
    tool: "send_email",
    sameFingerprint: (fingerprint) => fingerprint === "fp-1",
    token: "t-2",
    effect: "irreversible",
    verify: false,
  };

  it("compares the record with the request", () => {
    expect(found(record, request, 0, 0, 10)).toEqual({
      event: "found",
      tool: "same",
      fingerprint: "same",
      token: "other",
      status: "in_progress",
      lease: "live",
      waited: "within",
      effect: "irreversible",
      verify: "none",
    });
    expect(
      found(
        { ...record, tool: "send_sms", fingerprint: "fp-2", token: "t-2", status: "unknown" },
        { ...request, effect: "native-key", verify: true },
        0,
        0,
        10,
      ),
    ).toMatchObject({
      tool: "other",
      fingerprint: "other",
      token: "own",
      status: "unknown",
      effect: "native-key",
      verify: "given",
    });
  });

  it("never compares the fingerprint of another tool's record, which may be keyed under that tool's keys", () => {
    const compares: string[] = [];
    const keyProblem = (fingerprint: string) => {
      compares.push(fingerprint);
      throw new Error("this tool's keys cannot read that fingerprint");
    };
    expect(
      found({ ...record, tool: "send_sms" }, { ...request, sameFingerprint: keyProblem }, 0, 0, 10),
    ).toMatchObject({ tool: "other", fingerprint: "other" });
    expect(compares).toEqual([]);
    expect(() => found(record, { ...request, sameFingerprint: keyProblem }, 0, 0, 10)).toThrow(/keys/);
  });

  it("judges the lease by the store's clock: it has passed at its end", () => {
    expect(found(record, request, 4_999, 0, 10).lease).toBe("live");
    expect(found(record, request, 5_000, 0, 10).lease).toBe("passed");
  });

  it("counts a wait of exactly waitMs as run out (and waitMs 0 as never waiting)", () => {
    expect(found(record, request, 0, 9, 10).waited).toBe("within");
    expect(found(record, request, 0, 10, 10).waited).toBe("out");
    expect(found(record, request, 0, 0, 0).waited).toBe("out");
  });
});

function pick(event: CallEvent, facts: Record<string, string>): Situation {
  const matching = where(event, facts);
  expect(matching.length).toBeGreaterThan(0);
  return matching[0]!;
}

function rowMatches(row: Row<CallEvent>, situation: Situation): boolean {
  return Object.entries(row.when).every(([fact, value]) =>
    [value].flat().includes((situation as unknown as Record<string, string>)[fact]!),
  );
}
