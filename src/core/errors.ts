import type { IdempotencyRecord } from "./store.js";

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

/**
 * Whether `value` is an idempotool error, optionally of one code.
 *
 * Narrowing by code gives the code and, as optional fields, the data the core's error of that code
 * carries: other errors may share a code (an HTTP client's 422 is a conflict too) without carrying it.
 * Use `instanceof KeyConflictError` (and its siblings) when you need the fields for certain.
 * @example
 * try { await sendEmail(args, { key }) } catch (error) {
 *   if (isIdempotencyError(error, "idempotency_key_conflict")) console.error(error.originalFingerprint ?? "");
 * }
 */
export function isIdempotencyError<C extends ErrorCode>(
  value: unknown,
  code?: C,
): value is IdempotencyError & { readonly code: C } & Partial<DataOfCode<C>> {
  return value instanceof IdempotencyError && (code === undefined || value.code === code);
}

type DataOfCode<C extends ErrorCode> = Omit<
  C extends "idempotency_key_conflict"
    ? KeyConflictError
    : C extends "outcome_unknown"
      ? OutcomeUnknownError
      : C extends "idempotency_key_in_use"
        ? KeyInUseError
        : C extends "result_too_large"
          ? ResultTooLargeError
          : IdempotencyError,
  keyof IdempotencyError
>;

/**
 * The same key arrived with different arguments: a caller bug, never absorbed and never run (Case 3 in
 * docs/operation-models.md).
 */
export class KeyConflictError extends IdempotencyError {
  override name = "KeyConflictError";
  readonly key: string;
  readonly scope: string;
  /** The tool that first used the key. */
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
  constructor(record: IdempotencyRecord, fingerprint: string, tool: string = record.tool) {
    const at = Number.isNaN(record.createdAt) ? "" : iso(record.createdAt);
    const when = at === "" ? "" : ` at ${at}`;
    super(
      "idempotency_key_conflict",
      tool === record.tool
        ? `Idempotency key "${record.key}" was already used${when} for ${record.tool} with different arguments. ` +
            "A key names one operation: do not reuse it for new arguments; use a new key for a new intent."
        : `Idempotency key "${record.key}" was already used${when} by the tool ${record.tool}; this call is ` +
            `${tool}. A key names one action of one tool: ${tool} did not run. Use a new key for this new action.`,
    );
    this.key = record.key;
    this.scope = record.scope;
    this.originalTool = record.tool;
    this.tool = tool;
    this.originalFingerprint = record.fingerprint;
    this.fingerprint = fingerprint;
    this.originalCalledAt = at;
  }
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
  constructor(operation: string, options?: { cause?: unknown }) {
    const detail = options?.cause instanceof Error ? `: ${options.cause.message}` : "";
    super(
      "store_unavailable",
      `The idempotency store failed during ${operation}${detail}. The tool did not run.`,
      options,
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
      `The result is ${sizeBytes} bytes, over the ${maxBytes}-byte limit (maxResultBytes), so it was not stored.` +
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
  constructor(key: string, options?: { cause?: unknown }) {
    super(
      "lease_lost",
      `The claim on key "${key}" was lost while the call ran (its lease passed and another caller took over), ` +
        "so this call's outcome was not recorded. Check whether the effect happened.",
      options,
    );
    this.key = key;
  }
}

const pad2 = (n: number) => (n < 10 ? `0${n}` : `${n}`);
const pad3 = (n: number) => (n < 10 ? `00${n}` : n < 100 ? `0${n}` : `${n}`);

// An envelope formats two times per call (when the key was first claimed, until when it holds), and calls
// come in bursts: their seconds repeat. The text up to the second is kept for the last few seconds seen.
const secondsKept = 4;
const keptSeconds: number[] = new Array<number>(secondsKept).fill(-1);
const keptPrefixes: string[] = new Array<string>(secondsKept).fill("");
let nextKept = 0;

/**
 * Date#toISOString for epoch ms, without a Date for the years 1970–9999 (other values go to Date).
 * @example
 * iso(0); // "1970-01-01T00:00:00.000Z"
 */
export function iso(epochMs: number): string {
  if (!(epochMs >= 0 && epochMs < 253_402_300_800_000) || !Number.isInteger(epochMs)) {
    return new Date(epochMs).toISOString();
  }
  const second = Math.floor(epochMs / 1000);
  const millis = pad3(epochMs - second * 1000);
  for (let i = 0; i < secondsKept; i++) {
    if (keptSeconds[i] === second) return `${keptPrefixes[i]}${millis}Z`;
  }
  const prefix = secondPrefix(second);
  keptSeconds[nextKept] = second;
  keptPrefixes[nextKept] = prefix;
  nextKept = (nextKept + 1) % secondsKept;
  return `${prefix}${millis}Z`;
}

/**
 * "YYYY-MM-DDTHH:MM:SS." for a second since the epoch: the civil date from the day count (the inverse of
 * H. Hinnant's days_from_civil).
 */
function secondPrefix(epochSecond: number): string {
  const days = Math.floor(epochSecond / 86_400);
  let rest = epochSecond - days * 86_400;
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const dayOfEra = z - era * 146_097;
  const yearOfEra = Math.floor(
    (dayOfEra -
      Math.floor(dayOfEra / 1460) +
      Math.floor(dayOfEra / 36_524) -
      Math.floor(dayOfEra / 146_096)) /
      365,
  );
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const mp = Math.floor((5 * dayOfYear + 2) / 153);
  const day = dayOfYear - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0);
  const hours = Math.floor(rest / 3_600);
  rest -= hours * 3_600;
  const minutes = Math.floor(rest / 60);
  const seconds = rest - minutes * 60;
  return `${year}-${pad2(month)}-${pad2(day)}T${pad2(hours)}:${pad2(minutes)}:${pad2(seconds)}.`;
}
