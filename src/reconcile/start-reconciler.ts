/** The reconciler on an interval, until its signal aborts. */
import { systemClock } from "../core/clock.js";
import { durationOption, invalidOption } from "../core/option-checks.js";
import type { ReconcileSummary } from "./decision.js";
import { type ReconcileOptions, reconcileOnce } from "./reconcile.js";

export interface StartReconcilerOptions extends ReconcileOptions {
  /** Pause between the end of one pass and the start of the next: whole ms from 1 to 2^31 − 1. */
  readonly intervalMs: number;
  /** Called after every pass. */
  readonly onSummary?: ((summary: ReconcileSummary) => void) | undefined;
  /** A pass that failed (the store unreachable); the next pass still runs. */
  readonly onError?: ((error: unknown) => void) | undefined;
}

const owner = "startReconciler()";

export interface RunningReconciler {
  /** Stop after the current record, and resolve once the loop has ended. */
  stop(): Promise<void>;
  /** Resolves when the loop ends (stopped or its signal aborted). */
  readonly done: Promise<void>;
}

/**
 * Run {@link reconcileOnce} every `intervalMs` until stopped.
 * @example
 * import { memoryStore } from "idempotool";
 * import { startReconciler } from "idempotool/reconcile";
 *
 * const reconciler = startReconciler({
 *   store: memoryStore(),
 *   tools: { send_email: { verify: async () => ({ status: "not_executed" }) } },
 *   intervalMs: 60_000,
 *   onSummary: (s) => console.log(`reconciled ${s.examined}`),
 * });
 * await reconciler.stop();
 */
export function startReconciler(options: StartReconcilerOptions): RunningReconciler {
  if (options?.intervalMs === undefined) invalidOption(owner, "intervalMs", "is required");
  durationOption(owner, "intervalMs", options.intervalMs);
  const controller = new AbortController();
  const outer = options.signal;
  const onAbort = () => controller.abort(outer?.reason);
  if (outer?.aborted) controller.abort(outer.reason);
  else outer?.addEventListener("abort", onAbort, { once: true });
  const clock = options.clock ?? systemClock;
  const signal = controller.signal;

  const loop = async () => {
    while (!signal.aborted) {
      try {
        const summary = await reconcileOnce({ ...options, signal });
        safely(() => options.onSummary?.(summary));
      } catch (error) {
        if (signal.aborted) break;
        safely(() => options.onError?.(error));
      }
      try {
        await clock.sleep(options.intervalMs, signal);
      } catch {
        break;
      }
    }
    outer?.removeEventListener("abort", onAbort);
  };
  const done = loop();
  return {
    done,
    async stop() {
      controller.abort(new Error("the reconciler was stopped"));
      await done;
    },
  };
}

function safely(run: () => void): void {
  try {
    run();
  } catch {
    // Observability must never stop the loop.
  }
}
