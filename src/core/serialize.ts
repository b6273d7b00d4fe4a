/**
 * How results and failures become the strings a store keeps, and back.
 * Results are kept as their JSON form: a replay hands back what JSON.parse makes of it.
 * With a {@link ResultCodec}, named result fields are redacted, and with encryption what is stored is
 * sealed for the record it belongs to (its {@link RecordBinding}): every caller that may configure
 * encryption passes it, and only then (no binding is built on the plain path). With encryption, every
 * result, failure and note a settled record keeps is sealed, `undefined` included, so an emptied field
 * is refused rather than replayed as `undefined` or as a generic failure.
 */
import { Buffer } from "node:buffer";
import type { Call } from "./call.js";
import { ErrorCode } from "./errors.js";
import { messageOf, type OperatorResolution, operatorResolutionOf, type StoredFailure } from "./outcomes.js";
import {
  open,
  type RecordBinding,
  type ResultCodec,
  ResultUndecryptableError,
  redactPaths,
  seal,
} from "./result-codec.js";
import type { IdempotencyRecord } from "./store.js";

/**
 * What a value sealed or opened by this call is bound to: the call's own scope, key and tool (never what
 * the store says they are), and the fingerprint of the record the call holds or replays, which the call
 * has matched against its arguments (it may be one made under an older fingerprint key). Built only when
 * encryption is configured: the plain path allocates nothing for it.
 */
export function bindingFor<A, R>(call: Call<A, R>, record: IdempotencyRecord): RecordBinding | undefined {
  if (call.options.codec?.encryption === undefined) return undefined;
  return { scope: call.scope, key: call.key, tool: call.options.name, fingerprint: record.fingerprint };
}

/** The status a failure is recorded under: it is sealed with the failure, so it cannot be changed at rest. */
export type FailureStatus = "failed" | "unknown";

/**
 * What a sealed `undefined` result holds: it has no JSON form, and the empty string is no JSON text, so it
 * never stands for a result that has one.
 */
const noJsonForm = "";

/** A result ready for the store, or the reason it could not be kept (the call still completed). */
export type EncodedResult =
  | { readonly ok: true; readonly text: string | null }
  | { readonly ok: false; readonly error: string; readonly problem: ResultProblem };

/**
 * Why a value was not stored: over the size limit (its size and the limit, in UTF-8 bytes as stored), or
 * with no JSON form. A completed record keeps it instead of its result; a replayed failure carries it as
 * `data_not_kept` when its data was dropped.
 */
export type ResultProblem =
  | { readonly code: typeof ErrorCode.resultTooLarge; readonly sizeBytes: number; readonly maxBytes: number }
  | { readonly code: typeof ErrorCode.resultUnserializable; readonly reason: string };

/**
 * The string a store keeps for a result. The size limit applies to the JSON form after redaction and
 * before encryption. The caller's value is never changed: redaction works on a parsed copy.
 */
export function encodeResult(
  result: unknown,
  maxBytes: number,
  codec?: ResultCodec,
  record?: RecordBinding,
  storeMaxBytes?: number,
): EncodedResult {
  const encryption = codec?.encryption;
  let text: string | undefined;
  try {
    text = JSON.stringify(result, refuseLossy);
    if (text !== undefined && codec !== undefined && codec.redact.length > 0) {
      text = JSON.stringify(redactPaths(JSON.parse(text), codec.redact));
    }
  } catch (error) {
    const reason = messageOf(error);
    return notKept({ code: ErrorCode.resultUnserializable, reason }, codec, record);
  }
  // undefined (and functions) have no JSON form: the replay hands back undefined.
  if (text === undefined) {
    return { ok: true, text: encryption ? seal(noJsonForm, encryption, "result", record) : null };
  }
  // Bytes are counted only when the characters could be over the limit: counting costs a large result's
  // encoding a tenth more.
  if (text.length * 3 > maxBytes) {
    const sizeBytes = Buffer.byteLength(text, "utf8");
    if (sizeBytes > maxBytes) {
      return notKept({ code: ErrorCode.resultTooLarge, sizeBytes, maxBytes }, codec, record);
    }
  }
  const stored = encryption ? seal(text, encryption, "result", record) : text;
  // The store's own limit is on what it keeps: the sealed text, when sealed.
  if (storeMaxBytes !== undefined && stored.length * 3 > storeMaxBytes) {
    const sizeBytes = Buffer.byteLength(stored, "utf8");
    if (sizeBytes > storeMaxBytes) {
      return notKept({ code: ErrorCode.resultTooLarge, sizeBytes, maxBytes: storeMaxBytes }, codec, record);
    }
  }
  return { ok: true, text: stored };
}

