import type { IdempotencyRecord } from "./store.js";
import { iso } from "./time.js";

/** Every error code the library raises, with the HTTP status an API would answer with. */
export const ErrorCode = {
  keyMissing: "idempotency_key_missing",
  keyInvalid: "idempotency_key_invalid",
  keyConflict: "idempotency_key_conflict",
  keyInUse: "idempotency_key_in_use",
  outcomeUnknown: "outcome_unknown",
  storeUnavailable: "store_unavailable",
  storeFull: "store_full",
  invalidArguments: "invalid_arguments",
  invalidOptions: "invalid_options",
  resultTooLarge: "result_too_large",
  resultUnserializable: "result_unserializable",
  resultUndecryptable: "result_undecryptable",
  leaseLost: "lease_lost",
  recordChanged: "record_changed",
  recordNotResolvable: "record_not_resolvable",
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

const httpStatusOf: Record<ErrorCode, number> = {
  idempotency_key_missing: 400,
  idempotency_key_invalid: 400,
  idempotency_key_conflict: 422,
  idempotency_key_in_use: 409,
  outcome_unknown: 409,
  store_unavailable: 503,
  store_full: 503,
  invalid_arguments: 400,
  invalid_options: 500,
  result_too_large: 413,
  result_unserializable: 500,
  result_undecryptable: 500,
  lease_lost: 409,
  record_changed: 409,
  record_not_resolvable: 409,
};

/** The base of every error idempotool raises: a stable `code` to branch on and the HTTP status to answer with. */
export class IdempotencyError extends Error {
  override name = "IdempotencyError";
  readonly code: ErrorCode;
  readonly httpStatus: number;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.httpStatus = httpStatusOf[code];
  }
}

/** What a {@link KeyConflictError} says about the two calls that share a key. */
export interface KeyConflict {
  readonly key: string;
  readonly scope: string;
  readonly originalTool: string;
  readonly tool: string;
  readonly originalFingerprint: string;
  readonly fingerprint: string;
  /** ISO-8601, or "" when unknown. */
  readonly originalCalledAt: string;
}

/**
 * The same key arrived with different arguments: a caller bug, never absorbed and never run (Case 3 in
 * docs/operation-models.md).
 */
export class KeyConflictError extends IdempotencyError {
  override name = "KeyConflictError";
  readonly key: string;
  readonly scope: string;
  /** The tool that first used the key; empty when the record cannot say (a dedup row older than its `tool` column). */
  readonly originalTool: string;
  /** The tool of the rejected call. */
  readonly tool: string;
  /** The fingerprint the key was first used with. */
  readonly originalFingerprint: string;
  /** The fingerprint of the rejected call. */
  readonly fingerprint: string;
  /** When the original call was made (ISO-8601); empty when not known (a row found by `insertOnce`). */
  readonly originalCalledAt: string;

  /**
   * @param record the record that holds the key; a `createdAt` of NaN says the time is not known.
   * @param fingerprint the rejected call's fingerprint.
   * @param tool the rejected call's tool; defaults to the record's (a conflict of arguments only).
   */
  constructor(record: IdempotencyRecord, fingerprint: string, tool?: string);
  /** The same caller bug caught elsewhere (an approval given for other arguments), with its own message. */
  constructor(conflict: KeyConflict, message: string);
  constructor(from: IdempotencyRecord | KeyConflict, text: string, tool?: string) {
    const conflict = "originalTool" in from ? from : conflictOf(from, text, tool ?? from.tool);
    super("idempotency_key_conflict", "originalTool" in from ? text : conflictMessage(conflict));
    this.key = conflict.key;
    this.scope = conflict.scope;
    this.originalTool = conflict.originalTool;
    this.tool = conflict.tool;
    this.originalFingerprint = conflict.originalFingerprint;
    this.fingerprint = conflict.fingerprint;
    this.originalCalledAt = conflict.originalCalledAt;
  }
}

