/**
 * The package as it runs on Deno and Bun (and Node): the store conformance suite on memoryStore,
 * tieredStore and sqliteStore on the runtime's own SQLite, the send_email scenario through the repeat
 * sources an agent meets, idempotool/http and idempotool/mcp. It imports the package by its name, so it
 * runs the built dist/ through package.json's exports.
 *
 * Run from the repository root after `npm run build`, as scripts/runtimes.sh does:
 *   deno run --unstable-sloppy-imports --no-lock --allow-read --allow-write --allow-env --allow-sys test/runtimes/run.ts
 *   bun --no-install --tsconfig-override=test/runtimes/tsconfig.bun.json test/runtimes/run.ts
 * Prints one line per case and `<Runtime>: N passed, N failed`; exits 1 when any case failed.
 */
import assert from "node:assert/strict";
import { memoryStore } from "idempotool";
import { sqliteStore } from "idempotool/sqlite";
import { runCases, runtime, tempFile } from "./harness.js";
import { integrationCases } from "./integration-cases.js";
import { opsCases } from "./ops-cases.js";
import { sendEmailCases } from "./send-email.js";
import { storeCases } from "./store-cases.js";

console.log(`idempotool on ${runtime.name} ${runtime.version}`);
const failed = await runCases([
  {
    // A runtime that followed the project's tsconfig paths would test src/ instead (see tsconfig.bun.json).
    name: "the package resolves by its name to the built dist/, through package.json's exports",
    run: async () => {
      for (const entry of ["idempotool", "idempotool/sqlite", "idempotool/http", "idempotool/mcp"]) {
        const resolved = import.meta.resolve(entry);
        assert.ok(/\/dist\/(?:[a-z]+\/)?index\.js$/.test(resolved), `${entry} resolved to ${resolved}`);
      }
    },
  },
  ...storeCases(),
  ...sendEmailCases("memoryStore", () => memoryStore()),
  ...sendEmailCases("sqliteStore", () => sqliteStore({ path: tempFile() })),
  ...integrationCases(),
  ...opsCases(),
]);
process.exitCode = failed > 0 ? 1 : 0;