/** The note a completed record keeps instead of its result: sealed too, so it cannot be forged at rest. */
function notKept(problem: ResultProblem, codec?: ResultCodec, record?: RecordBinding): EncodedResult {
  const text = JSON.stringify(problem);
  const error = codec?.encryption ? seal(text, codec.encryption, "result-problem", record) : text;
  return { ok: false, error, problem };
}

/**
 * "Map" or "Set" when `value` is one, from this realm or another (a `node:vm` context, an iframe, a
 * code-running tool), where `instanceof` does not see it. A plain object or an array is neither, without
 * the tag check; anything else that says it is a Map or Set is taken at its word: refusing it fails closed.
 */
function mapOrSetOf(value: object): "Map" | "Set" | undefined {
  if (value instanceof Map) return "Map";
  if (value instanceof Set) return "Set";
  if (Array.isArray(value) || Object.getPrototypeOf(value) === Object.prototype) return undefined;
  const tag = Object.prototype.toString.call(value);
  return tag === "[object Map]" ? "Map" : tag === "[object Set]" ? "Set" : undefined;
}

/** JSON would turn these into `{}` and a replay would hand back something the tool never returned. */
function refuseLossy(this: unknown, _key: string, value: unknown): unknown {
  const kind = typeof value === "object" && value !== null ? mapOrSetOf(value) : undefined;
  if (kind !== undefined) throw new TypeError(`a ${kind} has no JSON form`);
  return value;
}

/**
 * The result a replay hands back. A sealed result is opened with the codec's keys for this record; a
 * missing or wrong key, a value altered at rest or moved from another record, or (with encryption) a
 * value that is not sealed or no value at all throws `ResultUndecryptableError`.
 */
export function decodeResult(text: string | null, codec?: ResultCodec, record?: RecordBinding): unknown {
  const encryption = codec?.encryption;
  if (text === null) {
    // Sealing keeps even undefined: with encryption, a completed record without a result was emptied at rest.
    if (encryption === undefined || encryption.acceptPlaintext) return undefined;
    throw new ResultUndecryptableError("not_sealed", undefined);
  }
  if (encryption === undefined) return JSON.parse(open(text, undefined, "result", record));
  const opened = open(text, encryption, "result", record);
  if (opened === noJsonForm) return undefined;
  try {
    return JSON.parse(opened);
  } catch (error) {
    // Only an accepted plaintext value gets here unparsed: it was altered at rest.
    throw new ResultUndecryptableError("malformed", undefined, { cause: error });
  }
}

/**
 * Why a completed record kept no result, if it says so. With encryption the note must open for this
 * record (or be plaintext under `acceptPlaintext`), else `ResultUndecryptableError`.
 */
export function decodeResultProblem(
  error: string | null,
  codec?: ResultCodec,
  record?: RecordBinding,
): ResultProblem | undefined {
  return decodeCompletedNote(error, codec, record).problem;
}

/**
 * What a completed record's note says: why its result was not kept, and whether an operator recorded the
 * outcome by hand. With encryption the note must open for this record (or be plaintext under
 * `acceptPlaintext`), else `ResultUndecryptableError`.
 */
export function decodeCompletedNote(
  error: string | null,
  codec?: ResultCodec,
  record?: RecordBinding,
): CompletedNote {
  if (error === null) return {};
  const parsed = safeParse(open(error, codec?.encryption, "result-problem", record)) as
    | (Partial<ResultProblem> & { resolution?: unknown })
    | undefined;
  if (parsed === undefined) return {};
  const { resolution: stated, ...rest } = parsed;
  const resolution = operatorResolutionOf(stated);
  const kept = rest.code === ErrorCode.resultTooLarge || rest.code === ErrorCode.resultUnserializable;
  return { ...(kept ? { problem: rest as ResultProblem } : {}), ...(resolution ? { resolution } : {}) };
}

/** What the note of a completed record holds. */
export interface CompletedNote {
  readonly problem?: ResultProblem;
  readonly resolution?: OperatorResolution;
}

/** The note a completed record keeps, as stored: sealed with encryption, so it cannot be forged at rest. */
export function encodeCompletedNote(
  note: CompletedNote,
  codec?: ResultCodec,
  record?: RecordBinding,
): string {
  const text = JSON.stringify({
    ...note.problem,
    ...(note.resolution ? { resolution: note.resolution } : {}),
  });
  return codec?.encryption ? seal(text, codec.encryption, "result-problem", record) : text;
}

/**
 * A failure's JSON as stored for a record of this `status`: sealed with encryption. For failures built
 * outside a call (an operator's resolution), whose JSON the caller composes.
 */
