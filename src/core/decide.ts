/**
 * The record protocol as one table: for each thing that can happen to a call (an answer from the store,
 * the tool returning or throwing, a hook answering), what the call does next. Pure: no I/O, no clock,
 * no timers. `idempotent()` interprets the actions against the store; docs/concepts.md prints the table,
 * and the spin model of the protocol is generated from it, so the code and the checked model cannot drift.
 *
 * Each event has a few facts, each with a closed set of values. A situation is one value per fact; the
 * event's rows are read top to bottom and the first whose facts all match decides. A row that names no
 * value for a fact matches every value of it, and every event ends in a row that matches everything.
 */
import type { Effect } from "./options.js";
import type { IdempotencyRecord, RecordStatus } from "./store.js";

/** What a call can do next. */
export const Action = {
  /** Run the tool under the claim this call now holds. */
  run: "run",
  /** Another tool or other arguments hold the key: refuse (`idempotency_key_conflict`); nothing runs. */
  conflict: "conflict",
  /** Hand back the recorded result (`was_replay: true`); nothing runs. */
  replay: "replay",
  /** Hand back the recorded definitive failure; nothing runs. */
  replayFailure: "replay_failure",
  /** Another caller holds a live claim: wait for its outcome, then look again. */
  wait: "wait",
  /** Waited as long as allowed (`idempotency_key_in_use`, with when to retry). */
  giveUp: "give_up",
  /** Compare-and-swap the record from its previous owner to this call, fenced by that owner's token. */
  takeOver: "take_over",
  /** Ask the verify hook what became of the earlier attempt, holding the claim meanwhile. */
  verify: "verify",
  /** Nobody knows whether the effect happened: fail closed (`outcome_unknown`) until verify or an operator decides. */
  outcomeUnknown: "outcome_unknown",
  /** Someone else moved the record first: claim again and judge what is there now. */
  lookAgain: "look_again",
  /** The claim's reply never came, so it may have landed: release it by this call's token, report `store_unavailable`. */
  releaseUnrun: "release_unrun",
  /** Record the result, fenced by the owner token. */
  settleCompleted: "settle_completed",
  /** Record the definitive failure, fenced by the owner token. */
  settleFailed: "settle_failed",
  /** Record that the outcome is unknown, fenced by the owner token. */
  settleUnknown: "settle_unknown",
  /** The effect certainly did not happen: free the key (fenced by the owner token) and pass the error on. */
  release: "release",
  /** Hand this call's own result to the caller (`was_replay: false`). */
  returnResult: "return_result",
  /** Pass this call's definitive failure on to the caller. */
  throwFailure: "throw_failure",
  /** Another owner holds the record now: this call's outcome was not recorded (`lease_lost`). */
  leaseLost: "lease_lost",
  /** Keep the lease: renew again at the next tick. */
  keepLease: "keep_lease",
  /**
   * The claim is gone, or another caller may take it over now (the store could not be reached until the lease
   * passed): abort the tool's signal. Its settle is fenced as any other.
   */
  loseLease: "lose_lease",
} as const;
export type Action = (typeof Action)[keyof typeof Action];

const effects = [
  "native-key",
  "owned-store",
  "compensatable",
  "irreversible",
] as const satisfies readonly Effect[];
const statuses = ["in_progress", "completed", "failed", "unknown"] as const satisfies readonly RecordStatus[];

