/**
 * The review queue: every record that needs a person, oldest first. That is an in-progress record whose
 * lease has passed (its worker stopped without recording an outcome) and an `unknown` one (nobody knows
 * whether the effect happened; callers fail closed until it is resolved). Reading it changes nothing.
 */
import { type Clock, systemClock } from "../core/clock.js";
import { IdempotencyError, StoreUnavailableError } from "../core/errors.js";
import { invalidOption, invalidOptionFor, sizeOption } from "../core/option-checks.js";
import { isSealed, open, type ResultCodec, resolveCodec } from "../core/result-codec.js";
import { type IdempotencyRecord, type IdempotencyStore, RecordStatus } from "../core/store.js";
import { iso } from "../core/time.js";
import type { ResolveToolOptions } from "./resolve.js";
import { isTrailRecord, recordVersion } from "./trail.js";

const owner = "reviewQueue()";

export interface ReviewQueueOptions {
  readonly store: IdempotencyStore;
  /** Only this tool's records. */
  readonly tool?: string | undefined;
  /** Only this scope's records. */
  readonly scope?: string | undefined;
  /** Only keys starting with this. */
  readonly keyPrefix?: string | undefined;
  /** Only records whose first attempt is at least this old (ms). */
  readonly olderThanMs?: number | undefined;
  /** At most this many items (the oldest); the counts cover every match. Default 100. */
  readonly limit?: number | undefined;
  /**
   * The tools' storage options (`redact`, `encryption`), by tool name: a sealed note (why the outcome is
   * unknown, the verify hook's answer) is opened only with its tool's keys, and shown as sealed otherwise.
   */
  readonly tools?: Readonly<Record<string, ResolveToolOptions>> | undefined;
  readonly clock?: Clock | undefined;
  readonly signal?: AbortSignal | undefined;
  /** Called after each page read with the number of records looked at so far. */
  readonly onProgress?: ((scanned: number) => void) | undefined;
}

/** Why a record needs a person. */
export type ReviewReason = "lease_passed" | "unknown";

/** One record that needs a person, without its result or its owner token. */
export interface ReviewItem {
  readonly scope: string;
  readonly key: string;
  readonly tool: string;
  readonly status: "in_progress" | "unknown";
  readonly reason: ReviewReason;
  readonly attempts: number;
  /** ISO-8601: when the first attempt claimed the key. */
  readonly firstAttemptAt: string;
  /** ISO-8601: the record's last change (the last claim, renewal or settle). */
  readonly lastAttemptAt: string;
  /** How long since the first attempt (ms), by the queue's clock. */
  readonly ageMs: number;
  /** ISO-8601: when the last owner's lease passed. */
  readonly leaseExpiredAt: string;
  /** ISO-8601: when the record stops absorbing repeats unless resolved. */
  readonly expiresAt: string;
  /** The first 8 characters of the last owner's token: tells owners apart without handing out the fence. */
  readonly leaseHolder: string;
  /** Pass it to `resolveRecord({ expectVersion })`: the resolution is refused if the record moved on since. */
  readonly version: string;
  /** The failure the record keeps (why the outcome is unknown), when it keeps one that could be read. */
  readonly failure?: { readonly name: string; readonly message: string; readonly code?: string | number };
  /** The verify hook's last answer, when the reconciler or a call asked it and recorded it. */
  readonly verify?: VerifyNote;
  /**
   * What the call was for: its arguments' JSON (redacted, at most 1,000 characters), when the tool keeps
   * one (`reviewPreview`) and the outcome was recorded as unknown by a call.
   */
  readonly preview?: string;
  /** True when the record's notes are sealed and this queue was not given its tool's keys. */
  readonly sealed: boolean;
}

/** A verify hook's answer as the record keeps it. */
export interface VerifyNote {
  readonly status: string;
  readonly reason?: string;
  /** ISO-8601. */
  readonly at: string;
}

export interface ReviewQueue {
  /** The oldest first, at most `limit`. */
  readonly items: readonly ReviewItem[];
  /** Every record that needs a person and matches the filters. */
  readonly total: number;
  /** How many of them per tool. */
  readonly byTool: Readonly<Record<string, number>>;
  /** The age of each tool's oldest (ms). */
  readonly oldestAgeMsByTool: Readonly<Record<string, number>>;
  /** The age of the oldest (ms), or undefined when the queue is empty. */
  readonly oldestAgeMs: number | undefined;
  /** How many records were looked at. */
  readonly scanned: number;
}

/**
 * Read the queue of records that need a person.
 * @example
 * import { memoryStore } from "idempotool";
 * import { reviewQueue } from "idempotool/review";
 *
 * const queue = await reviewQueue({ store: memoryStore(), olderThanMs: 10 * 60_000 });
 * for (const item of queue.items) console.log(item.tool, item.key, item.reason, item.failure?.message);
 */
