/**
 * Records whose outcome nobody knows: a stale claim (the worker may have crashed after its effect),
 * or a throw under an irreversible or compensatable effect. The effect class and the verify hook decide.
 */
import {
  type Call,
  type Envelope,
  emit,
  envelope,
  errorMessage,
  leaseLost,
  settleFenced,
  storeFailure,
} from "./call.js";
import { iso, OutcomeUnknownError } from "./errors.js";
import { startLease } from "./lease.js";
import { Effect } from "./options.js";
import { ReplayedFailureError } from "./outcomes.js";
import { ownerToken } from "./owner-token.js";
import { bindingFor } from "./record-binding.js";
import { decodeFailure, encodeFailure, encodeResult } from "./serialize.js";
import { type IdempotencyRecord, RecordStatus } from "./store.js";

/** Runs the tool under a claim the caller owns (passed in to keep the modules acyclic). */
export type Execute = <A, R>(c: Call<A, R>, record: IdempotencyRecord) => Promise<Envelope<Awaited<R>>>;
/**
 * A record whose outcome nobody knows (a stale claim, or a throw under an irreversible effect).
 * Returns the call's envelope, or undefined when another caller moved the record first (look again).
 */
export async function resolveUnknown<A, R>(
  c: Call<A, R>,
  record: IdempotencyRecord,
  reason: string,
  execute: Execute,
): Promise<Envelope<Awaited<R>> | undefined> {
  const takesOver = c.o.effect === Effect.nativeKey || c.o.effect === Effect.ownedStore;
  if (!takesOver && !c.o.verify) {
    const error = new OutcomeUnknownError(record, reason);
    emit(c, "outcome_unknown", record.attempts, error);
    throw error;
  }
  const taken = await takeOver(c, record);
  if (!taken) return undefined;
  emit(c, "takeover", taken.attempts);
  if (takesOver) return execute(c, taken);
  return verifyTakenOver(c, taken, reason, execute);
}

/**
 * Compare-and-swap the record from its stale owner to a fresh token of this call's. Returns the taken
 * record, or null when another caller moved it first.
 */
export async function takeOver<A, R>(
  c: Call<A, R>,
  record: IdempotencyRecord,
): Promise<IdempotencyRecord | null> {
  const token = ownerToken();
  try {
    const taken = await c.o.store.takeover({
      scope: c.scope,
      key: c.key,
      fromToken: record.token,
      token,
      leaseMs: c.o.leaseMs,
      ttlMs: c.o.ttlMs,
      now: c.o.clock.now(),
    });
    if (taken) return taken;
    // A client that resends a command whose reply was lost hears "moved on" from our own takeover: the
    // record carrying our new token says it landed.
    const current = await c.o.store.get({ scope: c.scope, key: c.key }, c.o.clock.now());
    return current?.token === token ? current : null;
  } catch (error) {
    throw storeFailure(c, "takeover", error);
  }
}

/** Ask the verify hook what became of the earlier attempt, holding the claim while it answers. */
async function verifyTakenOver<A, R>(
  c: Call<A, R>,
  taken: IdempotencyRecord,
  reason: string,
  execute: Execute,
): Promise<Envelope<Awaited<R>>> {
  const verify = c.o.verify!;
  emit(c, "verify", taken.attempts);
  const lease = startLease(c.o, taken, c.signal, (error) => emit(c, "store_error", undefined, error));
  let outcome: Awaited<ReturnType<typeof verify>> | undefined;
  let verifyError: unknown;
  try {
    outcome = await verify(taken, { args: c.args, key: c.key, scope: c.scope, signal: lease.signal });
  } catch (error) {
    verifyError = error;
  } finally {
    await lease.stop();
  }

  switch (outcome?.status) {
    case "not_executed":
      return execute(c, taken);
    case "completed": {
      const encoded = encodeResult(outcome.result, c.o.maxResultBytes, c.o.codec, bindingFor(c, taken));
      const settled = await settleFenced(
        c,
        taken,
        RecordStatus.completed,
        encoded.ok ? encoded.text : null,
        encoded.ok ? null : encoded.error,
      );
      if (settled === "lost") throw leaseLost(c, taken);
      emit(c, "replay", taken.attempts);
      const expiresAt = settled === "store_failed" ? c.o.clock.now() + c.o.ttlMs : settled.expiresAt;
      // The effect happened on an earlier attempt: this is its outcome, handed back.
      return envelope(c, outcome.result, true, taken.createdAt, expiresAt);
    }
    case "failed": {
      const settled = await settleFenced(
        c,
        taken,
        RecordStatus.failed,
        null,
        encodeFailure(RecordStatus.failed, outcome.error, outcome.data, c.o.codec, bindingFor(c, taken)),
      );
      if (settled === "lost") throw leaseLost(c, taken);
      emit(c, "replay", taken.attempts);
      const failure = decodeFailure(
        RecordStatus.failed,
        encodeFailure(RecordStatus.failed, outcome.error, outcome.data),
      );
      throw new ReplayedFailureError(failure, iso(taken.createdAt), c.key);
    }
    default: {
      // Still unknown, the hook failed, or it answered something we do not understand: fail closed.
      const settled = await settleFenced(c, taken, RecordStatus.unknown, null, taken.error);
      const kept = typeof settled === "string" ? taken : settled;
      const why =
        outcome?.status === "unknown"
          ? `${reason}; verify could not tell${outcome.reason ? `: ${outcome.reason}` : ""}`
          : verifyError !== undefined
            ? `${reason}; verify failed: ${errorMessage(verifyError)}`
            : `${reason}; verify returned an unrecognised outcome`;
      const error = new OutcomeUnknownError(
        kept,
        why,
        verifyError === undefined ? undefined : { cause: verifyError },
      );
      emit(c, "outcome_unknown", taken.attempts, error);
      throw error;
    }
  }
}

/** The stored failure's message, as a note on an unknown outcome ("" when there is none or it cannot be opened). */
export function failureNote<A, R>(c: Call<A, R>, record: IdempotencyRecord): string {
  if (record.error === null) return "";
  try {
    const failure = decodeFailure(RecordStatus.unknown, record.error, c.o.codec, bindingFor(c, record));
    return ` (${failure.message})`;
  } catch {
    // A note only: a record this worker cannot open still fails closed as unknown.
    return "";
  }
}
