import { defineConfig } from "vitest/config";

/** The tests that judge the decision table's mutants (stryker.decide.config.mjs). */
export default defineConfig({
  test: { include: ["src/core/decide.test.ts", "src/core/decide-load.test.ts"] },
});
