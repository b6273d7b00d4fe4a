/**
 * `idempotool/review`: records that need a person. The queue lists in-progress records whose lease has
 * passed and records whose outcome is unknown, oldest first; a resolution records what an operator found
 * out ("it was sent, here is the message id", "it never went out"), fenced like any settle and kept in a
 * trail with who, when and on what evidence. Any store works.
 *
 * @example
 * import { memoryStore } from "idempotool";
 * import { resolveRecord, reviewQueue } from "idempotool/review";
 *
 * const store = memoryStore();
 * const queue = await reviewQueue({ store });
 * for (const item of queue.items) {
 *   // After checking the provider: this one never went out.
 *   await resolveRecord({
 *     store,
 *     scope: item.scope,
 *     key: item.key,
 *     as: "not_executed",
 *     evidence: "no message for this key in the provider's log",
 *     by: "ops@example.com",
 *     expectVersion: item.version,
 *   });
 * }
 *
 * @module
 */
export type { OperatorResolution } from "../core/outcomes.js";
export {
  type AgeBucket,
  ageBuckets,
  type ResolutionDay,
  type ReviewCounts,
  type ReviewCountsOptions,
  reviewCounts,
} from "./counts.js";
export {
  needsReview,
  type ReviewItem,
  type ReviewQueue,
  type ReviewQueueOptions,
  type ReviewReason,
  reviewQueue,
  type VerifyNote,
} from "./queue.js";
export { type ResolveOptions, type ResolveToolOptions, resolveRecord } from "./resolve.js";
export { type RecordStory, type RecordStoryOptions, type RecordView, readRecordStory } from "./story.js";
export {
  type RecordBefore,
  type ResolveAs,
  readTrail,
  recordVersion,
  type TrailEntry,
  trailScope,
} from "./trail.js";
