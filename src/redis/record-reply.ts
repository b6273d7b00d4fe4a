/**
 * Records as the scripts hand them back: a flat `field, value, …` list from HGETALL, numbers as decimal
 * strings, `result` and `error` absent when null.
 */
import type { ClaimRequest, IdempotencyRecord, RecordStatus } from "../core/store.js";

const statuses = new Set<string>(["in_progress", "completed", "failed", "unknown"]);

/** The record a successful claim wrote, built from the request and the time the script judged by. */
export function newRecord(request: ClaimRequest, now: number): IdempotencyRecord {
  const leaseExpiresAt = now + request.leaseMs;
  return {
    scope: request.scope,
    key: request.key,
    tool: request.tool,
    fingerprint: request.fingerprint,
    status: "in_progress",
    token: request.token,
    createdAt: now,
    updatedAt: now,
    leaseExpiresAt,
    expiresAt: Math.max(now + request.ttlMs, leaseExpiresAt),
    attempts: 1,
    result: null,
    error: null,
  };
}

/** A record from a script's reply: `field, value, …` pairs from `from` on; undefined if absent or not ours. */
export function readRecord(
  scope: string,
  key: string,
  reply: unknown,
  from: number,
): IdempotencyRecord | undefined {
  if (!Array.isArray(reply)) return undefined;
  const fields = new Map<string, string>();
  for (let i = from; i + 1 < reply.length; i += 2) fields.set(String(reply[i]), String(reply[i + 1]));
  const status = fields.get("status");
  const numbers = ["createdAt", "updatedAt", "leaseExpiresAt", "expiresAt", "attempts"].map((field) =>
    Number(fields.get(field)),
  );
  const [createdAt, updatedAt, leaseExpiresAt, expiresAt, attempts] = numbers as [
    number,
    number,
    number,
    number,
    number,
  ];
  const tool = fields.get("tool");
  const fingerprint = fields.get("fingerprint");
  const token = fields.get("token");
  if (status === undefined || !statuses.has(status) || tool === undefined || fingerprint === undefined) {
    return undefined;
  }
  if (token === undefined || !numbers.every(Number.isFinite)) return undefined;
  return {
    scope,
    key,
    tool,
    fingerprint,
    status: status as RecordStatus,
    token,
    createdAt,
    updatedAt,
    leaseExpiresAt,
    expiresAt,
    attempts,
    result: fields.get("result") ?? null,
    error: fields.get("error") ?? null,
  };
}

/** Like readRecord, for replies that must hold a record: anything else fails the operation (closed). */
export function toRecord(scope: string, key: string, reply: unknown, from: number): IdempotencyRecord {
  const record = readRecord(scope, key, reply, from);
  if (!record) throw notARecord(scope, key);
  return record;
}

/** The key of (scope, key) holds a hash without a record's fields: fail rather than guess. */
export function notARecord(scope: string, key: string): Error {
  return new Error(
    `redisStore: the key of (${JSON.stringify(scope)}, ${JSON.stringify(key)}) holds something that is not an idempotool record.`,
  );
}