export async function reviewQueue(options: ReviewQueueOptions): Promise<ReviewQueue> {
  if (typeof options?.store?.list !== "function")
    invalidOption(owner, "store", "must be an idempotency store");
  const limit = sizeOption(owner, "limit", options.limit, 100);
  const olderThanMs = options.olderThanMs ?? 0;
  if (!(Number.isFinite(olderThanMs) && olderThanMs >= 0)) {
    invalidOption(owner, "olderThanMs", "must be a number of milliseconds, 0 or more");
  }
  const codecs = new Map<string, ResultCodec | undefined>();
  for (const [name, tool] of Object.entries(options.tools ?? {})) {
    codecs.set(name, resolveCodec(tool.redact, tool.encryption, invalidOptionFor(owner, `tools.${name}.`)));
  }
  const clock = options.clock ?? systemClock;
  const now = clock.now();
  const found = new Map<string, IdempotencyRecord>();
  let scanned = 0;
  for (const status of [RecordStatus.unknown, RecordStatus.inProgress]) {
    let cursor: string | undefined;
    do {
      options.signal?.throwIfAborted();
      const page = await listPage(options, status, cursor);
      cursor = page.nextCursor;
      scanned += page.records.length;
      for (const record of page.records) {
        if (isTrailRecord(record) || !needsReview(record, now)) continue;
        if (options.keyPrefix !== undefined && !record.key.startsWith(options.keyPrefix)) continue;
        if (now - record.createdAt < olderThanMs) continue;
        // A store's cursor (Redis SCAN) may hand a record back twice.
        found.set(`${record.scope.length}:${record.scope}${record.key}`, record);
      }
      options.onProgress?.(scanned);
    } while (cursor !== undefined);
  }
  const records = [...found.values()].sort((a, b) => a.createdAt - b.createdAt);
  const byTool: Record<string, number> = {};
  const oldestAgeMsByTool: Record<string, number> = {};
  for (const record of records) {
    byTool[record.tool] = (byTool[record.tool] ?? 0) + 1;
    // Oldest first: a tool's first record is its oldest.
    oldestAgeMsByTool[record.tool] ??= now - record.createdAt;
  }
  return {
    items: records.slice(0, limit).map((record) => itemOf(record, now, codecs.get(record.tool))),
    total: records.length,
    byTool,
    oldestAgeMsByTool,
    oldestAgeMs: records.length > 0 ? now - records[0]!.createdAt : undefined,
    scanned,
  };
}

/** Unknown, or in progress with its lease passed by `now`. */
export function needsReview(record: IdempotencyRecord, now: number): boolean {
  return (
    record.status === RecordStatus.unknown ||
    (record.status === RecordStatus.inProgress && record.leaseExpiresAt <= now)
  );
}

async function listPage(options: ReviewQueueOptions, status: RecordStatus, cursor: string | undefined) {
  try {
    return await options.store.list({
      status,
      limit: 1000,
      ...(options.tool !== undefined ? { tool: options.tool } : {}),
      ...(options.scope !== undefined ? { scope: options.scope } : {}),
      ...(options.keyPrefix !== undefined ? { keyPrefix: options.keyPrefix } : {}),
      ...(cursor !== undefined ? { cursor } : {}),
    });
  } catch (error) {
    if (error instanceof IdempotencyError) throw error;
    throw new StoreUnavailableError("list", { cause: error, consequence: "The queue could not be read." });
  }
}

/** The queue's view of a record: what a person needs to decide, never its result or its token. */
export function itemOf(record: IdempotencyRecord, now: number, codec?: ResultCodec): ReviewItem {
  const note = readNote(record, codec);
  return {
    scope: record.scope,
    key: record.key,
    tool: record.tool,
    status: record.status === RecordStatus.unknown ? "unknown" : "in_progress",
    reason: record.status === RecordStatus.unknown ? "unknown" : "lease_passed",
    attempts: record.attempts,
    firstAttemptAt: iso(record.createdAt),
    lastAttemptAt: iso(record.updatedAt),
    ageMs: Math.max(0, now - record.createdAt),
    leaseExpiredAt: iso(record.leaseExpiresAt),
    expiresAt: iso(record.expiresAt),
    leaseHolder: record.token.slice(0, 8),
    version: recordVersion(record),
    ...(note.failure ? { failure: note.failure } : {}),
    ...(note.verify ? { verify: note.verify } : {}),
    ...(note.preview !== undefined ? { preview: note.preview } : {}),
    sealed: note.sealed,
  };
}

interface Note {
  readonly failure?: ReviewItem["failure"];
  readonly verify?: VerifyNote;
  readonly preview?: string;
  readonly sealed: boolean;
}

/** The failure an unknown record keeps, and the verify answer recorded beside it. */
function readNote(record: IdempotencyRecord, codec: ResultCodec | undefined): Note {
  const text = record.status === RecordStatus.unknown ? record.error : null;
  if (text === null) return { sealed: false };
  if (isSealed(text) && codec?.encryption === undefined) return { sealed: true };
  let parsed: Record<string, unknown>;
  try {
    const binding = {
      scope: record.scope,
      key: record.key,
      tool: record.tool,
      fingerprint: record.fingerprint,
    };
    parsed = JSON.parse(open(text, codec?.encryption, "failure:unknown", binding)) as Record<string, unknown>;
  } catch {
    // A note that does not open or parse is shown as sealed: nothing in it can be trusted.
    return { sealed: true };
  }
  if (typeof parsed !== "object" || parsed === null) return { sealed: false };
  const failure =
    typeof parsed.message === "string"
      ? {
          name: typeof parsed.name === "string" ? parsed.name : "Error",
          message: parsed.message,
          ...(typeof parsed.code === "string" || typeof parsed.code === "number"
            ? { code: parsed.code }
            : {}),
        }
      : undefined;
  const review = parsed.review as Record<string, unknown> | undefined;
  const verify = verifyNoteOf(review?.verify);
  const preview = typeof review?.arguments === "string" ? review.arguments : undefined;
  return {
    ...(failure ? { failure } : {}),
    ...(verify ? { verify } : {}),
    ...(preview !== undefined ? { preview } : {}),
    sealed: false,
  };
}

/** A verify note, when `value` is one. */
export function verifyNoteOf(value: unknown): VerifyNote | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const { status, reason, at } = value as Record<string, unknown>;
  if (typeof status !== "string" || typeof at !== "string") return undefined;
  return { status, at, ...(typeof reason === "string" ? { reason } : {}) };
}
