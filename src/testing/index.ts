/**
 * Test helpers for idempotool and for stores written by others: a fake clock that moves only when
 * told to, the store conformance suite every store must pass, `chaos()` (a tool under every repeat
 * source, effects counted by a probe) and `recordToolCalls()` (the same call twice in one turn).
 *
 * @example
 * import { it } from "vitest";
 * import { fakeClock, storeConformanceCases } from "idempotool/testing";
 *
 * for (const c of storeConformanceCases({ name: "my store", create: () => ({ store: myStore(), clock: fakeClock() }) })) {
 *   it(c.name, c.run);
 * }
 *
 * @module
 */
export type { ChaosOptions, ChaosProgress, ChaosReport, SourceResult } from "./chaos.js";
export { chaos, SourceVerdict } from "./chaos.js";
export type { ChaosContext, ChaosFactory, ChaosTarget, ToolUnderTest } from "./chaos-module.js";
export { chaosProbe } from "./chaos-probe.js";
export { RepeatSource } from "./chaos-sources.js";
export type { ConformanceCase, ConformanceHarness, ConformanceOptions } from "./conformance.js";
export { storeConformanceCases } from "./conformance.js";
export type { FakeClock } from "./fake-clock.js";
export { fakeClock } from "./fake-clock.js";
export type { DuplicateToolCall, RecordedCall, ToolCallRecorder } from "./record-tool-calls.js";
export { DuplicateToolCallsError, recordToolCalls } from "./record-tool-calls.js";