export function sealFailureText(
  status: FailureStatus,
  text: string,
  codec?: ResultCodec,
  record?: RecordBinding,
): string {
  return codec?.encryption ? seal(text, codec.encryption, `failure:${status}`, record) : text;
}

function isResultProblem(value: unknown): value is ResultProblem {
  const code = (value as Partial<ResultProblem> | null | undefined)?.code;
  return code === ErrorCode.resultTooLarge || code === ErrorCode.resultUnserializable;
}

/**
 * Keep what a caller can use of an error: its name, message, code and the declared data. Never its stack.
 * `status` is the status the record is settled with; with encryption it is sealed with the failure.
 *
 * What is stored (sealed, with encryption) is at most `maxBytes`, or the store's `storeMaxBytes` where
 * lower: a store refuses a larger settle (DynamoDB's item limit), and every repeat would then find the
 * key unsettled. Over the limit, the data is dropped and a note says why (`dataNotKept`, which older
 * readers skip); if the failure is still over, its message is cut short with a marker. Its name and
 * code are kept whole: they are what a caller tells failures apart by.
 */
export function encodeFailure(
  status: FailureStatus,
  error: unknown,
  data: unknown,
  maxBytes: number,
  codec?: ResultCodec,
  record?: RecordBinding,
  storeMaxBytes?: number,
): string {
  const limit = storeMaxBytes === undefined ? maxBytes : Math.min(maxBytes, storeMaxBytes);
  const storedOf = (failure: FailureJson): string => {
    const text = JSON.stringify(failure);
    return codec?.encryption ? seal(text, codec.encryption, `failure:${status}`, record) : text;
  };
  const failure = failureOf(error);
  let dataNotKept: ResultProblem | undefined;
  if (data !== undefined) {
    let stored: string | undefined;
    try {
      stored = storedOf({ ...failure, data });
    } catch (cause) {
      // Data that cannot be serialized is dropped rather than losing the failure itself.
      dataNotKept = { code: ErrorCode.resultUnserializable, reason: messageOf(cause) };
    }
    if (stored !== undefined) {
      const sizeBytes = Buffer.byteLength(stored);
      if (sizeBytes <= limit) return stored;
      dataNotKept = { code: ErrorCode.resultTooLarge, sizeBytes, maxBytes: limit };
    }
  }
  return shortened({ ...failure, dataNotKept }, storedOf, limit);
}

/** A failure as it is stored: `dataNotKept` says why a failure declared with data keeps none. */
interface FailureJson {
  readonly name: string;
  readonly message: string;
  readonly code?: string | number;
  readonly data?: unknown;
  readonly dataNotKept?: ResultProblem | undefined;
}

function failureOf(error: unknown): FailureJson {
  const failure: { name: string; message: string; code?: string | number } =
    error instanceof Error
      ? { name: error.name, message: error.message }
      : { name: "Error", message: messageOf(error) };
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string" || typeof code === "number") failure.code = code;
  return failure;
}

/**
 * `failure` as stored, with its message cut to the longest start that fits `limit`, found by halving (the
 * stored size grows with the message, sealed too). A cut inside a surrogate pair is never the longest:
 * JSON spells a lone surrogate in six bytes, more than the whole pair's four. A failure whose name or code
 * alone is over the limit keeps no message, and is stored over it.
 */
function shortened(failure: FailureJson, storedOf: (failure: FailureJson) => string, limit: number): string {
  const whole = storedOf(failure);
  if (Buffer.byteLength(whole) <= limit) return whole;
  const { message } = failure;
  const marker = `… [message cut short to fit the ${limit}-byte limit]`;
  const cut = (keep: number): string =>
    storedOf({ ...failure, message: `${message.slice(0, keep)}${marker}` });
  // cut(fits) fits (but for fits = 0) and cut(tooMany) does not: every character is a byte at least.
  let fits = 0;
  let tooMany = Math.min(message.length, limit);
  let best = cut(0);
  while (tooMany - fits > 1) {
    const keep = (fits + tooMany) >>> 1;
    const stored = cut(keep);
    if (Buffer.byteLength(stored) <= limit) {
      fits = keep;
      best = stored;
    } else {
      tooMany = keep;
    }
  }
  return best;
}

/** What an unknown record keeps for the person who resolves it, beside its failure (`review`). */
export interface ReviewNote {
  /** The verify hook's last answer (stored as JSON: an undefined reason is left out). */
  readonly verify?: { readonly status: string; readonly reason?: string | undefined; readonly at: string };
  /** A preview of the call's arguments (`reviewPreview`): JSON text, redacted, perhaps cut short. */
  readonly arguments?: string | undefined;
}

