/**
 * One record's whole story, for a person deciding what to do about it: where it stands now (the fields
 * the queue shows, for any status), who resolved it by hand if someone did, and every resolution the
 * trail keeps for its key. Reading it changes nothing.
 */
import { type Clock, systemClock } from "../core/clock.js";
import { IdempotencyError, StoreUnavailableError } from "../core/errors.js";
import { invalidOption, invalidOptionFor } from "../core/option-checks.js";
import type { OperatorResolution } from "../core/outcomes.js";
import { isSealed, type ResultCodec, resolveCodec } from "../core/result-codec.js";
import { decodeCompletedNote, decodeFailure } from "../core/serialize.js";
import { type IdempotencyRecord, type IdempotencyStore, RecordStatus } from "../core/store.js";
import { iso } from "../core/time.js";
import { itemOf, needsReview, type ReviewItem } from "./queue.js";
import type { ResolveToolOptions } from "./resolve.js";
import { readTrail, type TrailEntry } from "./trail.js";

const owner = "readRecordStory()";

export interface RecordStoryOptions {
  readonly store: IdempotencyStore;
  readonly scope: string;
  readonly key: string;
  /** The tools' storage options, by tool name, as for `reviewQueue({ tools })`: sealed notes open only with them. */
  readonly tools?: Readonly<Record<string, ResolveToolOptions>> | undefined;
  readonly clock?: Clock | undefined;
}

/** A record as a person reads it: never its result, its arguments' fingerprint or its owner token. */
export interface RecordView {
  readonly scope: string;
  readonly key: string;
  readonly tool: string;
  readonly status: RecordStatus;
  readonly attempts: number;
  /** ISO-8601: when the first attempt claimed the key. */
  readonly firstAttemptAt: string;
  /** ISO-8601: the record's last change. */
  readonly lastAttemptAt: string;
  /** How long since the first attempt (ms), by the story's clock. */
  readonly ageMs: number;
  /** ISO-8601: when the last owner's lease passes (or passed). */
  readonly leaseExpiresAt: string;
  /** ISO-8601: when the record stops absorbing repeats. */
  readonly expiresAt: string;
  /** The first 8 characters of the last owner's token. */
  readonly leaseHolder: string;
  /** Pass it to `resolveRecord({ expectVersion })`. */
  readonly version: string;
  /** True when the record is in the review queue: unknown, or in progress with its lease passed. */
  readonly needsReview: boolean;
  /** Why it needs a person, when it does. */
  readonly reason?: ReviewItem["reason"];
  /** Why the outcome is unknown, or the failure a failed record replays. */
  readonly failure?: ReviewItem["failure"];
  /** The verify hook's last answer, when one was recorded. */
  readonly verify?: ReviewItem["verify"];
  /** What the call was for, when its tool keeps a preview of the arguments (`reviewPreview`). */
  readonly preview?: ReviewItem["preview"];
  /** Who recorded this outcome by hand, when a person did (the `resolved_by_operator` repeats report). */
  readonly resolvedByOperator?: OperatorResolution;
  /** True when the record's notes are sealed and the story was not given its tool's keys. */
  readonly sealed: boolean;
}

export interface RecordStory {
  /** The record as it is now, or undefined when the store keeps none (never written, released, expired). */
  readonly record: RecordView | undefined;
  /** Every resolution of this key the trail keeps, oldest first; it outlives a record a resolution freed. */
  readonly trail: readonly TrailEntry[];
}

/**
 * Read one record and its trail.
 * @example
 * import { memoryStore } from "idempotool";
 * import { readRecordStory } from "idempotool/review";
 *
 * const { record, trail } = await readRecordStory({ store: memoryStore(), scope: "default", key: "order-42" });
 * console.log(record?.status ?? "no record", record?.resolvedByOperator?.by, trail.length);
 */
export async function readRecordStory(options: RecordStoryOptions): Promise<RecordStory> {
  if (typeof options?.store?.get !== "function")
    invalidOption(owner, "store", "must be an idempotency store");
  for (const name of ["scope", "key"] as const) {
    if (typeof options[name] !== "string" || options[name].length === 0)
      invalidOption(owner, name, "must be a non-empty string");
  }
  const { store, scope, key } = options;
  const now = (options.clock ?? systemClock).now();
  const tool = (name: string) => options.tools?.[name];
  let record: IdempotencyRecord | undefined;
  let trail: TrailEntry[];
  try {
    [record, trail] = await Promise.all([store.get({ scope, key }, now), readTrail({ store, scope, key })]);
  } catch (error) {
    if (error instanceof IdempotencyError) throw error;
    throw new StoreUnavailableError("get", { cause: error, consequence: "The record could not be read." });
  }
  if (record === undefined) return { record: undefined, trail };
  const settings = tool(record.tool);
  const codec = settings
    ? resolveCodec(settings.redact, settings.encryption, invalidOptionFor(owner, `tools.${record.tool}.`))
    : undefined;
  return { record: viewOf(record, now, codec), trail };
}

function viewOf(record: IdempotencyRecord, now: number, codec: ResultCodec | undefined): RecordView {
  const base = {
    scope: record.scope,
    key: record.key,
    tool: record.tool,
    status: record.status,
    attempts: record.attempts,
    firstAttemptAt: iso(record.createdAt),
    lastAttemptAt: iso(record.updatedAt),
    ageMs: Math.max(0, now - record.createdAt),
    leaseExpiresAt: iso(record.leaseExpiresAt),
    expiresAt: iso(record.expiresAt),
    leaseHolder: record.token.slice(0, 8),
  };
  if (needsReview(record, now) || record.status === RecordStatus.inProgress) {
    const item = itemOf(record, now, codec);
    return {
      ...base,
      version: item.version,
      needsReview: needsReview(record, now),
      ...(needsReview(record, now) ? { reason: item.reason } : {}),
      ...(item.failure ? { failure: item.failure } : {}),
      ...(item.verify ? { verify: item.verify } : {}),
      ...(item.preview !== undefined ? { preview: item.preview } : {}),
      sealed: item.sealed,
    };
  }
  const version = itemOf(record, now, codec).version;
  const binding = {
    scope: record.scope,
    key: record.key,
    tool: record.tool,
    fingerprint: record.fingerprint,
  };
  const sealed = record.error !== null && isSealed(record.error) && codec?.encryption === undefined;
  if (sealed) return { ...base, version, needsReview: false, sealed: true };
  try {
    if (record.status === RecordStatus.completed) {
      const note = decodeCompletedNote(record.error, codec, binding);
      return {
        ...base,
        version,
        needsReview: false,
        ...(note.resolution ? { resolvedByOperator: note.resolution } : {}),
        sealed: false,
      };
    }
    const failure = decodeFailure("failed", record.error, codec, binding);
    return {
      ...base,
      version,
      needsReview: false,
      failure: {
        name: failure.name,
        message: failure.message,
        ...(typeof failure.code === "string" || typeof failure.code === "number"
          ? { code: failure.code }
          : {}),
      },
      ...(failure.resolution ? { resolvedByOperator: failure.resolution } : {}),
      sealed: false,
    };
  } catch {
    // A note that does not open is shown as sealed: nothing in it can be trusted.
    return { ...base, version, needsReview: false, sealed: true };
  }
}