/** Every event, its facts, and each fact's values: the whole domain of the table. */
export const domains = {
  /** The claim landed: this call holds a fresh record. */
  claimed: {},
  /** The claim got no answer from the store. */
  claim_failed: {},
  /** The claim found a record already there. */
  found: {
    /** Was the record made by this tool? */
    tool: ["same", "other"],
    /** Was it made for these arguments? */
    fingerprint: ["same", "other"],
    /** Does it carry this call's own owner token (its own claim, whose reply was lost)? */
    token: ["own", "other"],
    status: statuses,
    /** Is its lease still running by the store's clock? */
    lease: ["live", "passed"],
    /** Has this call already waited as long as `waitMs` allows? */
    waited: ["within", "out"],
    effect: effects,
    verify: ["given", "none"],
  },
  /** The takeover was answered. */
  takeover: {
    /** Did the compare-and-swap land (read back when its reply was lost)? */
    taken: ["yes", "no"],
    /** Whose record was taken: this call's own claim, or another caller's? */
    token: ["own", "other"],
    effect: effects,
    verify: ["given", "none"],
  },
  /** The tool finished. */
  tool: {
    /** What it did: returned, threw a `definitiveFailure`, threw `notExecuted`, or threw anything else. */
    outcome: ["returned", "declared_failed", "declared_not_executed", "threw"],
    effect: effects,
  },
  /** The verify hook answered (or threw, or answered something unrecognised: `hook_failed`). */
  verified: {
    outcome: ["completed", "failed", "not_executed", "unknown", "hook_failed"],
    /** Does this call still hold the record when the hook answers (a fenced renewal tells)? */
    claim: ["held", "lost"],
  },
  /** A settle was answered (a refusal is read back first: it may be this owner's own, resent). */
  settled: {
    status: ["completed", "failed", "unknown"],
    /** Did the outcome come from this call's run, or from the verify hook about an earlier attempt? */
    after: ["run", "verify"],
    /** Settled; refused because another owner holds the record; or the store never answered. */
    answer: ["settled", "lost", "store_failed"],
  },
  /** A lease renewal was answered. */
  renewed: {
    answer: ["renewed", "refused", "store_failed"],
    /**
     * Is the lease still live by this worker's own monotonic clock, counted from when it sent the claim's
     * last renewal that landed (or from when the lease began)?
     */
    lease: ["live", "passed"],
  },
} as const;

type Domains = typeof domains;
/** Something that happened to a call. */
export type CallEvent = keyof Domains;
/** The facts of one event: one value per fact. */
export type Facts<E extends CallEvent> = { -readonly [F in keyof Domains[E]]: ValueOf<Domains[E][F]> };
type ValueOf<T> = T extends readonly (infer V)[] ? V : never;
/** One situation: an event and its facts. */
export type Situation = { [E in CallEvent]: { readonly event: E } & Facts<E> }[CallEvent];

/** Facts a row names: one value, or a list any of which matches; unnamed facts match anything. */
export type When<E extends CallEvent> = {
  readonly [F in keyof Facts<E>]?: Facts<E>[F] | readonly Facts<E>[F][];
};

/** One row of the table: when these facts hold, do this, because. */
export interface Row<E extends CallEvent> {
  readonly when: When<E>;
  readonly act: ActionOf<E>;
  readonly why: string;
}

/**
 * The actions each event may choose. A row names one of its event's own, and the interpreter carries out
 * each event with one `switch` over exactly these: the compiler checks that it covers them all.
 */
export const actionsOf = {
  claimed: [Action.run],
  claim_failed: [Action.releaseUnrun],
  found: [
    Action.conflict,
    Action.run,
    Action.takeOver,
    Action.replay,
    Action.replayFailure,
    Action.wait,
    Action.giveUp,
    Action.outcomeUnknown,
  ],
  takeover: [Action.lookAgain, Action.run, Action.verify, Action.outcomeUnknown],
  tool: [Action.settleCompleted, Action.release, Action.settleFailed, Action.settleUnknown],
  verified: [Action.leaseLost, Action.run, Action.settleCompleted, Action.settleFailed, Action.settleUnknown],
  settled: [
    Action.leaseLost,
    Action.returnResult,
    Action.replay,
    Action.throwFailure,
    Action.replayFailure,
    Action.outcomeUnknown,
  ],
  renewed: [Action.loseLease, Action.keepLease],
} as const satisfies { readonly [E in CallEvent]: readonly Action[] };

/** What a call may do next after event `E`. */
export type ActionOf<E extends CallEvent> = (typeof actionsOf)[E][number];

const takesOverEffects = ["native-key", "owned-store"] as const;

