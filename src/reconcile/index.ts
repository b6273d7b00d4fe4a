/**
 * `idempotool/reconcile`: the OP-5 reconciler. It finds records nobody will finish — an in-progress claim
 * whose lease has passed (the worker crashed), or an outcome recorded as unknown — asks each tool's hook
 * what happened downstream, and settles, releases, compensates or flags them for review. Any store works.
 *
 * @example
 * import { memoryStore } from "idempotool";
 * import { reconcileOnce } from "idempotool/reconcile";
 *
 * const store = memoryStore();
 * const summary = await reconcileOnce({
 *   store,
 *   tools: {
 *     send_email: {
 *       verify: async (record) => ({ status: "completed", result: { messageId: `m-${record.key}` } }),
 *     },
 *   },
 * });
 * console.log(`${summary.completed} settled, ${summary.needsReview} need review`);
 *
 * @module
 */
export {
  Decision,
  type ReconcileDecision,
  type ReconcileSummary,
} from "./decision.js";
export type {
  CompensateContext,
  CompensateHook,
  ReconcileContext,
  ReconcileHook,
  ReconcileOutcome,
  ReconcileTool,
} from "./hooks.js";
export { type ReconcileOptions, reconcile, reconcileOnce } from "./reconcile.js";
export { CompensatedError } from "./settle-record.js";
export { type RunningReconciler, type StartReconcilerOptions, startReconciler } from "./start-reconciler.js";
