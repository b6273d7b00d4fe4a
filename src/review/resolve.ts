/**
 * An operator's resolution of a record nobody will finish: "it was sent, here is the message id" or "it
 * never went out, let it run again". A resolution is a settle like any other: it takes the record over
 * from the owner token the operator saw (so it cannot overwrite a record that changed since) and settles
 * or releases it under its own token, and it leaves an entry in the trail before and after it acts.
 */
import { settleAttempts } from "../core/call.js";
import { type Clock, systemClock } from "../core/clock.js";
import {
  ErrorCode,
  IdempotencyError,
  RecordChangedError,
  RecordNotResolvableError,
  StoreUnavailableError,
} from "../core/errors.js";
import {
  durationOption,
  invalidOption,
  invalidOptionFor,
  maxTtlMs,
  sizeOption,
} from "../core/option-checks.js";
import { defaults } from "../core/options.js";
import type { OperatorResolution } from "../core/outcomes.js";
import { isSealed, type RecordBinding, resolveCodec } from "../core/result-codec.js";
import { encodeCompletedNote, encodeResult, sealFailureText } from "../core/serialize.js";
import {
  type ClaimRequest,
  type IdempotencyRecord,
  type IdempotencyStore,
  ownerToken,
  RecordStatus,
  settleOwn,
} from "../core/store.js";
import { iso } from "../core/time.js";
import type { ReconcileTool } from "../reconcile/hooks.js";
import {
  entryText,
  type RecordBefore,
  type ResolveAs,
  recordVersion,
  type TrailEntry,
  trailEntryKey,
  trailScope,
  trailTool,
  trailTtlMs,
} from "./trail.js";

const owner = "resolveRecord()";
/** How long the resolver holds the record between taking it over and settling it. */
const resolverLeaseMs = 60_000;
const maxEvidenceLength = 4000;
/** How long a passed lease must have been passed before its record may be freed: ten default leases. */
const defaultMinStaleMs = 10 * 60_000;
const maxNameLength = 200;

/** How the tool stores its outcomes: give what you give `idempotent()`, so the resolved record is kept alike. */
export type ResolveToolOptions = Pick<ReconcileTool, "ttlMs" | "maxResultBytes" | "redact" | "encryption">;

export interface ResolveOptions {
  readonly store: IdempotencyStore;
  readonly scope: string;
  readonly key: string;
  /**
   * What the operator found: `completed` (the effect happened; later repeats replay `result`), `failed`
   * (it failed definitively; repeats get `error` back) or `not_executed` (it never happened: the key is
   * freed and the next call runs the tool, so a wrong answer here runs the effect again).
   */
  readonly as: ResolveAs;
  /** With `as: "completed"`: the result repeats replay, as the tool would have returned it (JSON). */
  readonly result?: unknown;
  /** With `as: "failed"`: the failure repeats get back; a message, or an object with `message`, `code`, `data`. */
  readonly error?:
    | string
    | { readonly message: string; readonly code?: string | number; readonly data?: unknown };
  /** What the operator relied on. Required: it is the point of the trail. */
  readonly evidence: string;
  /** Who resolves it (a name, an email address). */
  readonly by: string;
  /**
   * The record's `version` as the operator saw it (a review item's `version`, or {@link recordVersion}):
   * the resolution is refused with `record_changed` if the record moved on since. Without it, the record
   * is resolved as it is found when it is read (still fenced from then on).
   */
  readonly expectVersion?: string | undefined;
  /** The tool's storage options; with encryption, the resolved outcome is sealed for its record. */
  readonly tool?: ResolveToolOptions | undefined;
  /**
   * How long the lease of a record in progress must have been passed before it may be freed
   * (`not_executed`) or recorded as failed: its worker may only be cut off or paused, and still make the
   * effect. Judged by the clock the store judges leases by (a database server's), not this `clock`. Whole
   * ms from 0; default 10 minutes. Give 0 once you know the worker is gone.
   */
  readonly minStaleMs?: number | undefined;
  /** Where the resolution comes from, as the trail keeps it. Default `api`. */
  readonly via?: string | undefined;
  readonly clock?: Clock | undefined;
  /** Called with the trail entry once the resolution is applied; a callback that throws is ignored. */
  readonly onResolution?: ((entry: TrailEntry) => void) | undefined;
}

