/**
 * @module idempotool
 *
 * Make the side-effectful tools of LLM agents safe to call twice. The caller is at-least-once;
 * `idempotent()` makes the tool at-most-once: every repeat of one intended action becomes a no-op
 * that returns the original outcome.
 *
 * This entry imports nothing heavy: stores that need a driver live in their own subpaths
 * (`idempotool/sqlite`, …).
 */

export { type CanonicalJsonOptions, canonicalJson } from "./core/canonical-json.js";
export { type Clock, type SleepOptions, systemClock } from "./core/clock.js";
export {
  ApprovalMismatchError,
  ErrorCode,
  IdempotencyError,
  isIdempotencyError,
  KeyConflictError,
  KeyInUseError,
  LeaseLostError,
  OutcomeUnknownError,
  ResultTooLargeError,
  ResultUndecryptableError,
  ResultUnserializableError,
  StoreFullError,
  StoreUnavailableError,
  type UndecryptableReason,
} from "./core/errors.js";
export type { IdempotencyEvent } from "./core/events.js";
export type { ArgumentField, FieldList } from "./core/field-list.js";
export { fingerprint, sha256Hex } from "./core/fingerprint.js";
export {
  type CallWithKey,
  type Envelope,
  type IdempotentTool,
  type IdempotentToolWithDerivedKey,
  idempotent,
  type Tool,
  type ToolContext,
} from "./core/idempotent.js";
export type { FingerprintKeyOptions } from "./core/keyed-fingerprint.js";
export { keys, validateKey } from "./core/keys.js";
export { type MemoryStoreOptions, memoryStore } from "./core/memory-store.js";
export { maxArgumentDepth, maxTimerMs, maxTtlMs } from "./core/option-checks.js";
export {
  type CallOptions,
  Effect,
  EventType,
  type IdempotentOptions,
  type RecordOptions,
  type VerifyContext,
  type VerifyHook,
  type VerifyOutcome,
} from "./core/options.js";
export {
  DefinitiveFailure,
  definitiveFailure,
  NotExecuted,
  neverSent,
  notExecuted,
  ReplayedFailureError,
  type StoredFailure,
} from "./core/outcomes.js";
export type { EncryptionOptions } from "./core/result-codec.js";
export type { ResultProblem } from "./core/serialize.js";
export type { RecentSimilarCall } from "./core/similar.js";
export {
  type ClaimRequest,
  type ClaimResult,
  type IdempotencyRecord,
  type IdempotencyStore,
  type ListPage,
  type ListQuery,
  type PurgeRequest,
  type RecordId,
  RecordStatus,
  type ReleaseRequest,
  type RenewRequest,
  type SettleRequest,
  type TakeoverRequest,
} from "./core/store.js";
export { type TieredStoreOptions, tieredStore } from "./core/tiered-store.js";
// Types the agent integrations share (what a model reads back, a tool bound to a durable step): one home
// here, where they cost no import at runtime.
export type { EnvelopeOutput, MergedOutput, ModelOutput, ReplayMarker } from "./tool-calls/model-output.js";
export type { StepCall, StepTool } from "./tool-calls/step-bound-tool.js";