function conflictOf(record: IdempotencyRecord, fingerprint: string, tool: string): KeyConflict {
  return {
    key: record.key,
    scope: record.scope,
    originalTool: record.tool,
    tool,
    originalFingerprint: record.fingerprint,
    fingerprint,
    // Unknown when the record cannot say (a row of an insert-once table).
    originalCalledAt: Number.isNaN(record.createdAt) ? "" : iso(record.createdAt),
  };
}

function conflictMessage(c: KeyConflict): string {
  const when = c.originalCalledAt === "" ? "" : ` at ${c.originalCalledAt}`;
  return c.tool === c.originalTool
    ? `Idempotency key "${c.key}" was already used${when} for ${c.tool} with different arguments. ` +
        "A key names one operation: do not reuse it for new arguments; use a new key for a new intent."
    : `Idempotency key "${c.key}" was already used${when} by the tool ${c.originalTool}; this call is ` +
        `${c.tool}. A key names one action of one tool: ${c.tool} did not run. Use a new key for this new action.`;
}

/** What the approval named, and what the run has instead. */
export interface ApprovalMismatch {
  readonly tool: string;
  readonly scope: string;
  /** The key of the call that was about to run. */
  readonly key: string;
  readonly approvedKey: string;
  /** Fingerprint of the approved arguments. */
  readonly approvedFingerprint: string;
  /** Fingerprint of the arguments that were about to run. */
  readonly fingerprint: string;
  /** When the approved request was made (ISO-8601), or "" when the decision did not carry it. */
  readonly requestedAt: string;
}

/**
 * A human approved one call, and the run now holds another: different arguments (the model rewrote the
 * draft when the node re-ran, or a saved run state was edited), or an approval given for another key.
 * Nothing was executed.
 *
 * It is a `KeyConflictError` (code `idempotency_key_conflict`, 422), as for the same key arriving with
 * different arguments: it is that same caller bug, caught at the approval instead of at the store. Its
 * fields are a conflict's (`key`, `scope`, `originalFingerprint`, `fingerprint`, `originalCalledAt`, with
 * the approved fingerprint as the original), so code that handles conflicts handles it too.
 *
 * @example
 * import { ApprovalMismatchError } from "idempotool";
 *
 * try {
 *   // await graph.invoke(new Command({ resume: approve(request) }), config);
 * } catch (error) {
 *   if (error instanceof ApprovalMismatchError) console.error(`ask again for ${error.tool}: ${error.message}`);
 * }
 */
export class ApprovalMismatchError extends KeyConflictError {
  override name = "ApprovalMismatchError";
  readonly approvedKey: string;

  constructor(mismatch: ApprovalMismatch) {
    const what =
      mismatch.approvedKey === mismatch.key
        ? `its arguments (fingerprint ${shortFingerprint(mismatch.fingerprint)}) differ from the ones a human approved ` +
          `(fingerprint ${shortFingerprint(mismatch.approvedFingerprint)})`
        : `the approval was given for key "${mismatch.approvedKey}", not for this call's key`;
    super(
      {
        key: mismatch.key,
        scope: mismatch.scope,
        originalTool: mismatch.tool,
        tool: mismatch.tool,
        originalFingerprint: mismatch.approvedFingerprint,
        fingerprint: mismatch.fingerprint,
        originalCalledAt: mismatch.requestedAt,
      },
      `${mismatch.tool} with key "${mismatch.key}" was not executed: ${what}. An approval covers exactly the ` +
        "arguments it was shown. Ask for approval of the new arguments under a new key, or run the approved ones.",
    );
    this.approvedKey = mismatch.approvedKey;
  }
}

function shortFingerprint(fingerprint: string): string {
  return `${fingerprint.slice(0, 12)}…`;
}

/** The first call with this key is still running and did not finish within the wait. */
export class KeyInUseError extends IdempotencyError {
  override name = "KeyInUseError";
  readonly key: string;
  /** How long this caller waited before giving up (ms). */
  readonly waitedMs: number;
  /**
   * When a retry is worth trying (ms from now): when the running call's lease passes, unless it renews
   * it. A retry before then learns more only if the call finishes first. See {@link retryAfterMsOf}.
   */
  readonly retryAfterMs: number;

