/**
 * `idempotool/dbos`: side effects in DBOS steps that happen once, however often the step runs.
 *
 * DBOS runs each step at least once: a step that throws is retried, and a workflow whose process died
 * before DBOS recorded a step's output runs that step again on recovery. An effect inside such a step (an
 * email, a charge, a call to an API without idempotency keys) can therefore happen twice. Run it through
 * `idempotent()` under a key derived from the workflow's id and the step's id (`stepKey`, `stepTool`): every
 * run of one step shares the key, so the first outcome is replayed and the effect happens once.
 *
 * Nothing here imports DBOS: pass the `DBOS` class in.
 * @module
 */

export type { DbosContext } from "./step-key.js";
export { stepKey } from "./step-key.js";
export type { StepToolOptions } from "./step-tool.js";
export { stepTool } from "./step-tool.js";
