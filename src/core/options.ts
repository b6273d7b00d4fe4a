import { type Clock, systemClock } from "./clock.js";
import type { IdempotencyEvent } from "./events.js";
import { type FieldList, fieldListOf, pickFields } from "./field-list.js";
import type { FingerprintKeyOptions } from "./keyed-fingerprint.js";
import {
  durationOption,
  invalidOption,
  invalidOptionFor,
  maxTtlMs,
  sizeOption,
  toolNameOption,
} from "./option-checks.js";
import { type EncryptionOptions, type ResultCodec, resolveCodec } from "./result-codec.js";
import type { ResolvedSimilar } from "./similar.js";
import type { IdempotencyRecord, IdempotencyStore } from "./store.js";

/**
 * The class of side effect, which picks what a throw and a crash mean (docs/concepts.md, "Effect classes").
 */
export const Effect = {
  /** The downstream takes an idempotency key (Stripe): a throw releases the key, a stale claim is taken over. */
  nativeKey: "native-key",
  /** A write to a store you own, in one transaction: a throw releases the key, a stale claim is taken over. */
  ownedStore: "owned-store",
  /** The effect can be undone (refund): a throw leaves the outcome unknown; `reconcile` decides a stale claim. */
  compensatable: "compensatable",
  /** The effect cannot be undone (SMS, email): a throw or a crash fails closed until `verify` or an operator resolves it. */
  irreversible: "irreversible",
} as const;
export type Effect = (typeof Effect)[keyof typeof Effect];

/** What happened to one call; fed to the `onEvent` option for logs, metrics and traces. */
export const EventType = {
  /** This call claimed the key and runs the tool. */
  run: "run",
  /** The tool finished and its result was recorded. */
  completed: "completed",
  /** The tool failed definitively and the failure was recorded. */
  failed: "failed",
  /** The key was released: the effect did not happen and a retry may run. */
  released: "released",
  /** A repeat got the recorded outcome instead of running the tool. */
  replay: "replay",
  /** Same key, different arguments: rejected. */
  conflict: "conflict",
  /** Another call holds the key; this one waits for its outcome. */
  inFlightWait: "in_flight_wait",
  /**
   * This call stopped waiting for the call holding the key: `waitMs` passed (`error` is the
   * `idempotency_key_in_use` error it throws) or its signal aborted (`error` is the abort reason).
   */
  inFlightGaveUp: "in_flight_gave_up",
  /** A stale claim was taken over from a previous owner. */
  takeover: "takeover",
  /** The verify hook was asked about an unknown outcome. */
  verify: "verify",
  /** Nobody knows whether the effect happened; the call failed closed. */
  outcomeUnknown: "outcome_unknown",
  /** This worker lost its claim while running. */
  leaseLost: "lease_lost",
  /** The store failed or could not be reached. */
  storeError: "store_error",
} as const;
export type EventType = (typeof EventType)[keyof typeof EventType];

/** What a `verify` or `reconcile` hook learned from the downstream system about an earlier attempt. */
export type VerifyOutcome<R> =
  /** The effect happened; this is its result. It is recorded and replayed. */
  | { readonly status: "completed"; readonly result: R }
  /** The attempt failed definitively; the failure is recorded and replayed. */
  | { readonly status: "failed"; readonly error: unknown; readonly data?: unknown }
  /** The effect certainly did not happen: the tool runs now. */
  | { readonly status: "not_executed" }
  /** Still unknown (needs review): callers keep failing closed. */
  | { readonly status: "unknown"; readonly reason?: string };

export interface VerifyContext<A> {
  /** The arguments of the current call; they match the record's fingerprint. */
  readonly args: A;
  readonly key: string;
  readonly scope: string;
  readonly signal: AbortSignal;
}

/** Asks the downstream system whether an attempt whose outcome is unknown took effect (look the message up by its key). */
export type VerifyHook<A, R> = (
  record: IdempotencyRecord,
  context: VerifyContext<A>,
) => VerifyOutcome<R> | Promise<VerifyOutcome<R>>;

/** Per-call input: the key and scope, chosen by the caller before the call. */
export interface CallOptions {
  /** Stable across every repeat of one logical operation. Required unless the `key` option derives it. */
  readonly key?: string | undefined;
  /** A namespace (tenant, user, agent). The same key in two scopes is two operations. Default "default". */
  readonly scope?: string | undefined;
  /** Abort waiting for an in-flight call (the tool itself sees it too, through its context). */
  readonly signal?: AbortSignal | undefined;
}

/**
 * The options about the records a tool keeps: where they live, how long they hold, what counts as a
 * repeat, what is stored and how an unknown outcome is resolved. `idempotent()` takes them beside the
 * tool's name, and each integration's options extend them or pick from them, so every one of them is
 * documented here once.
 */
