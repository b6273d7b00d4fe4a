/**
 * decide.ts compiles each event's table at its first decision, and a table with a gap (a situation no row
 * decides) throws there. This test decides every situation of every event in a fresh module, so a gap fails
 * it whichever event has it, which is what mutation testing (`npm run mutate`) counts.
 */
import { expect, it } from "vitest";

it("decides every situation of every event: each has a row that decides it", async () => {
  const { callEvents, decide, situationsOf } = await import("./decide.js");
  const situations = callEvents.flatMap((event) => situationsOf(event));
  expect(situations.length).toBeGreaterThan(0);
  for (const situation of situations) expect(decide(situation)).toEqual(expect.any(String));
});
