/**
 * The trail of operators' resolutions. It lives in the store itself, as records of a scope of its own, so
 * every store keeps it through the store contract alone and it outlives a record that a resolution frees.
 * An entry is written before the resolution acts and completed after it, so an interrupted resolution
 * still leaves its intent behind.
 */
import { sha256Hex } from "../core/fingerprint.js";
import type { IdempotencyRecord, IdempotencyStore, RecordStatus } from "../core/store.js";
import { recordIdText } from "../core/store.js";

/** The scope the trail's records live in. */
export const trailScope = "idempotool:trail";
/** The tool name of every trail record: records of other tools in the trail scope are not entries. */
export const trailTool = "idempotool.resolve";
/** How long an entry is kept: a year. */
export const trailTtlMs = 366 * 24 * 60 * 60 * 1000;

/** What an operator decided a record's outcome was. */
export type ResolveAs = "completed" | "failed" | "not_executed";

/** The record as the operator found it, before the resolution. */
export interface RecordBefore {
  readonly status: RecordStatus;
  readonly attempts: number;
  /** ISO-8601: when the first attempt claimed the key. */
  readonly firstAttemptAt: string;
  /** ISO-8601: the record's last change. */
  readonly lastAttemptAt: string;
  /** {@link recordVersion} of the record. */
  readonly version: string;
}

/** One resolution, as the trail keeps it. */
export interface TrailEntry {
  /** The entry's own id (its key in the trail scope). */
  readonly id: string;
  readonly scope: string;
  readonly key: string;
  readonly tool: string;
  readonly as: ResolveAs;
  /** Who resolved it: the name the operator gave, or their OS user. */
  readonly by: string;
  /** ISO-8601. */
  readonly at: string;
  readonly evidence: string;
  /** Where it came from: `cli`, `console`, `verify` (the tool's hook, run on an operator's request) or `api`. */
  readonly via: string;
  readonly before: RecordBefore;
  /**
   * `applied`, or `interrupted`: the resolver stopped between writing its intent and recording that it
   * acted, so the record may or may not have been changed. Look at the record.
   */
  readonly state: "applied" | "interrupted";
}

/** The part of the key every entry of one record starts with. */
export function trailPrefix(scope: string, key: string): string {
  return `${sha256Hex(recordIdText(scope, key)).slice(0, 32)}:`;
}

/** A new entry's key: the record's prefix, the time (so entries sort by it), and a random part. */
export function trailEntryKey(scope: string, key: string, at: number): string {
  const random = crypto.getRandomValues(new Uint32Array(2));
  const suffix = `${random[0]!.toString(16).padStart(8, "0")}${random[1]!.toString(16).padStart(8, "0")}`;
  return `${trailPrefix(scope, key)}${at.toString().padStart(15, "0")}:${suffix}`;
}

/**
 * An opaque text that changes whenever the record does (another owner, another status, a renewed lease, a
 * settle): what an operator saw, so a resolution can refuse a record that moved on since.
 */
export function recordVersion(record: IdempotencyRecord): string {
  const parts = [record.token, record.status, record.updatedAt, record.leaseExpiresAt, record.attempts];
  return sha256Hex(parts.join("\n")).slice(0, 16);
}

/** The entry a trail record holds, or undefined for a record that is not one (or not one it can read). */
export function trailEntryOf(record: IdempotencyRecord): TrailEntry | undefined {
  if (record.scope !== trailScope || record.tool !== trailTool) return undefined;
  const text =
    record.status === "completed" ? record.result : record.status === "unknown" ? record.error : null;
  if (text === null) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isEntryBody(parsed)) return undefined;
  return { ...parsed, id: record.key, state: record.status === "completed" ? "applied" : "interrupted" };
}

type EntryBody = Omit<TrailEntry, "id" | "state">;

/** What an entry may say a record was resolved as: an entry saying anything else is not read. */
const resolvedAs = new Set<string>(["completed", "failed", "not_executed"]);

/** A record of the trail itself, not a call's: its scope and its tool are the trail's. */
export function isTrailRecord(record: IdempotencyRecord): boolean {
  return record.scope === trailScope && record.tool === trailTool;
}

function isEntryBody(value: unknown): value is EntryBody {
  if (typeof value !== "object" || value === null) return false;
  const entry = value as Record<string, unknown>;
  return (
    ["scope", "key", "tool", "as", "by", "at", "evidence", "via"].every(
      (name) => typeof entry[name] === "string",
    ) &&
    resolvedAs.has(entry.as as string) &&
    typeof entry.before === "object" &&
    entry.before !== null
  );
}

/** The entry's JSON as its trail record keeps it. */
export function entryText(entry: EntryBody): string {
  return JSON.stringify(entry);
}

/**
 * Every resolution of (scope, key) the store still keeps, oldest first.
 * @example
 * import { memoryStore } from "idempotool";
 * import { readTrail } from "idempotool/review";
 *
 * for (const entry of await readTrail({ store: memoryStore(), scope: "default", key: "order-42" })) {
 *   console.log(entry.at, entry.by, entry.as, entry.evidence);
 * }
 */
export async function readTrail(options: {
  readonly store: IdempotencyStore;
  readonly scope: string;
  readonly key: string;
}): Promise<TrailEntry[]> {
  const entries: TrailEntry[] = [];
  let cursor: string | undefined;
  do {
    const page = await options.store.list({
      scope: trailScope,
      keyPrefix: trailPrefix(options.scope, options.key),
      limit: 1000,
      ...(cursor !== undefined ? { cursor } : {}),
    });
    for (const record of page.records) {
      const entry = trailEntryOf(record);
      // The prefix is a hash: an entry of another record sharing it is told apart by what it names.
      if (entry && entry.scope === options.scope && entry.key === options.key) entries.push(entry);
    }
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  // A store's cursor (Redis SCAN) may hand an entry back twice.
  const unique = new Map(entries.map((entry) => [entry.id, entry]));
  return [...unique.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
