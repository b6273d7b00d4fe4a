/**
 * How results and failures become the strings a store keeps, and back.
 * Results are kept as their JSON form: a replay hands back what JSON.parse makes of it.
 * With a {@link ResultCodec}, named result fields are redacted, and with encryption what is stored is
 * sealed for the record it belongs to (its {@link RecordBinding}): every caller that may configure
 * encryption passes it, and only then (no binding is built on the plain path).
 */
import { ErrorCode } from "./errors.js";
import type { StoredFailure } from "./outcomes.js";
import {
  open,
  type RecordBinding,
  type ResultCodec,
  ResultUndecryptableError,
  redactPaths,
  seal,
} from "./result-codec.js";

/** A result ready for the store, or the reason it could not be kept (the call still completed). */
export type EncodedResult =
  | { readonly ok: true; readonly text: string | null }
  | { readonly ok: false; readonly error: string; readonly problem: ResultProblem };

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
): EncodedResult {
  let text: string | undefined;
  try {
    text = JSON.stringify(result, refuseLossy);
    if (text !== undefined && codec !== undefined && codec.redact.length > 0) {
      text = JSON.stringify(redactPaths(JSON.parse(text), codec.redact));
    }
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return notKept({ code: ErrorCode.resultUnserializable, reason });
  }
  // undefined (and functions) have no JSON form: the replay hands back undefined.
  if (text === undefined) return { ok: true, text: null };
  // Most results are small; only count bytes when the character count could be over the limit.
  if (text.length * 3 > maxBytes) {
    const sizeBytes = Buffer.byteLength(text, "utf8");
    if (sizeBytes > maxBytes) return notKept({ code: ErrorCode.resultTooLarge, sizeBytes, maxBytes });
  }
  return { ok: true, text: codec?.encryption ? seal(text, codec.encryption, "result", record) : text };
}

function notKept(problem: ResultProblem): EncodedResult {
  return { ok: false, error: JSON.stringify(problem), problem };
}

/** JSON would turn these into `{}` and a replay would hand back something the tool never returned. */
function refuseLossy(this: unknown, _key: string, value: unknown): unknown {
  if (value instanceof Map || value instanceof Set) {
    throw new TypeError(`a ${value instanceof Map ? "Map" : "Set"} has no JSON form`);
  }
  return value;
}

/**
 * The result a replay hands back. A sealed result is opened with the codec's keys for this record; a
 * missing or wrong key, a value altered at rest or moved from another record, or (with encryption) a
 * value that is not sealed throws `ResultUndecryptableError`.
 */
export function decodeResult(text: string | null, codec?: ResultCodec, record?: RecordBinding): unknown {
  if (text === null) return undefined;
  const encryption = codec?.encryption;
  if (encryption === undefined) return JSON.parse(open(text, undefined, "result", record));
  const opened = open(text, encryption, "result", record);
  try {
    return JSON.parse(opened);
  } catch (error) {
    // Only an accepted plaintext value gets here unparsed: it was altered at rest.
    throw new ResultUndecryptableError("malformed", undefined, { cause: error });
  }
}

/** Why a completed record kept no result, if it says so. */
export function decodeResultProblem(error: string | null): ResultProblem | undefined {
  if (error === null) return undefined;
  const parsed = safeParse(error) as Partial<ResultProblem> | undefined;
  if (parsed?.code === ErrorCode.resultTooLarge || parsed?.code === ErrorCode.resultUnserializable) {
    return parsed as ResultProblem;
  }
  return undefined;
}

/** Keep what a caller can use of an error: its name, message, code and the declared data. Never its stack. */
export function encodeFailure(
  error: unknown,
  data?: unknown,
  codec?: ResultCodec,
  record?: RecordBinding,
): string {
  const text = failureJson(error, data);
  return codec?.encryption ? seal(text, codec.encryption, "failure", record) : text;
}

function failureJson(error: unknown, data: unknown): string {
  const failure: { name: string; message: string; code?: string | number; data?: unknown } =
    error instanceof Error
      ? { name: error.name, message: error.message }
      : { name: "Error", message: String(error) };
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string" || typeof code === "number") failure.code = code;
  if (data !== undefined) failure.data = data;
  try {
    return JSON.stringify(failure);
  } catch {
    // Data that cannot be serialized is dropped rather than losing the failure itself.
    delete failure.data;
    return JSON.stringify(failure);
  }
}

/**
 * The failure a replay hands back. A sealed failure that does not open for this record, or (with
 * encryption) one that is not sealed, throws `ResultUndecryptableError`.
 */
export function decodeFailure(
  text: string | null,
  codec?: ResultCodec,
  record?: RecordBinding,
): StoredFailure {
  let parsed: Partial<StoredFailure> | undefined;
  if (text !== null) {
    parsed = safeParse(open(text, codec?.encryption, "failure", record)) as
      | Partial<StoredFailure>
      | undefined;
    // Only an accepted plaintext value gets here unparsed: it was altered at rest.
    if (parsed === undefined && codec?.encryption !== undefined) {
      throw new ResultUndecryptableError("malformed", undefined);
    }
  }
  return {
    name: typeof parsed?.name === "string" ? parsed.name : "Error",
    message: typeof parsed?.message === "string" ? parsed.message : "the tool failed",
    ...(parsed?.code !== undefined ? { code: parsed.code } : {}),
    ...(parsed?.data !== undefined ? { data: parsed.data } : {}),
  };
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
