// @ts-check
/**
 * `npm run mutate`: mutation testing of the record protocol (docs/protocol.md, "The tests behind the code").
 * @type {import('@stryker-mutator/api/core').PartialStrykerOptions}
 */
export default {
  testRunner: "vitest",
  vitest: { configFile: "vitest.mutate.config.ts", related: false },
  coverageAnalysis: "perTest",
  mutate: [
    "src/core/idempotent.ts",
    "src/core/execute.ts",
    "src/core/call.ts",
    "src/core/keys.ts",
    "src/core/lease.ts",
    "src/core/in-flight.ts",
    "src/core/memory-store.ts",
    "src/core/canonical-json.ts",
  ],
  concurrency: 2,
  timeoutMS: 3_000,
  reporters: ["clear-text", "progress", "json"],
  jsonReporter: { fileName: "reports/mutation/mutation.json" },
  // Each sandbox holds only what the tests load.
  ignorePatterns: ["/*", "!/src", "!/test", "!/package.json", "!/tsconfig.json", "!/vitest.*.ts"],
  tempDirName: ".stryker-tmp",
  // Results are kept in the repository: a run tests again only the mutants whose code or covering tests
  // changed since (`npm run mutate -- --force` tests them all).
  incremental: true,
  incrementalFile: "test/mutation/incremental.json",
  cleanTempDir: "always",
};