  constructor(record: IdempotencyRecord, waitedMs: number, retryAfterMs: number) {
    super(
      "idempotency_key_in_use",
      `Idempotency key "${record.key}" is in use by a call to ${record.tool} started at ${iso(record.createdAt)} ` +
        `that has not finished (waited ${waitedMs} ms). Retry later with the same key and the same arguments.`,
    );
    this.key = record.key;
    this.waitedMs = waitedMs;
    this.retryAfterMs = retryAfterMs;
  }
}

/**
 * How long a repeat that found `record` in flight should wait before trying again (ms): until the
 * holder's lease passes, judged by the clock the store judged by (`now`). By then the holder has
 * settled, renewed (it is still working) or stopped (a retry then learns the outcome is unknown, or takes
 * over). At least 100 ms, so a retry does not come back before anything could change, and never more
 * than the lease the holder last took, so a writer's clock ahead of ours cannot stretch it.
 */
export function retryAfterMsOf(record: IdempotencyRecord, now: number): number {
  const leaseMs = record.leaseExpiresAt - record.updatedAt;
  return Math.max(100, Math.min(record.leaseExpiresAt - now, leaseMs));
}

/** Nobody knows whether the effect happened; the tool will not run again until it is resolved. */
export class OutcomeUnknownError extends IdempotencyError {
  override name = "OutcomeUnknownError";
  /** The record as the store holds it. */
  readonly record: IdempotencyRecord;

  constructor(record: IdempotencyRecord, reason: string, options?: { cause?: unknown }) {
    super(
      "outcome_unknown",
      `The outcome of ${record.tool} with key "${record.key}" (called at ${iso(record.createdAt)}) is unknown: ${reason}. ` +
        "It will not run again until a verify hook or an operator resolves it; check whether the effect happened before trying again.",
      options,
    );
    this.record = record;
  }
}

/** The store could not be reached or failed: the tool did not run (fail closed). */
export class StoreUnavailableError extends IdempotencyError {
  override name = "StoreUnavailableError";
  /**
   * `consequence` says what the failure meant for the call, in words for the caller and the model;
   * by default "The tool did not run.", true of every failure thrown before the tool runs.
   */
  constructor(operation: string, options?: { cause?: unknown; consequence?: string | undefined }) {
    const detail = options?.cause instanceof Error ? `: ${options.cause.message}` : "";
    super(
      "store_unavailable",
      `The idempotency store failed during ${operation}${detail}. ${options?.consequence ?? "The tool did not run."}`,
      options && "cause" in options ? { cause: options.cause } : undefined,
    );
  }
}

/** A bounded store is full of live records; it refuses new claims rather than forget one. */
export class StoreFullError extends IdempotencyError {
  override name = "StoreFullError";
  readonly maxRecords: number;
  constructor(maxRecords: number) {
    super(
      "store_full",
      `The idempotency store holds its maximum of ${maxRecords} live records and none has expired. ` +
        "The tool did not run: evicting a live record would let a repeat run again. Raise maxRecords or use a durable store.",
    );
    this.maxRecords = maxRecords;
  }
}

/** The completed call's result exceeded the size limit and was not kept; the effect still happened. */
export class ResultTooLargeError extends IdempotencyError {
  override name = "ResultTooLargeError";
  readonly record: IdempotencyRecord | undefined;
  readonly sizeBytes: number;
  readonly maxBytes: number;
  constructor(sizeBytes: number, maxBytes: number, record?: IdempotencyRecord) {
    super(
      "result_too_large",
      `The result is ${sizeBytes} bytes, over the ${maxBytes}-byte limit (maxResultBytes, or the store's maxStoredResultBytes where lower), so it was not stored.` +
        (record ? ` The call already completed at ${iso(record.updatedAt)}: do not run it again.` : ""),
    );
    this.record = record;
    this.sizeBytes = sizeBytes;
    this.maxBytes = maxBytes;
  }
}

