#!/usr/bin/env bash
# npm run mutate: mutation testing of the record protocol. The decision table first (judged by its own
# tests), then its interpreter, the stores' core and the keys; then each file's score is checked against its
# target and the committed list of surviving mutants (scripts/mutation-survivors.ts).
#
# Incremental: test/mutation/*.json keep every mutant's result, committed, so a run tests again only the
# mutants whose code or covering tests changed (minutes), and `npm run test:all` runs it every time.
#
# Usage: npm run mutate [-- --force]      --force tests every mutant again (about 40 minutes on two cores)
set -euo pipefail
cd "$(dirname "$0")/.."

# Stryker's test runners load better-sqlite3, built for Node 24 here (scripts/node.sh fetches it).
node24="$(scripts/node.sh 24 --path)"
export PATH="$(dirname "$node24"):$PATH"
node_modules/.bin/stryker run stryker.decide.config.mjs "$@"
node_modules/.bin/stryker run stryker.config.mjs "$@"
node --import tsx scripts/mutation-survivors.ts