/**
 * Resolve one record that needs a person: an in-progress record whose lease has passed, or an `unknown`
 * one. Refused, with nothing changed, when the record changed since the operator saw it
 * (`record_changed`) or needs no resolution (`record_not_resolvable`: settled already, or its owner's
 * lease is live). Returns the trail entry.
 * @example
 * import { memoryStore } from "idempotool";
 * import { resolveRecord } from "idempotool/review";
 *
 * const store = memoryStore();
 * // After checking the provider's dashboard: the email went out as message m-81.
 * await resolveRecord({
 *   store,
 *   scope: "default",
 *   key: "welcome-ada",
 *   as: "completed",
 *   result: { messageId: "m-81" },
 *   evidence: "provider log: m-81 delivered 10:02 UTC",
 *   by: "ada@example.com",
 * }).catch((error) => console.error(error.message));
 */
export async function resolveRecord(options: ResolveOptions): Promise<TrailEntry> {
  return resolveRecordAsked(options, undefined);
}

/**
 * {@link resolveRecord}, calling `ask` once the resolution would go ahead (every check passed, the lease judged
 * by the store's clock) and before anything is written; `ask` throws to stop it with nothing changed. The
 * CLI asks its operator there, so it never asks about a resolution that would be refused.
 */
export async function resolveRecordAsked(
  options: ResolveOptions,
  ask: (() => Promise<void>) | undefined,
): Promise<TrailEntry> {
  const o = checked(options);
  const { store, scope, key } = o;
  const now = o.clock.now();
  const record = await storeCall("get", () => store.get({ scope, key }, now));
  if (record === undefined)
    throw new RecordChangedError(scope, key, "there is no live record under this key");
  if (o.expectVersion !== undefined && recordVersion(record) !== o.expectVersion) {
    throw new RecordChangedError(scope, key, `it is ${describe(record)} now`);
  }
  refuseSettled(record);
  const binding: RecordBinding = { scope, key, tool: record.tool, fingerprint: record.fingerprint };
  // Sealed notes, or a fingerprint keyed as encryption keys it by default, say the tool encrypts.
  const encrypts =
    [record.error, record.result].some((text) => text !== null && isSealed(text)) ||
    record.fingerprint.startsWith("hmac-sha256:");
  if (o.codec?.encryption === undefined && encrypts && o.as !== "not_executed") {
    invalidOption(
      owner,
      "tool.encryption",
      "must be given: this record's tool encrypts (its notes are sealed or its fingerprint is keyed), and a " +
        "resolution stored in plaintext would be refused by the tool",
    );
  }
  // Everything that could refuse the outcome is checked before anything is written.
  const outcome = encodeOutcome(o, binding);
  const at = o.clock.now();
  const resolution: OperatorResolution = { by: o.by, at: iso(at), evidence: o.evidence };
  const before: RecordBefore = {
    status: record.status,
    attempts: record.attempts,
    firstAttemptAt: iso(record.createdAt),
    lastAttemptAt: iso(record.updatedAt),
    version: recordVersion(record),
  };
  const body = {
    scope,
    key,
    tool: record.tool,
    as: o.as,
    by: o.by,
    at: resolution.at,
    evidence: o.evidence,
    via: o.via,
    before,
  };
  const trail = await claimTrail(store, scope, key, at);
  try {
    if (record.status === RecordStatus.inProgress) {
      // The lease was written by the clock the store judges by (a database server's), which may differ from
      // this resolver's: it judges whether the lease is live, and how long it has been passed, too.
      const storeNow = await storeClock(store, trail);
      refuseLiveLease(record, storeNow);
      refuseRecentlyStale(o, record, storeNow);
    }
    await ask?.();
  } catch (error) {
    // Readers skip a trail record in progress: freeing the claim is tidiness, and a store error doing it
    // must not hide why the resolution stopped.
    await store.release({ scope: trailScope, key: trail.key, token: trail.token }).catch(() => {});
    throw error;
  }
  await writeIntent(store, trail, entryText(body));
  const token = ownerToken();
  const ttlMs = o.ttlMs ?? Math.min(maxTtlMs, Math.max(record.expiresAt - at, defaults.ttlMs));
  // A takeover whose reply was lost may have landed: the record is then held by this resolution until its
  // lease passes, and needs review again; the trail keeps the intent as interrupted.
  const taken = await storeCall(
    "takeover",
    () =>
      store.takeover({
        scope,
        key,
        fromToken: record.token,
        token,
        leaseMs: resolverLeaseMs,
        ttlMs,
        now: at,
      }),
    { consequence: "Nothing was settled; the record may be held for a minute before it needs review again." },
  );
  if (taken === null) {
    await storeCall("release", () =>
      store.release({ scope: trailScope, key: trail.key, token: trail.token }),
    );
    throw new RecordChangedError(scope, key, "another worker or operator settled or took it over first");
  }
  await act(o, taken, token, ttlMs, outcome(resolution));
  const entry: TrailEntry = { ...body, id: trail.key, state: "applied" };
  await settleTrail(store, trail, entryText(body), o.clock.now());
  try {
    o.onResolution?.(entry);
  } catch {
    // A logging callback must never change what was resolved.
  }
  return entry;
}