/** The table. Rows are read top to bottom; the first that matches decides. */
export const table: { readonly [E in CallEvent]: readonly Row<E>[] } = {
  claimed: [{ when: {}, act: Action.run, why: "This call holds the key now." }],
  claim_failed: [
    {
      when: {},
      act: Action.releaseUnrun,
      why: "The claim may have landed with its reply lost; the tool has not run, so free the key.",
    },
  ],
  found: [
    { when: { tool: "other" }, act: Action.conflict, why: "A key belongs to one tool." },
    {
      when: { fingerprint: "other" },
      act: Action.conflict,
      why: "The key was used for other arguments: a new action needs a new key.",
    },
    {
      when: { token: "own", status: "in_progress", lease: "live" },
      act: Action.run,
      why: "This call's own claim, seen again after its reply was lost: the tool has not run under it.",
    },
    {
      when: { token: "own", status: "in_progress", lease: "passed" },
      act: Action.takeOver,
      why: "This call's own claim, whose lease passed before it heard of it: take it back, as any stale claim.",
    },
    { when: { status: "completed" }, act: Action.replay, why: "The call completed: hand back its result." },
    {
      when: { status: "failed" },
      act: Action.replayFailure,
      why: "The call failed definitively: hand back its failure.",
    },
    {
      when: { status: "in_progress", lease: "live", waited: "within" },
      act: Action.wait,
      why: "Another caller is running it: wait for its outcome.",
    },
    {
      when: { status: "in_progress", lease: "live", waited: "out" },
      act: Action.giveUp,
      why: "Waited as long as allowed; say when to retry.",
    },
    // Left: an unknown outcome, or a claim whose owner stopped renewing (it may have crashed after its effect).
    {
      when: { effect: takesOverEffects },
      act: Action.takeOver,
      why: "The downstream dedupes by key, or the effect commits with the record: running again is safe.",
    },
    {
      when: { verify: "given" },
      act: Action.takeOver,
      why: "Take the record, then ask verify what happened before anything runs.",
    },
    {
      when: {},
      act: Action.outcomeUnknown,
      why: "The effect may have happened and nothing can tell: fail closed.",
    },
  ],
  takeover: [
    {
      when: { taken: "no" },
      act: Action.lookAgain,
      why: "Another caller moved the record first: judge what is there now.",
    },
    {
      when: { token: "own" },
      act: Action.run,
      why: "It was this call's own claim: the tool never ran under it.",
    },
    {
      when: { effect: takesOverEffects },
      act: Action.run,
      why: "Running again is safe for this effect class.",
    },
    {
      when: { verify: "given" },
      act: Action.verify,
      why: "Ask the downstream what became of the earlier attempt.",
    },
    { when: {}, act: Action.outcomeUnknown, why: "Nothing can tell what happened: fail closed." },
  ],
  tool: [
    { when: { outcome: "returned" }, act: Action.settleCompleted, why: "Record the result." },
    {
      when: { outcome: "declared_not_executed" },
      act: Action.release,
      why: "The tool says nothing happened: free the key.",
    },
    {
      when: { outcome: "declared_failed" },
      act: Action.settleFailed,
      why: "The tool says it failed for good: record the failure.",
    },
    {
      when: { effect: takesOverEffects },
      act: Action.release,
      why: "A retry is safe for this effect class: free the key.",
    },
    {
      when: {},
      act: Action.settleUnknown,
      why: "The effect may have happened before the throw: record that nobody knows.",
    },
  ],
  verified: [
    {
      when: { outcome: "not_executed", claim: "lost" },
      act: Action.leaseLost,
      why: "Another caller took the record while verify ran: running now could be a second effect.",
    },
    {
      when: { outcome: "not_executed" },
      act: Action.run,
      why: "The earlier attempt never took effect: run now.",
    },
    { when: { outcome: "completed" }, act: Action.settleCompleted, why: "Record the outcome verify found." },
    { when: { outcome: "failed" }, act: Action.settleFailed, why: "Record the failure verify found." },
    { when: {}, act: Action.settleUnknown, why: "Verify could not tell: it stays unknown." },
  ],
  settled: [
    {
      when: { answer: "lost" },
      act: Action.leaseLost,
      why: "Another owner holds the record: this outcome was not recorded.",
    },
    {
      when: { status: "completed", after: "run" },
      act: Action.returnResult,
      why: "The effect happened: the caller gets its result, even if the store never answered.",
    },
    {
      when: { status: "completed", after: "verify" },
      act: Action.replay,
      why: "The earlier attempt's result, handed back.",
    },
    { when: { status: "failed", after: "run" }, act: Action.throwFailure, why: "Pass the failure on." },
    {
      when: { status: "failed", after: "verify" },
      act: Action.replayFailure,
      why: "The earlier attempt's failure, handed back.",
    },
    { when: {}, act: Action.outcomeUnknown, why: "Fail closed until verify or an operator decides." },
  ],
  renewed: [
    { when: { answer: "refused" }, act: Action.loseLease, why: "Another owner holds the record now." },
    {
      when: { answer: "store_failed", lease: "passed" },
      act: Action.loseLease,
      why: "No renewal landed before the lease passed: another caller may take the key over now, so the tool stops.",
    },
    {
      when: {},
      act: Action.keepLease,
      why: "Renewed, or the store did not answer while the lease is live: the next renewal tries again.",
    },
  ],
};

