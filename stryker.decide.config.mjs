// @ts-check
import base from "./stryker.config.mjs";

/**
 * The decision table on its own (`npm run mutate` runs this first): nearly all of its mutants are in the
 * module-level table, so each one reloads the module and runs every test given here. Its own tests judge
 * it; a table mutant they miss is a survivor, whatever the interpreter's tests would say.
 * @type {import('@stryker-mutator/api/core').PartialStrykerOptions}
 */
export default {
  ...base,
  mutate: ["src/core/decide.ts"],
  vitest: { configFile: "vitest.decide.config.ts", related: false },
  jsonReporter: { fileName: "reports/mutation/decide.json" },
  incrementalFile: "test/mutation/decide-incremental.json",
};