type Checked = Omit<ResolveOptions, "clock" | "via" | "tool" | "minStaleMs"> & {
  readonly clock: Clock;
  readonly minStaleMs: number;
  readonly via: string;
  readonly codec: ReturnType<typeof resolveCodec>;
  readonly ttlMs: number | undefined;
  readonly maxResultBytes: number;
};

function checked(options: ResolveOptions): Checked {
  if (typeof options !== "object" || options === null) invalidOption(owner, "options", "must be an object");
  if (typeof options.store?.takeover !== "function")
    invalidOption(owner, "store", "must be an idempotency store");
  for (const name of ["scope", "key"] as const) {
    if (typeof options[name] !== "string" || options[name].length === 0) {
      throw new IdempotencyError(ErrorCode.invalidArguments, `${owner}: ${name} must be a non-empty string`);
    }
  }
  if (options.as !== "completed" && options.as !== "failed" && options.as !== "not_executed") {
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      `${owner}: as must be "completed", "failed" or "not_executed", got ${JSON.stringify(options.as)}`,
    );
  }
  text("evidence", options.evidence, maxEvidenceLength);
  text("by", options.by, maxNameLength);
  if (options.as === "completed" && !("result" in options)) {
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      `${owner}: as "completed" needs the result repeats replay`,
    );
  }
  if (options.as === "failed" && messageOfFailure(options.error) === undefined) {
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      `${owner}: as "failed" needs the error repeats get back: a message, or { message, code?, data? }`,
    );
  }
  if (options.scope === trailScope) {
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      `${owner}: the scope ${trailScope} holds the trail of resolutions, which are not resolved`,
    );
  }
  const tool = options.tool;
  const ttlMs = durationOption(owner, "tool.ttlMs", tool?.ttlMs, undefined, { max: maxTtlMs });
  const minStaleMs = durationOption(owner, "minStaleMs", options.minStaleMs, defaultMinStaleMs, {
    min: 0,
    max: maxTtlMs,
  });
  return {
    ...options,
    clock: options.clock ?? systemClock,
    minStaleMs,
    via: options.via ?? "api",
    codec: resolveCodec(tool?.redact, tool?.encryption, invalidOptionFor(owner, "tool.")),
    ttlMs,
    maxResultBytes: sizeOption(owner, "tool.maxResultBytes", tool?.maxResultBytes, defaults.maxResultBytes),
  };
}

function text(name: string, value: unknown, max: number): void {
  if (typeof value !== "string" || value.trim().length === 0 || value.length > max) {
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      `${owner}: ${name} must be a non-empty string of at most ${max} characters`,
    );
  }
}

