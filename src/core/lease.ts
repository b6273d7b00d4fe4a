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
}

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
): Lease {
  return new HeldLease(o, record, callerSignal, onStoreError);
}

const cancelled = new Error("lease stopped");
// A renewal of a claim nobody settles (a checkpoint left undisposed) must not keep a finished process alive.
const background: SleepOptions = { ref: false };

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

  constructor(
    o: LeaseOptions,
    record: IdempotencyRecord,
    callerSignal: AbortSignal | undefined,
    onStoreError: (error: StoreUnavailableError) => void,
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
    this.#schedule();
  }

  get signal(): AbortSignal {
    return this.#aborter.signal;
  }

  stop(): Promise<void> | undefined {
    this.#stopped = true;
    const timer = this.#timer;
    if (timer instanceof AbortController) timer.abort(cancelled);
    else clearTimeout(timer);
    if (this.#onCallerAbort) this.#callerSignal?.removeEventListener("abort", this.#onCallerAbort);
    return this.#renewal;
  }

  #schedule(): void {
    const clock = this.#o.clock;
    if (clock === systemClock) {
      // A bare timer with the lease as its argument: clock.sleep with an AbortController to stop it makes a
      // first call cost 85% more instructions on the memory store. Unref'd, as a background sleep.
      this.#timer = setTimeout(HeldLease.#renew, this.#everyMs, this);
      keepsProcessAlive(this.#timer, false);
      return;
    }
    const stopper = new AbortController();
    this.#timer = stopper;
    clock.sleep(this.#everyMs, stopper.signal, background).then(
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
    if (!this.#stopped) this.#schedule();
  }
}