/** What a call does next in this situation: the first row of its event whose facts all match. */
export function decide<S extends Situation>(situation: S): ActionOf<S["event"]> {
  const facts = situation as unknown as Readonly<Record<string, string>>;
  const domain = domains[situation.event] as Readonly<Record<string, readonly string[]>>;
  for (const fact in domain) {
    if (!domain[fact]!.includes(facts[fact]!)) {
      throw new Error(`decide(): ${situation.event} has no ${fact} "${facts[fact]}"`);
    }
  }
  return firstMatch(table[situation.event] as readonly Row<CallEvent>[], situation) as ActionOf<S["event"]>;
}

/** The table's rule: the first row whose facts all match decides; a situation no row matches throws. */
export function firstMatch(rows: readonly Row<CallEvent>[], situation: Situation): Action {
  const facts = situation as unknown as Readonly<Record<string, string>>;
  for (const row of rows) {
    if (matches(row.when as Readonly<Record<string, string | readonly string[]>>, facts)) return row.act;
  }
  throw new Error(`decide(): no row of ${situation.event} matches ${JSON.stringify(situation)}`);
}

/** Whether a situation has the facts a row names: one value, or any of a list. */
export function matches(
  when: Readonly<Record<string, string | readonly string[]>>,
  facts: Readonly<Record<string, string>>,
): boolean {
  for (const fact in when) {
    // Called for every row a call's situations pass: a list is searched in place, not copied per fact.
    const wanted = when[fact]!;
    if (typeof wanted === "string" ? wanted !== facts[fact] : !wanted.includes(facts[fact]!)) return false;
  }
  return true;
}

/** What the call knows when its claim found a record. */
export interface Request {
  readonly tool: string;
  /** Does a fingerprint match this call's (the core's comparison, which knows older fingerprint keys)? */
  readonly sameFingerprint: (fingerprint: string) => boolean;
  readonly token: string;
  readonly effect: Effect;
  readonly verify: boolean;
}

/**
 * The facts of a record the claim found: compared with the request, its lease judged by the store's clock
 * (`storeNow`), and the wait so far against `waitMs`.
 */
export function found(
  record: IdempotencyRecord,
  request: Request,
  storeNow: number,
  waitedMs: number,
  waitMs: number,
): { readonly event: "found" } & Facts<"found"> {
  return {
    event: "found",
    tool: record.tool === request.tool ? "same" : "other",
    // Another tool's record is a conflict whatever its fingerprint, which that tool may have keyed under keys
    // of its own: it is not compared, so it can never read as a key problem of this one.
    fingerprint:
      record.tool === request.tool && request.sameFingerprint(record.fingerprint) ? "same" : "other",
    token: record.token === request.token ? "own" : "other",
    status: record.status,
    lease: record.leaseExpiresAt > storeNow ? "live" : "passed",
    waited: waitedMs >= waitMs ? "out" : "within",
    effect: request.effect,
    verify: request.verify ? "given" : "none",
  };
}

/** Every situation of one event: the table's whole domain for it, in a fixed order. */
export function situationsOf<E extends CallEvent>(event: E): Situation[] {
  let partial: Record<string, string>[] = [{ event }];
  for (const [fact, values] of Object.entries(domains[event]) as [string, readonly string[]][]) {
    partial = partial.flatMap((facts) => values.map((value) => ({ ...facts, [fact]: value })));
  }
  return partial as unknown as Situation[];
}

/** Every event, in the table's order. */
export const callEvents = Object.keys(domains) as CallEvent[];