function messageOfFailure(error: ResolveOptions["error"]): string | undefined {
  if (typeof error === "string") return error.length > 0 ? error : undefined;
  if (
    typeof error === "object" &&
    error !== null &&
    typeof error.message === "string" &&
    error.message !== ""
  ) {
    return error.message;
  }
  return undefined;
}

/**
 * A passed lease says its worker stopped renewing, not that it stopped: one cut off from the store or
 * paused may still be about to make the effect. Until the lease has been passed for `minStaleMs`, a
 * record in progress may be resolved as completed (the effect is there to see), but not freed (the worker
 * could make the effect after the next call made it again) nor recorded as failed.
 */
function refuseRecentlyStale(o: Checked, record: IdempotencyRecord, now: number): void {
  if (o.as === "completed") return;
  const safeAt = record.leaseExpiresAt + o.minStaleMs;
  if (now < safeAt) {
    throw new RecordNotResolvableError(
      record.scope,
      record.key,
      `its worker stopped renewing its lease at ${iso(record.leaseExpiresAt)}, but may still be running (cut off ` +
        `from the store, or paused) and make the effect; it can be ${o.as === "failed" ? "recorded as failed" : "freed"} ` +
        `from ${iso(safeAt)}, or sooner once you know the worker is gone (minStaleMs)`,
    );
  }
}

/** Settled records are not an operator's to resolve. */
function refuseSettled(record: IdempotencyRecord): void {
  if (record.status === RecordStatus.completed || record.status === RecordStatus.failed) {
    throw new RecordNotResolvableError(
      record.scope,
      record.key,
      `its outcome is recorded already (${record.status})`,
    );
  }
}

/** A record in progress whose lease is live by the store's clock is its owner's, who may be running the tool. */
function refuseLiveLease(record: IdempotencyRecord, now: number): void {
  if (record.leaseExpiresAt > now) {
    throw new RecordNotResolvableError(
      record.scope,
      record.key,
      `its owner holds a live lease until ${iso(record.leaseExpiresAt)} and may be running the tool now; ` +
        "wait for it to settle or for the lease to pass",
    );
  }
}

function describe(record: IdempotencyRecord): string {
  return `${record.status}, attempt ${record.attempts}, last changed ${iso(record.updatedAt)}`;
}

type Outcome = (
  resolution: OperatorResolution,
) =>
  | { readonly status: "completed" | "failed"; readonly result: string | null; readonly error: string }
  | { readonly status: "released" };

/** The stored form of the outcome, made before anything is written: a result that cannot be kept is refused. */
function encodeOutcome(o: Checked, binding: RecordBinding): Outcome {
  if (o.as === "not_executed") return () => ({ status: "released" });
  if (o.as === "failed") {
    const error = o.error!;
    const failure =
      typeof error === "string"
        ? { name: "Error", message: error }
        : {
            name: "Error",
            message: error.message,
            ...(error.code !== undefined ? { code: error.code } : {}),
            ...(error.data !== undefined ? { data: error.data } : {}),
          };
    return (resolution) => ({
      status: "failed",
      result: null,
      error: sealFailureText("failed", JSON.stringify({ ...failure, resolution }), o.codec, binding),
    });
  }
  const encoded = encodeResult(o.result, o.maxResultBytes, o.codec, binding, o.store.maxStoredResultBytes);
  if (!encoded.ok) {
    const problem = encoded.problem;
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      `${owner}: the result cannot be kept, so repeats could not replay it: ` +
        (problem.code === ErrorCode.resultTooLarge
          ? `${problem.sizeBytes} bytes, over the ${problem.maxBytes}-byte limit`
          : problem.reason),
    );
  }
  return (resolution) => ({
    status: "completed",
    result: encoded.text,
    error: encodeCompletedNote({ resolution }, o.codec, binding),
  });
}

