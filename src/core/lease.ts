import { type Clock, keepsProcessAlive, type SleepOptions, systemClock } from "./clock.js";
import { Action, decide } from "./decide.js";
import { LeaseLostError, StoreUnavailableError } from "./errors.js";
import type { IdempotencyRecord, IdempotencyStore } from "./store.js";

/** A claim held while the tool runs: renewed in the background, and lost loudly. */
export interface Lease {
  /** Aborts when the caller aborts or the claim is lost. */
  readonly signal: AbortSignal;
  /**
   * Stop renewing. While a renewal is in flight it returns a promise that settles once it is done, so a
   * settle never races one; otherwise nothing (most calls end before their first renewal, and an async
   * stop() would make every first call cost 4% more).
   */
  stop(): Promise<void> | undefined;
  /**
   * For a lease started with `renewals: "once-pending"`: what the tool returned. A promise still pending
   * after one microtask turn starts the renewals, due from the lease's start as if they had begun then.
   * A tool that has already finished (a value, or a promise settled at once) never waits for the event loop,
   * so no renewal could come due before the lease stops: it gets no timer. Anything else starts them now.
   */
  follow(returned: unknown): void;
}

/**
 * When the renewals begin: `"now"`, or `"once-pending"`, when {@link Lease.follow} finds the tool still
 * running (a first call of a tool that answers at once then costs no timer to set and clear).
 */
export type RenewalStart = "now" | "once-pending";

interface LeaseOptions {
  readonly store: IdempotencyStore;
  readonly clock: Clock;
  readonly leaseMs: number;
  /** How long the record outlives its lease: each renewal moves its expiry to the new lease end plus this. */
  readonly ttlMs: number;
}

/** Renew the claim every third of its lease until stopped. */
export function startLease(
  o: LeaseOptions,
  record: IdempotencyRecord,
  callerSignal: AbortSignal | undefined,
  onStoreError: (error: StoreUnavailableError) => void,
  renewals: RenewalStart = "now",
): Lease {
  return new HeldLease(o, record, callerSignal, onStoreError, renewals);
}

const cancelled = new Error("lease stopped");
// A renewal of a claim nobody settles (a checkpoint left undisposed) must not keep a finished process alive.
const background: SleepOptions = { ref: false };
const settledPromise = Promise.resolve();
/**
 * The `setTimeout` that last gave a lease a timer object, as Node's, Bun's and fake timers' do. Only under it
 * may a lease wait to arm its timer until its tool is found pending: a timer refused then could not stop a
 * tool that has started. A Worker's `setTimeout` returns a number, and one swapped in since is unproven:
 * their leases arm at once, so a refusal still fails the call before its tool runs.
 */
let provenSetTimeout: unknown;

/** Renews every third of the lease until stopped; its signal aborts with the caller's or on a lost claim. */
class HeldLease implements Lease {
  readonly #o: LeaseOptions;
  readonly #record: IdempotencyRecord;
  readonly #callerSignal: AbortSignal | undefined;
  readonly #onStoreError: (error: StoreUnavailableError) => void;
  readonly #everyMs: number;
  readonly #aborter = new AbortController();
  #stopped = false;
  #renewal: Promise<void> | undefined;
  /** The pending renewal: a timer on the system clock, a stopper of the clock's sleep on any other. */
  #timer: NodeJS.Timeout | AbortController | undefined;
  #onCallerAbort: (() => void) | undefined;
  /** For renewals that begin once the tool is found pending: when the lease began, on the system clock. */
  #waitingSince: number | undefined;
  /** The tool's promise has settled (for `follow`). */
  #toolSettled = false;