export interface RecordOptions<A, R> {
  /** Where the records are kept: `memoryStore()`, `sqliteStore()`, `postgresStore()`, … */
  readonly store: IdempotencyStore;
  /** The class of side effect. Default "irreversible" (fail closed). */
  readonly effect?: Effect | undefined;
  /**
   * How long a settled record absorbs repeats, in whole ms from 1 to ten years. Default 24 h (Stripe's
   * window); `idempotent()` warns below 1 h. See docs/concepts.md, "Limits".
   */
  readonly ttlMs?: number | undefined;
  /**
   * How long a claim holds before another caller may judge it stale, in whole ms from 1 to 2^31 − 1
   * (what a timer holds). Renewed while the tool runs. Default 60 s.
   */
  readonly leaseMs?: number | undefined;
  /**
   * How long a repeat waits for an in-flight call's outcome before `idempotency_key_in_use`, in whole ms
   * from 0 to 2^31 − 1. 0 fails at once. Default 10 s.
   */
  readonly waitMs?: number | undefined;
  /**
   * Which arguments count for the fingerprint: top-level field names, or a function picking them.
   * Default: all of them. A call with none of the named fields is `invalid_arguments`.
   */
  readonly significant?: FieldList<A> | ((args: A) => unknown) | undefined;
  /** How BigInt arguments are fingerprinted. Default "reject" (`invalid_arguments`). */
  readonly bigint?: "reject" | "string" | undefined;
  /**
   * Resolves an unknown outcome by asking the downstream system (docs/concepts.md, "verify and reconcile").
   */
  readonly verify?: VerifyHook<A, R> | undefined;
  /** The same hook under the saga's name, for `compensatable` tools. Give `verify` or `reconcile`, not both. */
  readonly reconcile?: VerifyHook<A, R> | undefined;
  /**
   * The largest serialized result kept (bytes, a whole number ≥ 1), measured after redaction and before
   * encryption. Default 1 MiB.
   */
  readonly maxResultBytes?: number | undefined;
  /**
   * Result fields never stored: dotted paths (`["card.number", "token"]`), stored as `"[redacted]"`.
   * The first caller gets the full result; every replay gets the redacted form.
   */
  readonly redact?: readonly string[] | undefined;
  /**
   * Keep a preview of the arguments with an outcome recorded as unknown, so the person who resolves it
   * in the review queue (`idempotool review`, the console) sees what the call was for: at most 1,000
   * characters of their JSON, with the `redact` paths applied, sealed with `encryption`. Default false:
   * arguments are never stored, only their fingerprint.
   */
  readonly reviewPreview?: boolean | undefined;
  /**
   * Encrypt stored results and failures (AES-256-GCM) with your keys, each bound to its record (scope,
   * key, tool, fingerprint) and to the status it was settled with. New records use `current`; older
   * ones are opened by the key id they carry, so keep a retired key until its records expire. A value
   * no configured key opens for this record, or one that is not sealed or missing (unless
   * `acceptPlaintext`), is an error (`ResultUndecryptableError`), never garbage. Also keys the stored
   * fingerprints (see `fingerprintKeys`). See docs/results-at-rest.md.
   */
  readonly encryption?: EncryptionOptions | undefined;
  /**
   * Store HMAC-SHA-256 fingerprints of the arguments under your secrets instead of plain SHA-256, so
   * arguments with little entropy (a 6-digit code) cannot be recovered from a store dump. Default: keys
   * derived from `encryption` when it is given, otherwise plain SHA-256; `false` keeps plain SHA-256.
   * Records fingerprinted under a retired key still match, as long as the key is kept.
   */
  readonly fingerprintKeys?: FingerprintKeyOptions | false | undefined;
  /**
   * Opt-in near-duplicate hint (docs/concepts.md, "Near-duplicates across turns"): when a call under a new
   * key matches, on these fields, a call of this tool that completed in the same scope within `windowMs`
   * (default 60 s), it still runs, and its envelope carries `recent_similar_call` so the agent can ask the
   * user before acting twice. `windowMs` is whole ms from 1 to ten years.
   */
  readonly similar?:
    | {
        readonly fields: FieldList<A> | ((args: A) => unknown);
        readonly windowMs?: number | undefined;
      }
    | undefined;
  /** Injectable time, for tests. */
  readonly clock?: Clock | undefined;
  /** Called synchronously for every event; a hook that throws is ignored. */
  readonly onEvent?: ((event: IdempotencyEvent) => void) | undefined;
}

/** Options of {@link idempotent}: the record options, with the tool's name and how a key is derived. */
export interface IdempotentOptions<A, R> extends RecordOptions<A, R> {
  /** The tool's name, kept in every record: 1–200 characters of well-formed Unicode. */
  readonly name: string;
  /** Derives the key from the arguments when the call gives none (for integrations). */
  readonly key?: ((args: A, call: CallOptions) => string | undefined) | undefined;
}

export interface ResolvedOptions<A, R> {
  readonly name: string;
  readonly store: IdempotencyStore;
  readonly effect: Effect;
  readonly ttlMs: number;
  readonly leaseMs: number;
  readonly waitMs: number;
  readonly significant: ((args: A) => unknown) | undefined;
  readonly bigint: "reject" | "string";
  readonly key: ((args: A, call: CallOptions) => string | undefined) | undefined;
  readonly verify: VerifyHook<A, R> | undefined;
  readonly maxResultBytes: number;
  /** Redaction and encryption of stored results and failures, keyed fingerprints; undefined: all plain. */
  readonly codec: ResultCodec | undefined;
  readonly reviewPreview: boolean;
  readonly similar: ResolvedSimilar<A> | undefined;
  readonly clock: Clock;
  readonly onEvent: ((event: IdempotencyEvent) => void) | undefined;
}

