/**
 * OP-2: the business write and the dedup record in ONE database transaction. If the transaction
 * commits, the key is completed with its result; if it rolls back, the key is free again.
 */

import { type Clock, systemClock } from "../core/clock.js";
import { ErrorCode, IdempotencyError, KeyConflictError } from "../core/errors.js";
import { fingerprintMatches, fingerprintWith } from "../core/keyed-fingerprint.js";
import { validateKey, validateScope } from "../core/keys.js";
import {
  durationOption,
  invalidOption,
  invalidOptionFor,
  maxTtlMs,
  sizeOption,
  toolNameOption,
} from "../core/option-checks.js";
import { defaults, type RecordOptions } from "../core/options.js";
import type { RecordBinding, ResultCodec } from "../core/result-codec.js";
import { resolveCodec } from "../core/result-codec.js";
import { decodeResult, encodeResult } from "../core/serialize.js";
import type { IdempotencyRecord } from "../core/store.js";
import { iso } from "../core/time.js";
import { sqlIdentifier } from "./sql-identifier.js";

/**
 * What one transactional call is: the dedup table, the key and what it is for. The record options are
 * those of `idempotent()` ({@link RecordOptions}).
 */
export interface TransactionalOnceOptions
  extends Pick<RecordOptions<unknown, unknown>, "ttlMs" | "redact" | "encryption" | "fingerprintKeys"> {
  /** The dedup table (see `postgresDedupTableSql`, `sqliteDedupTableSql`, `mysqlDedupTableSql`). Checked, then quoted. */
  readonly table: string;
  /**
   * The operation's name (`"charge"`, `"place_order"`), kept in the row. A key belongs to one operation:
   * a row committed under another name is a conflict, never a replay, so two call sites that share a
   * table and a key (a charge and its refund, both keyed by the order id) never answer for each other.
   */
  readonly tool: string;
  /** Stable across every repeat of one logical operation. */
  readonly key: string;
  /** A namespace (tenant, user); default "default". */
  readonly scope?: string | undefined;
  /** The arguments: their fingerprint tells a repeat from a key reused for something else. */
  readonly args?: unknown | undefined;
  /** Or the fingerprint itself, when you compute it (it is stored as given). Give `args` or `fingerprint`. */
  readonly fingerprint?: string | undefined;
  // `maxResultBytes` and `clock` are declared here, not picked: a result too large rolls the business
  // write back with it, and only SQLite reads the clock.
  /**
   * The largest result kept (bytes, a whole number ≥ 1). Default 1 MiB; a larger result rolls the
   * transaction back.
   */
  readonly maxResultBytes?: number | undefined;
  /** Injectable time for SQLite (PostgreSQL and MySQL judge expiry by the server's clock). */
  readonly clock?: Clock | undefined;
}

/** What a transactional call returns. */
export interface TransactionalOutcome<R> {
  /** This call's result, or the stored one on a replay. */
  readonly result: R;
  /** True when the write did not run and the committed result was handed back. */
  readonly was_replay: boolean;
  /** When the committed call was made (ISO-8601). */
  readonly original_called_at: string;
  readonly idempotency_key: string;
}

export interface ResolvedTransactional {
  readonly table: string;
  readonly tool: string;
  readonly key: string;
  readonly scope: string;
  readonly fingerprint: string;
  /** The arguments, when the fingerprint was made from them (a row fingerprinted under an older key still matches). */
  readonly args: unknown;
  readonly ttlMs: number;
  readonly maxResultBytes: number;
  readonly codec: ResultCodec | undefined;
  readonly clock: Clock;
}

export function resolveTransactional(
  options: TransactionalOnceOptions,
  schema: boolean,
): ResolvedTransactional {
  const owner = "transactionalOnce()";
  const table = sqlIdentifier(options.table, "table", schema);
  const tool = options.tool;
  toolNameOption(owner, "tool", tool);
  const key = validateKey(options.key, tool);
  // As in every store: at most 255 characters, and no lone surrogate (encoded as U+FFFD, two scopes would merge).
  const scope = validateScope(options.scope);
  if ((options.args === undefined) === (options.fingerprint === undefined)) {
    invalidOption(owner, "args", "give either args or fingerprint");
  }
  const codec = resolveCodec(
    options.redact,
    options.encryption,
    invalidOptionFor(owner),
    options.fingerprintKeys,
  );
  return {
    table,
    tool,
    key,
    scope,
    fingerprint: options.fingerprint ?? fingerprintWith(codec?.fingerprintKeys, options.args),
    args: options.args,
    ttlMs: durationOption(owner, "ttlMs", options.ttlMs, defaults.ttlMs, { max: maxTtlMs }),
    maxResultBytes: sizeOption(owner, "maxResultBytes", options.maxResultBytes, defaults.maxResultBytes),
    codec,
    clock: options.clock ?? systemClock,
  };
}