/** Settle or release the record under the token that took it over, retrying a store that blips. */
async function act(
  o: Checked,
  taken: IdempotencyRecord,
  token: string,
  ttlMs: number,
  outcome: ReturnType<Outcome>,
): Promise<void> {
  const { scope, key } = taken;
  let lastError: unknown;
  for (let attempt = 0; attempt < settleAttempts; attempt++) {
    try {
      if (outcome.status === "released") {
        if (await o.store.release({ scope, key, token })) return;
        // Refused: an earlier try of ours applied with its reply lost (this resolver held the record, so
        // nobody else could release it): gone, or claimed by a new call since. Still ours: try again.
        const current = await o.store.get({ scope, key }, o.clock.now());
        if (current === undefined || current.token !== token) return;
        continue;
      }
      const settled = await settleOwn(o.store, { scope, key, token, ttlMs, now: o.clock.now(), ...outcome });
      if (settled) return;
      break;
    } catch (error) {
      lastError = error;
    }
  }
  if (lastError !== undefined) {
    throw new StoreUnavailableError("resolve", {
      cause: lastError,
      consequence:
        "The record is held by the resolution until its lease passes (a minute), then needs review again; the trail keeps the attempt as interrupted.",
    });
  }
  throw new RecordChangedError(scope, key, "another worker took it over while it was being resolved");
}

/** A trail entry this resolution holds: the claim on its key, until it is written. */
interface TrailHold {
  readonly key: string;
  readonly token: string;
  readonly claim: ClaimRequest;
}

/** Claim a new entry's key in the trail: an in-progress record, which no reader takes for an entry. */
async function claimTrail(
  store: IdempotencyStore,
  scope: string,
  key: string,
  at: number,
): Promise<TrailHold> {
  const entryKey = trailEntryKey(scope, key, at);
  const token = ownerToken();
  const claim: ClaimRequest = {
    scope: trailScope,
    key: entryKey,
    tool: trailTool,
    fingerprint: entryKey,
    token,
    leaseMs: resolverLeaseMs,
    ttlMs: trailTtlMs,
    now: at,
  };
  const claimed = await storeCall("trail claim", () => store.claim(claim));
  if (!claimed.claimed)
    throw new StoreUnavailableError("trail claim", { consequence: "Nothing was resolved." });
  return { key: entryKey, token, claim };
}

/**
 * The time by the clock the store judges leases by. A claim that lands may answer with the request's time
 * (a plain Redis SET carries no clock), but one that finds a record in progress answers with the clock it
 * judged that record's lease by: so the trail's claim, sent again, finds itself and tells.
 */
async function storeClock(store: IdempotencyStore, hold: TrailHold): Promise<number> {
  const again = await storeCall("trail claim", () => store.claim(hold.claim));
  if (again.claimed || again.record.token !== hold.token) {
    throw new StoreUnavailableError("trail claim", {
      consequence: "The store's clock could not be read from the trail's claim; nothing was resolved.",
    });
  }
  return again.now;
}

/** Write the entry as an intent (an unknown trail record) before acting. */
async function writeIntent(store: IdempotencyStore, hold: TrailHold, text: string): Promise<void> {
  const intent = {
    scope: trailScope,
    key: hold.key,
    token: hold.token,
    ttlMs: trailTtlMs,
    now: hold.claim.now,
  };
  const written = await storeCall("trail write", () =>
    settleOwn(store, { ...intent, status: "unknown", result: null, error: text }),
  );
  if (!written) throw new StoreUnavailableError("trail write", { consequence: "Nothing was resolved." });
}

async function settleTrail(
  store: IdempotencyStore,
  hold: TrailHold,
  text: string,
  now: number,
): Promise<void> {
  const request = {
    scope: trailScope,
    key: hold.key,
    token: hold.token,
    status: "completed" as const,
    result: text,
    error: null,
    ttlMs: trailTtlMs,
    now,
  };
  await storeCall("trail settle", () => settleOwn(store, request), {
    consequence: "The resolution was applied, but its trail entry still reads as interrupted.",
  });
}

async function storeCall<T>(
  operation: string,
  run: () => Promise<T>,
  extra?: { readonly consequence: string },
): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof IdempotencyError) throw error;
    throw new StoreUnavailableError(operation, {
      cause: error,
      consequence: extra?.consequence ?? "Nothing was resolved.",
    });
  }
}
