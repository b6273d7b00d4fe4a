#!/usr/bin/env bash
# npm run test:all: type-check, lint, build, check the model of the record protocol, then run the whole
# suite (servers, processes and all; `npm test` is the quick part) once on each Node version the package claims (package.json "engines"), with both SQLite drivers required: Node's
# built-in node:sqlite and better-sqlite3. Each Node comes from scripts/node.sh (installed from the npm
# registry into a cache folder the first time), whatever Node runs npm.
#
# Usage: npm run test:all [-- <vitest options…>]
#   Options go to every vitest run. A JSON report (--outputFile.json=F) is written once per Node version:
#   F with ".node<major>" before its extension (results.json → results.node24.json).
#   IDEMPOTOOL_TEST_NODES="24" runs the suite on a subset (default: "24 22"). The first run also runs the
#   built package on Deno and Bun (test/runtimes.test.ts, through scripts/runtimes.sh).
#   The first Node runs the store scenarios (test/fixtures/stores.ts) on every store; the later ones on the
#   stores that live inside Node (memory and SQLite on both drivers), unless IDEMPOTOOL_STORES is set. A
#   server store's atomicity is the server's, and its client code runs on every Node through its own
#   suite (postgres-store, redis-store, dynamodb-store, ...): the cross-process races and crashes on
#   PostgreSQL, Redis, DynamoDB and Durable Objects are half the suite's time, and would not change.
set -uo pipefail
cd "$(dirname "$0")/.."

step() {
  echo "npm run test:all: $*" >&2
  "$@" || { echo "npm run test:all: failed: $*" >&2; exit 1; }
}
# spin, a C compiler, PostgreSQL and Redis: installed or started where allowed, else named (scripts/provision.sh).
step scripts/provision.sh
step npm run typecheck --silent
step npm run lint --silent
step npm run build --silent
step npm run check:model --silent

# The store rows (test/fixtures/stores.ts) whose code runs inside Node itself.
in_node_stores="memory,sqlite-node:sqlite,sqlite-better-sqlite3,sqlite-both-drivers"

status=0
first=true
for major in ${IDEMPOTOOL_TEST_NODES:-24 22}; do
  args=()
  stores="${IDEMPOTOOL_STORES:-}"
  if ! $first; then
    # test/runtimes.test.ts runs the built package on Deno and Bun, not on this Node: once is enough.
    args+=(--exclude test/runtimes.test.ts)
    stores="${IDEMPOTOOL_STORES:-$in_node_stores}"
  fi
  first=false
  for arg in "$@"; do
    if [[ $arg == --outputFile.json=* ]]; then
      file="${arg#--outputFile.json=}"
      base="${file%.json}"
      arg="--outputFile.json=$base.node$major.json"
    fi
    args+=("$arg")
  done
  echo "npm run test:all: the whole suite on Node $major" >&2
  echo "npm run test:all: store scenarios on ${stores:-every store}" >&2
  if ! IDEMPOTOOL_SQLITE_DRIVERS=node:sqlite,better-sqlite3 IDEMPOTOOL_STORES="$stores" \
    scripts/node.sh "$major" --with-better-sqlite3 node_modules/vitest/vitest.mjs run ${args[@]+"${args[@]}"}; then
    echo "npm run test:all: the suite failed on Node $major" >&2
    status=1
  fi
done
exit $status