/**
 * An unknown record's stored failure with `note` added under `review` (sealed again with encryption).
 * A failure that cannot be opened or is not a JSON object is kept as it was, without the note: nothing a
 * record kept is ever lost for a note. Nor is a note worth a failure the store cannot keep: over
 * `maxBytes` (as stored), the arguments' preview is left out, then the whole note.
 */
export function withReviewNote(
  error: string | null,
  note: ReviewNote,
  codec?: ResultCodec,
  record?: RecordBinding,
  maxBytes = Number.POSITIVE_INFINITY,
): string | null {
  let failure: Record<string, unknown>;
  try {
    const text = error === null ? null : open(error, codec?.encryption, "failure:unknown", record);
    // A record that kept no failure gets the note alone: no message is made up for it.
    const parsed: unknown = text === null ? {} : JSON.parse(text);
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return error;
    failure = parsed as Record<string, unknown>;
  } catch {
    return error;
  }
  const review = typeof failure.review === "object" && failure.review !== null ? failure.review : {};
  const stored = (added: ReviewNote) =>
    sealFailureText(
      "unknown",
      JSON.stringify({ ...failure, review: { ...review, ...added } }),
      codec,
      record,
    );
  const fits = (text: string) => Buffer.byteLength(text, "utf8") <= maxBytes;
  const whole = stored(note);
  if (fits(whole)) return whole;
  const { arguments: _, ...short } = note;
  const shorter = stored(short);
  return fits(shorter) ? shorter : error;
}

/** The longest argument preview kept, in characters. */
export const maxPreviewLength = 1000;

/**
 * The arguments as a review preview: their JSON with the `redact` paths applied, cut to
 * {@link maxPreviewLength} characters ("…" marks the cut); undefined when they have no JSON form.
 */
export function argumentPreview(args: unknown, codec?: ResultCodec): string | undefined {
  let text: string | undefined;
  try {
    text = JSON.stringify(args, (_key, value: unknown) =>
      typeof value === "bigint" ? value.toString() : value,
    );
    if (text !== undefined && codec !== undefined && codec.redact.length > 0) {
      text = JSON.stringify(redactPaths(JSON.parse(text), codec.redact));
    }
  } catch {
    return undefined;
  }
  if (text === undefined) return undefined;
  return text.length > maxPreviewLength ? `${text.slice(0, maxPreviewLength - 1)}…` : text;
}

/**
 * The failure a record of this `status` keeps. A sealed failure that does not open for this record and
 * status, or (with encryption) one that is not sealed or missing, throws `ResultUndecryptableError`.
 */
export function decodeFailure(
  status: FailureStatus,
  text: string | null,
  codec?: ResultCodec,
  record?: RecordBinding,
): StoredFailure {
  const encryption = codec?.encryption;
  // Every failure is sealed with encryption: a missing one was emptied at rest.
  if (text === null && encryption !== undefined && !encryption.acceptPlaintext) {
    throw new ResultUndecryptableError("not_sealed", undefined);
  }
  let parsed: Partial<StoredFailure> | undefined;
  if (text !== null) {
    parsed = safeParse(open(text, encryption, `failure:${status}`, record)) as
      | Partial<StoredFailure>
      | undefined;
    // Only an accepted plaintext value gets here unparsed: it was altered at rest.
    if (parsed === undefined && encryption !== undefined) {
      throw new ResultUndecryptableError("malformed", undefined);
    }
  }
  const resolution = operatorResolutionOf(parsed?.resolution);
  return {
    name: typeof parsed?.name === "string" ? parsed.name : "Error",
    message: typeof parsed?.message === "string" ? parsed.message : "the tool failed",
    ...(parsed?.code !== undefined ? { code: parsed.code } : {}),
    ...(parsed?.data !== undefined ? { data: parsed.data } : {}),
    ...(isResultProblem(parsed?.dataNotKept) ? { dataNotKept: parsed.dataNotKept } : {}),
    ...(resolution !== undefined ? { resolution } : {}),
  };
}

/**
 * The message an unknown record's failure states, or undefined when it states none (a note alone, or
 * nothing). Throws like {@link decodeFailure} when a sealed failure does not open for this record.
 */
export function unknownFailureMessage(
  text: string | null,
  codec?: ResultCodec,
  record?: RecordBinding,
): string | undefined {
  if (text === null) return undefined;
  const parsed = safeParse(open(text, codec?.encryption, "failure:unknown", record)) as
    | { message?: unknown }
    | undefined;
  return typeof parsed?.message === "string" ? parsed.message : undefined;
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
