/**
 * Test helpers for idempotool and for stores written by others: a fake clock that moves only when
 * told to, and the store conformance suite every store must pass.
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