/** The completed call's result could not be serialized and was not kept; the effect still happened. */
export class ResultUnserializableError extends IdempotencyError {
  override name = "ResultUnserializableError";
  readonly record: IdempotencyRecord;
  constructor(record: IdempotencyRecord, reason: string) {
    super(
      "result_unserializable",
      `The call already completed at ${iso(record.updatedAt)}, but its result could not be stored (${reason}). Do not run it again.`,
    );
    this.record = record;
  }
}

/** This worker's claim was taken over while its call ran: its outcome was not recorded. */
export class LeaseLostError extends IdempotencyError {
  override name = "LeaseLostError";
  readonly key: string;
  /**
   * `unrenewed`: the store could not be reached to renew the lease until it passed, by this worker's clock,
   * so another caller may take the key over from now on (the reason a tool's `signal` aborts with then).
   */
  constructor(key: string, options?: { cause?: unknown; unrenewed?: boolean }) {
    super(
      "lease_lost",
      options?.unrenewed === true
        ? `The lease on key "${key}" passed while the store could not be reached to renew it, so another ` +
            "caller may take the key over and run the tool: stop before making the effect if you can."
        : `The claim on key "${key}" was lost while the call ran (its lease passed and another caller took over), ` +
            "so this call's outcome was not recorded. Check whether the effect happened.",
      options && "cause" in options ? { cause: options.cause } : undefined,
    );
    this.key = key;
  }
}

/**
 * An operator's resolution was refused because the record is no longer what the operator saw: it was
 * settled, taken over, renewed, removed or expired since. Nothing was changed; look at it again.
 */
export class RecordChangedError extends IdempotencyError {
  override name = "RecordChangedError";
  readonly scope: string;
  readonly key: string;
  constructor(scope: string, key: string, what: string) {
    super(
      "record_changed",
      `The record for key "${key}" in scope "${scope}" changed since it was read (${what}), so the resolution ` +
        "was not applied and nothing changed. Look at the record again before resolving it.",
    );
    this.scope = scope;
    this.key = key;
  }
}

/**
 * An operator's resolution was refused because the record does not need one: its outcome is recorded
 * (completed or failed), or its owner still holds a live lease and may be running the tool now.
 */
export class RecordNotResolvableError extends IdempotencyError {
  override name = "RecordNotResolvableError";
  readonly scope: string;
  readonly key: string;
  constructor(scope: string, key: string, why: string) {
    super(
      "record_not_resolvable",
      `The record for key "${key}" in scope "${scope}" cannot be resolved: ${why}. Nothing changed.`,
    );
    this.scope = scope;
    this.key = key;
  }
}

/** Why a stored value could not be opened. */
export type UndecryptableReason =
  | "no_encryption_configured"
  | "unknown_key_id"
  | "authentication_failed"
  | "malformed"
  | "not_sealed"
  | "unbound_v1";

/**
 * A stored result or failure cannot be trusted with the keys given: a missing or wrong key, a value
 * altered at rest or moved from another record or status, or (with `encryption` configured) a value
 * that is not sealed at all, a result or failure that is missing, or a `v1` value once
 * `acceptUnboundV1` is false. Never garbage: the caller gets this instead. A record fingerprinted under
 * a key that is not configured gets it too (`unknown_key_id`, `no_encryption_configured`): its
 * arguments cannot be compared, so it is neither replayed nor taken for a conflict.
 * Its code is `result_undecryptable` (500); `reason` says which of those it was.
 */
export class ResultUndecryptableError extends IdempotencyError {
  override name = "ResultUndecryptableError";
  readonly reason: UndecryptableReason;
  /** The key id the record names, when it could be read. */
  readonly keyId: string | undefined;
  constructor(reason: UndecryptableReason, keyId: string | undefined, options?: { cause?: unknown }) {
    super(
      "result_undecryptable",
      `A stored idempotency record could not be decrypted: ${explain(reason, keyId)}.`,
      options,
    );
    this.reason = reason;
    this.keyId = keyId;
  }
}

