import { unreachable } from "./call.js";
import { type Clock, keepsProcessAlive, monotonicNow, type SleepOptions, systemClock } from "./clock.js";
import { decide } from "./decide.js";
import { LeaseLostError, StoreUnavailableError } from "./errors.js";
import type { IdempotencyRecord, IdempotencyStore } from "./store.js";

/** A claim held while the tool runs: renewed in the background, and lost loudly. */
export interface Lease {
  /**
   * Aborts when the caller aborts or the claim is lost: a renewal was refused, or no renewal could reach the
   * store before the lease passed by this process's monotonic clock (another caller may take the key over).
   */
  readonly signal: AbortSignal;
  /**
   * Stop renewing. While a renewal is in flight it returns a promise that settles once it is done, so a
   * settle never races one; otherwise nothing (most calls end before their first renewal, and awaiting
   * nothing would cost each of them a microtask turn).
   */
  stop(): Promise<void> | undefined;
}

/**
 * When the renewals begin. `"now"`: the lease arms its timer as it starts. `"unless-stopped-at-once"`: two
 * microtask turns later, unless the lease was stopped by then, with the first renewal still due a third of
 * the lease from its start. For a caller that starts the lease, calls the tool and awaits what it returned
 * in one synchronous stretch, and stops the lease as soon as it resumes: a tool that answered at once (a
 * value, or a promise already settled) has resumed it by then, and no renewal could have come due, so the
 * call costs no timer to set and clear. Whatever else the tool returned (a promise still pending, a
 * thenable, a promise whose `then` is its own) has not, and its lease is renewed as any other.
 */
export type RenewalStart = "now" | "unless-stopped-at-once";

interface LeaseOptions {
  readonly store: IdempotencyStore;
  readonly clock: Clock;
  readonly leaseMs: number;
  /** How long the record outlives its lease: each renewal moves its expiry to the new lease end plus this. */
  readonly ttlMs: number;
}

/** How a lease starts. */
export interface LeaseStart {
  /** When the renewals begin; default `"now"`. */
  readonly renewals?: RenewalStart | undefined;
  /**
   * When the claim (or takeover) that took the record was sent, by {@link monotonicNow}: the store began
   * the lease no earlier. Default now, which is later than the store's start by up to the claim's round trip.
   */
  readonly claimSentAt?: number | undefined;
}

/**
 * Renew the claim every third of its lease until stopped. The lease is counted from its claim's sending,
 * then from when each renewal that landed was sent.
 */
export function startLease(
  o: LeaseOptions,
  record: IdempotencyRecord,
  callerSignal: AbortSignal | undefined,
  onStoreError: (error: StoreUnavailableError) => void,
  start: LeaseStart = {},
): Lease {
  return new HeldLease(
    o,
    record,
    callerSignal,
    onStoreError,
    start.renewals ?? "now",
    start.claimSentAt ?? monotonicNow(o.clock),
  );
}

/**
 * The failure to report, without running anything, when a claim or takeover sent at `claimSentAt` (by
 * {@link monotonicNow}) was answered as long as its lease after: the store may have let that lease pass
 * already, and another caller may have taken the key over. Undefined when the answer came in time.
 */
export function lateClaim(
  o: { readonly clock: Clock; readonly leaseMs: number },
  claimSentAt: number,
): StoreUnavailableError | undefined {
  const tookMs = monotonicNow(o.clock) - claimSentAt;
  if (tookMs < o.leaseMs) return undefined;
  return new StoreUnavailableError("claim", {
    cause: new Error(
      `its answer came ${Math.round(tookMs)} ms after it was sent, past the ${o.leaseMs} ms lease`,
    ),
    consequence: "The tool did not run: by then another caller may have taken the key over. Retry the call.",
  });
}

const cancelled = new Error("lease stopped");
// A renewal of a claim nobody settles (a checkpoint left undisposed) must not keep a finished process alive.
const background: SleepOptions = { ref: false };
const settledPromise = Promise.resolve();
const nothing = () => {};
/**
 * The `setTimeout` that last gave a lease a timer object, as Node's, Bun's, Deno's, a Worker's on recent
 * compatibility dates, and fake timers' do. Only under it may a lease wait to arm its timer: a timer refused
 * then could not stop a tool that has started. Under one that returns a number (a Worker's on older dates),
 * or one swapped in since, leases arm at once, so a refusal still fails the call before its tool runs.
 */
let provenSetTimeout: typeof setTimeout | undefined;

