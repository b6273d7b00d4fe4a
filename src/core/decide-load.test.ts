/**
 * decide.ts compiles its table when the module loads, and a table with a gap (a situation no row decides)
 * throws there. A module that throws on import fails its test files before any test runs; this test turns
 * that into a failing test, which is what mutation testing (`npm run mutate`) counts.
 */
import { expect, it } from "vitest";

it("loads: every situation of every event has a row that decides it", async () => {
  const { callEvents, decide, situationsOf } = await import("./decide.js");
  const situations = callEvents.flatMap((event) => situationsOf(event));
  expect(situations.length).toBeGreaterThan(0);
  for (const situation of situations) expect(decide(situation)).toEqual(expect.any(String));
});
