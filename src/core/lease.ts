import type { Clock } from "./clock.js";
import { LeaseLostError, StoreUnavailableError } from "./errors.js";
import type { IdempotencyRecord, IdempotencyStore } from "./store.js";

/** A claim held while the tool runs: renewed in the background, and lost loudly. */
export interface Lease {
  /** Aborts when the caller aborts or the claim is lost. */
  readonly signal: AbortSignal;
  /** Stop renewing; resolves once no renewal is in flight, so a settle never races one. */
  stop(): Promise<void>;
}

interface LeaseOptions {
  readonly store: IdempotencyStore;
  readonly clock: Clock;
  readonly leaseMs: number;
}

/** Renew the claim every third of its lease until stopped. */
export function startLease(
  o: LeaseOptions,
  record: IdempotencyRecord,
  callerSignal: AbortSignal | undefined,
  onStoreError: (error: StoreUnavailableError) => void,
): Lease {
  const aborter = new AbortController();
  const stopper = new AbortController();
  const onCallerAbort = () => aborter.abort(callerSignal?.reason);
  if (callerSignal?.aborted) onCallerAbort();
  else callerSignal?.addEventListener("abort", onCallerAbort, { once: true });

  const everyMs = Math.max(1, Math.floor(o.leaseMs / 3));
  const renewing = (async () => {
    for (;;) {
      try {
        await o.clock.sleep(everyMs, stopper.signal);
      } catch {
        return;
      }
      try {
        const renewed = await o.store.renew({
          scope: record.scope,
          key: record.key,
          token: record.token,
          leaseMs: o.leaseMs,
          now: o.clock.now(),
        });
        if (!renewed) {
          aborter.abort(new LeaseLostError(record.key));
          return;
        }
      } catch (error) {
        // Keep trying: the settle's fencing decides in the end whether this claim still holds.
        onStoreError(new StoreUnavailableError("renew", { cause: error }));
      }
    }
  })();

  return {
    signal: aborter.signal,
    async stop() {
      stopper.abort();
      callerSignal?.removeEventListener("abort", onCallerAbort);
      await renewing;
    },
  };
}
