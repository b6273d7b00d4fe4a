#!/usr/bin/env bash
# npm run mutate: mutation testing of the record protocol. The decision table first (judged by its own
# tests), then its interpreter, the stores' core and the keys; then each file's score is checked against its
# target and the committed list of surviving mutants (scripts/mutation-survivors.ts).
#
# Incremental: test/mutation/*.json keep every mutant's result, committed, so a run tests again only the
# mutants whose code or covering tests changed. A change to the core or to its tests is committed with the
# results `npm run mutate` writes; `npm run test:all` runs `--check`, which tests what those results miss
# without rewriting them, so CI fails when the targets or the survivors list no longer hold.
#
# Usage: npm run mutate [-- --force | --check]
#   --force   tests every mutant again (about 25 minutes on two cores)
#   --check   starts from copies of the committed results and leaves them as they are
set -euo pipefail
cd "$(dirname "$0")/.."

decide=(--incrementalFile test/mutation/decide-incremental.json)
core=(--incrementalFile test/mutation/incremental.json)
if [[ ${1:-} == --check ]]; then
  shift
  copies="$(mktemp -d)"
  trap 'rm -rf "$copies"' EXIT
  cp test/mutation/decide-incremental.json test/mutation/incremental.json "$copies/"
  decide=(--incrementalFile "$copies/decide-incremental.json")
  core=(--incrementalFile "$copies/incremental.json")
fi

# Stryker's test runners load better-sqlite3, built for Node 24 here (scripts/node.sh fetches it).
node24="$(scripts/node.sh 24 --path)"
export PATH="$(dirname "$node24"):$PATH"
node_modules/.bin/stryker run stryker.decide.config.mjs "${decide[@]}" "$@"
node_modules/.bin/stryker run stryker.config.mjs "${core[@]}" "$@"
node --import tsx scripts/mutation-survivors.ts