function explain(reason: UndecryptableReason, keyId: string | undefined): string {
  switch (reason) {
    case "no_encryption_configured":
      return `it is sealed or fingerprinted with key "${keyId ?? "?"}" but no \`encryption\` (or \`fingerprintKeys\`) option is configured`;
    case "unknown_key_id":
      return `it is sealed or fingerprinted with key "${keyId ?? "?"}", which is not among the configured keys (keep old keys until their records expire)`;
    case "authentication_failed":
      return `key "${keyId ?? "?"}" does not open it: the key is wrong, or the value was altered at rest or moved from another record`;
    case "malformed":
      return "its envelope is malformed (the record was altered at rest)";
    case "not_sealed":
      return (
        "it is stored in plaintext while `encryption` is configured (the record was written before encryption " +
        "was turned on, or altered at rest); set `encryption.acceptPlaintext` only while migrating such a store"
      );
    case "unbound_v1":
      return (
        `it is sealed with key "${keyId ?? "?"}" in the v1 envelope of an earlier build, which does not ` +
        "name its record (it may have been copied from another one), and `encryption.acceptUnboundV1` is false"
      );
  }
}

/**
 * The error each code is raised with when the code carries data: the class that always carries it.
 * Codes not listed carry no data beyond the code.
 */
interface ErrorOfCode {
  idempotency_key_conflict: KeyConflictError;
  idempotency_key_in_use: KeyInUseError;
  outcome_unknown: OutcomeUnknownError;
  store_full: StoreFullError;
  result_too_large: ResultTooLargeError;
  result_unserializable: ResultUnserializableError;
  result_undecryptable: ResultUndecryptableError;
  lease_lost: LeaseLostError;
}

/** What {@link isIdempotencyError} narrows to for a code: its class where the code carries data. */
export type IdempotencyErrorOf<C extends ErrorCode> = (C extends keyof ErrorOfCode
  ? ErrorOfCode[C]
  : IdempotencyError) & { readonly code: C };

const classOfCode: { readonly [C in keyof ErrorOfCode]: abstract new (...args: never[]) => ErrorOfCode[C] } =
  {
    idempotency_key_conflict: KeyConflictError,
    idempotency_key_in_use: KeyInUseError,
    outcome_unknown: OutcomeUnknownError,
    store_full: StoreFullError,
    result_too_large: ResultTooLargeError,
    result_unserializable: ResultUnserializableError,
    result_undecryptable: ResultUndecryptableError,
    lease_lost: LeaseLostError,
  };

/**
 * Whether `value` is an idempotool error, optionally of one code, narrowed to the error's class.
 *
 * With a code that carries data (`outcome_unknown` its `record`, `lease_lost` its `key`, a conflict its
 * fingerprints, …), the guard answers true only for an error of the class that always carries it, so
 * the fields it narrows to are there: `OutcomeUnknownError`, `LeaseLostError`, `KeyConflictError`, and
 * so on (see docs/concepts.md). An error that shares the code without the data, such as the HTTP
 * client's `IdempotentFetchError` for a server's 422, does not match: branch on it with
 * `isIdempotentFetchError(error, code)`, or on `error.code` after `isIdempotencyError(error)`.
 * @example
 * try { await sendEmail(args, { key }) } catch (error) {
 *   if (isIdempotencyError(error, "outcome_unknown")) console.error(`check ${error.record.tool} by hand`);
 *   if (isIdempotencyError(error, "lease_lost")) console.error(`the claim on ${error.key} was taken over`);
 * }
 */
export function isIdempotencyError(value: unknown): value is IdempotencyError;
export function isIdempotencyError<C extends ErrorCode>(
  value: unknown,
  code: C,
): value is IdempotencyErrorOf<C>;
export function isIdempotencyError(value: unknown, code?: ErrorCode): boolean {
  if (!(value instanceof IdempotencyError)) return false;
  if (code === undefined) return true;
  const errorClass = (classOfCode as Partial<Record<ErrorCode, abstract new (...args: never[]) => unknown>>)[
    code
  ];
  return value.code === code && (errorClass === undefined || value instanceof errorClass);
}