/**
 * Renews every third of the lease until stopped; its signal aborts with the caller's, on a refused renewal, or
 * once renewals failed until the lease passed.
 */
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
  /** When the lease was last known to hold, on {@link monotonicNow}: its claim's sending, or a landed renewal's. */
  #heldSince: number;
  /** While the renewals wait to begin: the timers to use. */
  #waitingSetTimeout: typeof setTimeout | undefined;

  constructor(
    o: LeaseOptions,
    record: IdempotencyRecord,
    callerSignal: AbortSignal | undefined,
    onStoreError: (error: StoreUnavailableError) => void,
    renewals: RenewalStart,
    claimSentAt: number,
  ) {
    this.#o = o;
    this.#record = record;
    this.#callerSignal = callerSignal;
    this.#onStoreError = onStoreError;
    this.#everyMs = Math.max(1, Math.floor(o.leaseMs / 3));
    this.#heldSince = claimSentAt;
    if (callerSignal?.aborted) this.#aborter.abort(callerSignal.reason);
    else if (callerSignal) {
      this.#onCallerAbort = () => this.#aborter.abort(callerSignal.reason);
      callerSignal.addEventListener("abort", this.#onCallerAbort, { once: true });
    }
    // Only on the system clock: a clock of the caller's gets its sleep at once, as it always has.
    const set = globalThis.setTimeout;
    if (renewals === "unless-stopped-at-once" && o.clock === systemClock && set === provenSetTimeout) {
      this.#waitingSetTimeout = set;
      // Queued now, before the tool runs, so the check (and every renewal) runs in the call's own async
      // context, whatever the tool enters meanwhile.
      void settledPromise.then(nothing).then(() => this.#begin());
    } else this.#schedule(this.#firstRenewalInMs(), set);
  }

  /**
   * The first renewal is due a third of the lease after the claim was sent: sooner when the claim took long to
   * answer, or the tool computed for long before its first await.
   */
  #firstRenewalInMs(): number {
    const elapsed = monotonicNow(this.#o.clock) - this.#heldSince;
    return Math.min(this.#everyMs, Math.max(1, Math.ceil(this.#everyMs - elapsed)));
  }

  get signal(): AbortSignal {
    return this.#aborter.signal;
  }

  /** Two microtask turns in, a lease not yet stopped starts its renewals, due from when it began. */
  #begin(): void {
    if (this.#stopped) return;
    try {
      this.#schedule(this.#firstRenewalInMs(), this.#waitingSetTimeout!);
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

  /** Renew in `ms`, on the system clock with `set` (the `setTimeout` in place when the lease began). */
  #schedule(ms: number, set: typeof setTimeout = globalThis.setTimeout): void {
    const clock = this.#o.clock;
    if (clock === systemClock) {
      // A bare timer with the lease as its argument (the clock's sleep would need an AbortController to stop
      // it, per call). Unref'd, as a background sleep.
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
    const sentAt = monotonicNow(this.#o.clock);
    let answer: "renewed" | "refused" | "store_failed";
    let failure: unknown;
    try {
      const renewed = await store.renew({ scope, key, token, leaseMs, ttlMs, now: clock.now() });
      answer = renewed ? "renewed" : "refused";
    } catch (error) {
      failure = error;
      answer = "store_failed";
    }
    if (answer === "renewed") this.#heldSince = sentAt;
    // Counted from the sending of the last renewal that landed: the store's lease began no earlier.
    const leftMs = this.#heldSince + leaseMs - monotonicNow(this.#o.clock);
    const lease = leftMs > 0 ? "live" : "passed";
    let storeError: StoreUnavailableError | undefined;
    if (answer === "store_failed") {
      const consequence =
        lease === "live"
          ? "The lease stays as it was; the next renewal tries again."
          : "No renewal reached the store before the lease passed: the tool's signal is aborted, as another caller may take the key over.";
      storeError = new StoreUnavailableError("renew", { cause: failure, consequence });
      this.#onStoreError(storeError);
    }
    const action = decide({ event: "renewed", answer, lease });
    switch (action) {
      case "lose_lease":
        this.#aborter.abort(
          storeError === undefined
            ? new LeaseLostError(key)
            : new LeaseLostError(key, { cause: storeError, unrenewed: true }),
        );
        return;
      case "keep_lease":
        if (this.#stopped) return;
        // After a failure, the next try comes no later than the lease's end (live, so still ahead), so a tool
        // cut off from the store is told to stop once it passes. The settle's fence decides whether it held.
        this.#schedule(answer === "store_failed" ? Math.min(this.#everyMs, leftMs) : this.#everyMs);
        return;
      default:
        unreachable(action);
    }
  }
}
