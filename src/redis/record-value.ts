/**
 * A record as Redis keeps it: one string value, read and written whole by the scripts (scripts.ts).
 *
 *   <expiresAt> <status> <leaseExpiresAt> <createdAt> <updatedAt> <attempts> <#token> <#tool> <#fingerprint> <#result> <#error>\n
 *   <token><tool><fingerprint><result><error>
 *
 * The header is one line of decimal epoch-ms times, the status and the byte length of each string that
 * follows ("-" for a null result or error); the strings follow back to back, unescaped, so any string
 * (a space, a newline, the empty string) is kept byte for byte and null stays apart from "". The
 * expiry comes first, so a script can judge a record live from the value's first digits.
 */
import { Buffer } from "node:buffer";
import type { ClaimRequest, IdempotencyRecord, RecordStatus } from "../core/store.js";

const header =
  /^(-?\d+) (in_progress|completed|failed|unknown) (-?\d+) (-?\d+) (-?\d+) (\d+) (\d+) (\d+) (\d+) (-|\d+) (-|\d+)\n/;

/**
 * How long the key of a record in progress or unknown outlives the record's window (its `expiresAt`): a
 * day. The record counts as absent from `expiresAt` on, but its owner can still settle it, as the contract
 * allows while the store holds it, so a call that outlived its window (a worker paused through its lease
 * and its window) records its outcome, and a repeat replays it rather than run the tool again. Completed
 * and failed records, which nothing settles again, go at their window's end.
 */
export const openRecordKeptMs = 24 * 60 * 60 * 1000;

/**
 * What a claim made by a plain command writes (`SET key stub NX GET PX <leaseMs + ttlMs + keptMs - 1>`):
 * the record it stands for without its times, which a plain command cannot read off the server's clock.
 *
 *   ~ <leaseMs> <ttlMs> <keptMs> 1 <#token> <#tool> <#fingerprint> - -\n<token><tool><fingerprint>
 *
 * The key's expiry, set by the server when the claim landed, holds them instead, and the scripts read a
 * stub as the record it stands for: it expires `keptMs` (see {@link openRecordKeptMs}) before its key. Nothing
 * else starts with "~": a record starts with its expiry's digits.
 */
export function claimStub(request: ClaimRequest): string {
  return `~ ${request.leaseMs} ${request.ttlMs} ${openRecordKeptMs}${claimTail(request)}`;
}

/**
 * The key's life in ms for a stub: it expires the millisecond before its record's window ends, plus the
 * day a record in progress is kept (see scripts.ts).
 */
export function claimStubLifeMs(request: ClaimRequest): number {
  return request.leaseMs + request.ttlMs + openRecordKeptMs - 1;
}

/**
 * A claim's record after its times: ` <attempts> <#token> <#tool> <#fingerprint> - -\n<token><tool><fingerprint>`
 * (above), attempt 1 with no result or error yet.
 */
export function claimTail(request: ClaimRequest): string {
  const { token, tool, fingerprint } = request;
  return ` 1 ${Buffer.byteLength(token)} ${Buffer.byteLength(tool)} ${Buffer.byteLength(fingerprint)} - -\n${token}${tool}${fingerprint}`;
}

/** What a settle sent: the record it returns ends at the fingerprint, and these complete it. */
export interface Outcome {
  readonly result: string | null;
  readonly error: string | null;
}

/**
 * The record a value holds; undefined when the value is absent or not a record. With `outcome`, the
 * value stops after the fingerprint (a settle's reply) and the result and error are taken from it.
 */
export function readRecord(
  scope: string,
  key: string,
  value: unknown,
  outcome?: Outcome,
): IdempotencyRecord | undefined {
  if (typeof value !== "string") return undefined;
  const fields = header.exec(value);
  if (fields === null) return undefined;
  const expiresAt = Number(fields[1]);
  const leaseExpiresAt = Number(fields[3]);
  const createdAt = Number(fields[4]);
  const updatedAt = Number(fields[5]);
  const attempts = Number(fields[6]);
  const tokenSize = Number(fields[7]);
  const toolSize = Number(fields[8]);
  const fingerprintSize = Number(fields[9]);
  const resultSize = outcome || fields[10] === "-" ? 0 : Number(fields[10]);
  const errorSize = outcome || fields[11] === "-" ? 0 : Number(fields[11]);
  const numbers = [expiresAt, leaseExpiresAt, createdAt, updatedAt, attempts, tokenSize, toolSize];
  if (
    !numbers.every(Number.isSafeInteger) ||
    !Number.isSafeInteger(fingerprintSize + resultSize + errorSize)
  ) {
    return undefined;
  }
  const tokenAt = fields[0].length;
  const toolAt = tokenAt + tokenSize;
  const fingerprintAt = toolAt + toolSize;
  const resultAt = fingerprintAt + fingerprintSize;
  const errorAt = resultAt + resultSize;
  const end = errorAt + errorSize;
  // Sizes count bytes. A value as many UTF-16 code units long as it is bytes is all ASCII, and its
  // positions are offsets; otherwise cut its UTF-8 bytes (the header is ASCII either way).
  let cut = (from: number, to: number) => value.slice(from, to);
  if (value.length !== end) {
    const bytes = Buffer.from(value, "utf8");
    if (bytes.length !== end) return undefined;
    cut = (from, to) => bytes.toString("utf8", from, to);
  }
  return {
    scope,
    key,
    tool: cut(toolAt, fingerprintAt),
    fingerprint: cut(fingerprintAt, resultAt),
    status: fields[2] as RecordStatus,
    token: cut(tokenAt, toolAt),
    createdAt,
    updatedAt,
    leaseExpiresAt,
    expiresAt,
    attempts,
    result: outcome ? outcome.result : fields[10] === "-" ? null : cut(resultAt, errorAt),
    error: outcome ? outcome.error : fields[11] === "-" ? null : cut(errorAt, end),
  };
}

/** Like readRecord, for values that must hold a record: anything else fails the operation (closed). */
export function toRecord(scope: string, key: string, value: unknown, outcome?: Outcome): IdempotencyRecord {
  const record = readRecord(scope, key, value, outcome);
  if (!record) throw notARecord(scope, key);
  return record;
}

/** The key of (scope, key) holds something that is not a record: fail rather than guess. */
export function notARecord(scope: string, key: string): Error {
  return new Error(
    `redisStore: the key of (${JSON.stringify(scope)}, ${JSON.stringify(key)}) holds something that is not an idempotool record.`,
  );
}