  constructor(
    o: LeaseOptions,
    record: IdempotencyRecord,
    callerSignal: AbortSignal | undefined,
    onStoreError: (error: StoreUnavailableError) => void,
    renewals: RenewalStart,
  ) {
    this.#o = o;
    this.#record = record;
    this.#callerSignal = callerSignal;
    this.#onStoreError = onStoreError;
    this.#everyMs = Math.max(1, Math.floor(o.leaseMs / 3));
    if (callerSignal?.aborted) this.#aborter.abort(callerSignal.reason);
    else if (callerSignal) {
      this.#onCallerAbort = () => this.#aborter.abort(callerSignal.reason);
      callerSignal.addEventListener("abort", this.#onCallerAbort, { once: true });
    }
    // Only on the system clock: a clock of the caller's gets its sleep at once, as it always has.
    // (`Date.now()`, as `systemClock.now()` reads it: `performance.now()` costs 2% of a first call.)
    if (
      renewals === "once-pending" &&
      o.clock === systemClock &&
      globalThis.setTimeout === provenSetTimeout
    ) {
      this.#waitingSince = Date.now();
    } else this.#schedule(this.#everyMs);
  }

  get signal(): AbortSignal {
    return this.#aborter.signal;
  }

  follow(returned: unknown): void {
    if (this.#waitingSince === undefined) return;
    // A value that is no object is the tool's answer: nothing runs on, so nothing needs renewing.
    if ((typeof returned !== "object" || returned === null) && typeof returned !== "function") {
      this.#waitingSince = undefined;
      return;
    }
    const settled = () => {
      this.#toolSettled = true;
    };
    if (!whenSettled(returned, settled)) {
      this.#begin();
      return;
    }
    // Had it settled already, `settled` was queued first and runs before this check: both run before any
    // timer could fire.
    void settledPromise.then(() => {
      if (!this.#toolSettled) this.#begin();
    });
  }

  /** Start the renewals of a lease that waited to see the tool pending, due from when the lease began. */
  #begin(): void {
    const since = this.#waitingSince;
    if (since === undefined || this.#stopped) return;
    this.#waitingSince = undefined;
    // The tool's first synchronous stretch may have been long: the first renewal stays due from the start
    // (a clock set back in the meantime makes it due a full period from now).
    const elapsed = Date.now() - since;
    try {
      this.#schedule(Math.min(this.#everyMs, Math.max(1, Math.ceil(this.#everyMs - elapsed))));
    } catch (error) {
      // The tool runs already and this lease cannot be renewed: tell the tool to stop.
      this.#aborter.abort(error);
    }
  }

  stop(): Promise<void> | undefined {
    this.#stopped = true;
    const timer = this.#timer;
    if (timer instanceof AbortController) timer.abort(cancelled);
    else clearTimeout(timer);
    if (this.#onCallerAbort) this.#callerSignal?.removeEventListener("abort", this.#onCallerAbort);
    return this.#renewal;
  }

  #schedule(ms: number): void {
    const clock = this.#o.clock;
    if (clock === systemClock) {
      // A bare timer with the lease as its argument: clock.sleep with an AbortController to stop it makes a
      // first call cost 85% more instructions on the memory store. Unref'd, as a background sleep.
      const set = globalThis.setTimeout;
      const timer = set(HeldLease.#renew, ms, this);
      this.#timer = timer;
      if (typeof timer === "object") provenSetTimeout = set;
      keepsProcessAlive(timer, false);
      return;
    }
    const stopper = new AbortController();
    this.#timer = stopper;
    clock.sleep(ms, stopper.signal, background).then(
      () => HeldLease.#renew(this),
      () => {},
    );
  }

  static #renew(lease: HeldLease): void {
    lease.#renewal = lease.#renewOnce();
  }

  async #renewOnce(): Promise<void> {
    const { store, clock, leaseMs, ttlMs } = this.#o;
    const { scope, key, token } = this.#record;
    let answer: "renewed" | "refused" | "store_failed";
    try {
      const renewed = await store.renew({ scope, key, token, leaseMs, ttlMs, now: clock.now() });
      answer = renewed ? "renewed" : "refused";
    } catch (error) {
      const consequence = "The lease stays as it was; the next renewal tries again.";
      this.#onStoreError(new StoreUnavailableError("renew", { cause: error, consequence }));
      answer = "store_failed";
    }
    if (decide({ event: "renewed", answer }) === Action.loseLease) {
      this.#aborter.abort(new LeaseLostError(key));
      return;
    }
    // Kept (a store that did not answer too: the settle's fencing decides in the end whether the claim holds).
    if (!this.#stopped) this.#schedule(this.#everyMs);
  }
}

/**
 * Run `settled` once `returned` settles, if it is a promise of this realm's own Promise: its `then()` runs
 * no code of the tool's (a thenable's `then()` may start work; a subclass's constructor is the tool's code).
 * False, with nothing attached, for anything else: a thenable, a subclass, a proxy whose trap throws, an
 * object made from `Promise.prototype` that is no promise.
 */
function whenSettled(returned: object | ((...args: never[]) => unknown), settled: () => void): boolean {
  try {
    if (Object.getPrototypeOf(returned) !== Promise.prototype) return false;
    void Promise.prototype.then.call(returned, settled, settled);
    return true;
  } catch {
    return false;
  }
}