export const defaults = {
  ttlMs: 24 * 60 * 60 * 1000,
  leaseMs: 60_000,
  waitMs: 10_000,
  maxResultBytes: 1024 * 1024,
  similarWindowMs: 60_000,
} as const;

const owner = "idempotent()";
const warnBelowTtlMs = 60 * 60 * 1000;
const effects = new Set<string>(Object.values(Effect));

/** Validate and complete the options once, at configuration time, naming the option at fault. */
export function resolveOptions<A, R>(options: IdempotentOptions<A, R>): ResolvedOptions<A, R> {
  if (typeof options !== "object" || options === null) invalidOption(owner, "options", "must be an object");
  toolNameOption(owner, "name", options.name);
  const store = options.store;
  if (typeof store !== "object" || store === null || typeof store.claim !== "function") {
    invalidOption(owner, "store", "must be an idempotency store (memoryStore(), sqliteStore(), …)");
  }
  const effect = options.effect ?? Effect.irreversible;
  if (!effects.has(effect)) {
    invalidOption(owner, "effect", `must be one of ${[...effects].map((e) => `"${e}"`).join(", ")}`);
  }
  // Bounded so a timer can hold the lease and the wait, and `now + leaseMs + ttlMs` is always a date.
  const ttlMs = durationOption(owner, "ttlMs", options.ttlMs, defaults.ttlMs, { max: maxTtlMs });
  const leaseMs = durationOption(owner, "leaseMs", options.leaseMs, defaults.leaseMs);
  const waitMs = durationOption(owner, "waitMs", options.waitMs, defaults.waitMs, { min: 0 });
  const maxResultBytes = sizeOption(owner, "maxResultBytes", options.maxResultBytes, defaults.maxResultBytes);
  if (options.verify && options.reconcile)
    invalidOption(owner, "reconcile", "give either verify or reconcile, not both");
  for (const hook of ["verify", "reconcile", "key", "onEvent"] as const) {
    if (options[hook] !== undefined && typeof options[hook] !== "function") {
      invalidOption(owner, hook, "must be a function");
    }
  }
  if (options.bigint !== undefined && options.bigint !== "reject" && options.bigint !== "string") {
    invalidOption(owner, "bigint", 'must be "reject" or "string"');
  }
  if (ttlMs < warnBelowTtlMs) {
    warn(
      `idempotent(${options.name}): ttlMs is ${ttlMs} ms. Below 1 h, a retry after the window runs the tool again.`,
      "IDEMPOTOOL_SHORT_TTL",
    );
  }
  return {
    name: options.name,
    store,
    effect,
    ttlMs,
    leaseMs,
    waitMs,
    significant: significantPicker(options.name, "significant", options.significant),
    bigint: options.bigint ?? "reject",
    key: options.key,
    verify: options.verify ?? options.reconcile,
    maxResultBytes,
    codec: resolveCodec(options.redact, options.encryption, invalidOptionFor(owner), options.fingerprintKeys),
    reviewPreview: booleanOption("reviewPreview", options.reviewPreview),
    similar: resolveSimilar(options.name, options.similar),
    clock: options.clock ?? systemClock,
    onEvent: options.onEvent,
  };
}

function booleanOption(option: string, value: unknown): boolean {
  if (value === undefined) return false;
  if (typeof value !== "boolean") invalidOption(owner, option, "must be true or false");
  return value;
}

function resolveSimilar<A>(
  name: string,
  similar: IdempotentOptions<A, unknown>["similar"],
): ResolvedSimilar<A> | undefined {
  if (similar === undefined) return undefined;
  if (typeof similar !== "object" || similar === null)
    invalidOption(owner, "similar", "must be { fields, windowMs? }");
  const pick = significantPicker(name, "similar.fields", similar.fields);
  if (pick === undefined)
    invalidOption(owner, "similar.fields", "must be an array of field names or a function");
  const windowMs = durationOption(owner, "similar.windowMs", similar.windowMs, defaults.similarWindowMs, {
    max: maxTtlMs,
  });
  return { pick, windowMs };
}

function significantPicker<A>(
  tool: string,
  option: string,
  fields: FieldList<A> | ((args: A) => unknown) | undefined,
) {
  if (fields === undefined || typeof fields === "function") return fields;
  const names = fieldListOf(fields, (problem) =>
    invalidOption(owner, option, `${problem} (or be a function)`),
  );
  return (args: A): unknown => pickFields(args, names, tool, option);
}

/** A warning through `process.emitWarning` (Node, Deno and Bun have it), else the console. */
function warn(message: string, code: string): void {
  const emitWarning = globalThis.process?.emitWarning;
  if (typeof emitWarning === "function") emitWarning.call(globalThis.process, message, { code });
  else console.warn(`(${code}) ${message}`);
}
