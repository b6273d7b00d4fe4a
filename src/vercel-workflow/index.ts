/**
 * `idempotool/vercel-workflow`: side effects in Vercel Workflow steps (the `workflow` package) that happen
 * once, however often the step runs.
 *
 * The Workflow SDK runs each step at least once: a step that throws is retried, with the same `stepId` on
 * every attempt. An effect whose response was lost (the email went out, the connection dropped) is then
 * sent again. The SDK's advice is to pass `stepId` to APIs that take an idempotency key; for the ones that
 * do not, run the effect through `idempotent()` under a key derived from the `stepId` (`stepKey`,
 * `stepTool`): every attempt of one step shares the key, so the first outcome is replayed.
 *
 * Nothing here imports the Workflow SDK: pass `getStepMetadata` in.
 * @module
 */

export type { GetStepMetadata, StepMetadata } from "./step-key.js";
export { stepKey } from "./step-key.js";
export type { StepToolOptions } from "./step-tool.js";
export { stepTool } from "./step-tool.js";