/** The stored text for a result; a result that cannot be kept rolls the transaction back. */
export function storedResult(o: ResolvedTransactional, result: unknown): string | null {
  const encoded = encodeResult(result, o.maxResultBytes, o.codec, bindingOf(o, o.fingerprint));
  if (encoded.ok) return encoded.text;
  const reason =
    encoded.problem.code === ErrorCode.resultTooLarge
      ? `the result is ${encoded.problem.sizeBytes} bytes, over maxResultBytes (${encoded.problem.maxBytes})`
      : `the result cannot be stored (${encoded.problem.reason})`;
  throw new IdempotencyError(
    encoded.problem.code,
    `transactionalOnce(): ${reason}; the transaction was rolled back, so nothing happened.`,
  );
}

/** A committed dedup row, as a repeat reads it. */
export interface DedupRow {
  /** Null in a row committed before its table had the `tool` column. */
  readonly tool: string | null;
  readonly fingerprint: string;
  readonly result: string | null;
  readonly createdAt: number;
  readonly expiresAt: number;
}

/**
 * A committed dedup row seen by a repeat: replay it when this tool made it with these arguments;
 * anything else is a conflict, and nothing runs.
 */
export function replayRow<R>(o: ResolvedTransactional, row: DedupRow): TransactionalOutcome<R> {
  if (row.tool === null) throw untracedRowConflict(o, row);
  // Another tool's row is a conflict whatever its fingerprint, which that tool may have keyed under its own
  // keys: it is not compared, so it cannot read as a key problem here.
  const matches =
    row.tool === o.tool &&
    (o.args === undefined
      ? row.fingerprint === o.fingerprint
      : fingerprintMatches(o.codec, row.fingerprint, o.fingerprint, o.args));
  if (!matches) throw new KeyConflictError(pseudoRecord(o, row.tool, row), o.fingerprint, o.tool);
  return {
    result: decodeResult(row.result, o.codec, bindingOf(o, row.fingerprint)) as R,
    was_replay: true,
    original_called_at: iso(row.createdAt),
    idempotency_key: o.key,
  };
}

/**
 * The table predates the `tool` column: say the one statement that adds it. `cause` is the database's
 * own error, kept for the reader.
 */
export function toolColumnMissing(o: ResolvedTransactional, cause: unknown): IdempotencyError {
  return new IdempotencyError(
    ErrorCode.invalidOptions,
    `transactionalOnce(): the dedup table ${o.table} has no tool column (it was made by an earlier ` +
      `build). Add it once: ALTER TABLE ${o.table} ADD COLUMN tool text. Rows committed before then ` +
      "cannot say which tool made them: a repeat of one is refused as a conflict until it expires.",
    { cause },
  );
}

// A row from before the tool column could be this operation's or another's: neither replay nor run.
function untracedRowConflict(o: ResolvedTransactional, row: DedupRow): KeyConflictError {
  const calledAt = iso(row.createdAt);
  return new KeyConflictError(
    {
      key: o.key,
      scope: o.scope,
      originalTool: "",
      tool: o.tool,
      originalFingerprint: row.fingerprint,
      fingerprint: o.fingerprint,
      originalCalledAt: calledAt,
    },
    `Idempotency key "${o.key}" was committed at ${calledAt} in ${o.table} before the table recorded ` +
      `tools, so which tool used it is not known: ${o.tool} did not run and replays nothing. If that row ` +
      `is this operation's, it already happened; if it is another tool's, use a new key. The row holds ` +
      `the key until ${iso(row.expiresAt)}.`,
  );
}

function bindingOf(o: ResolvedTransactional, fingerprint: string): RecordBinding | undefined {
  return o.codec?.encryption === undefined
    ? undefined
    : { scope: o.scope, key: o.key, tool: o.tool, fingerprint };
}

function pseudoRecord(o: ResolvedTransactional, tool: string, row: DedupRow): IdempotencyRecord {
  return {
    scope: o.scope,
    key: o.key,
    tool,
    fingerprint: row.fingerprint,
    status: "completed",
    token: "",
    createdAt: row.createdAt,
    updatedAt: row.createdAt,
    leaseExpiresAt: row.createdAt,
    expiresAt: row.expiresAt,
    attempts: 1,
    result: row.result,
    error: null,
  };
}
