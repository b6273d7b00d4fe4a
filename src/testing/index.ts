/**
 * Test helpers for idempotool and for stores written by others: the store conformance suite every
 * store must pass, a fake clock that moves only when told to, and `recordToolCalls()` (the same call
 * twice in one turn). It loads no concrete store: `chaos()`, which runs a tool against SQLite, is in
 * `idempotool/chaos`.
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
export type { ConformanceCase, ConformanceHarness, ConformanceOptions } from "./conformance.js";
export { storeConformanceCases } from "./conformance.js";
export type { FakeClock } from "./fake-clock.js";
export { fakeClock } from "./fake-clock.js";
export type { DuplicateToolCall, RecordedCall, ToolCallRecorder } from "./record-tool-calls.js";
export { DuplicateToolCallsError, recordToolCalls } from "./record-tool-calls.js";
