import { defineConfig } from "vitest/config";

/**
 * The tests `npm run mutate` runs against each mutant: the ones that exercise the record protocol
 * (stryker.config.mjs lists the files it mutates). All of them run in-process on the memory store or
 * embedded SQLite, so a mutant is judged in seconds.
 */
export default defineConfig({
  test: {
    include: [
      "src/core/**/*.test.ts",
      // What an operator's resolution and the review queue read back through the core.
      "src/review/**/*.test.ts",
      "test/state-machine.property.test.ts",
      "test/lost-replies.test.ts",
      "test/option-limits.test.ts",
      "test/options-accept-undefined.test.ts",
      "test/conformance-broken-stores.test.ts",
    ],
    // The store scenarios (test/lost-replies.test.ts) on the stores in this process only.
    env: { IDEMPOTOOL_STORES: "memory,sqlite-node:sqlite" },
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
