#!/usr/bin/env bash
# npm run test:all: type-check, lint, build, and check the model of the record protocol and the committed
# mutation testing results (side by side), then run the whole suite (servers, processes and all; `npm test`
# is the quick part) once on each Node version the package claims (package.json "engines"), with every
# SQLite driver required: Node's built-in node:sqlite, better-sqlite3 and libsql. Each Node comes from
# scripts/node.sh (installed from the npm registry into a cache folder the first time), whatever Node runs
# npm.
#
# Usage: npm run test:all [-- <vitest options…>]
#   Options go to every vitest run. A JSON report (--outputFile.json=F) is written once per Node version:
#   F with ".node<major>" before its extension (results.json → results.node24.json).
#   IDEMPOTOOL_TEST_NODES="24" runs the suite on a subset (default: "24 22").
#   IDEMPOTOOL_TEST_WORKERS: test files run side by side (default: one more than the number of cores).
#   The first Node runs every file; the later ones leave out the files whose outcome does not depend on
#   the Node running vitest (`once` below: Deno and Bun, workerd, spin), and run the store scenarios
#   (test/fixtures/stores.ts) on the stores that live inside Node (memory and SQLite on both drivers),
#   unless IDEMPOTOOL_STORES is set. A server store's atomicity is the server's, and its client code runs
#   on every Node through its own suite (postgres-store, redis-store, dynamodb-store, ...).
set -uo pipefail
cd "$(dirname "$0")/.."

step() {
  echo "npm run test:all: $*" >&2
  "$@" || { echo "npm run test:all: failed: $*" >&2; exit 1; }
}
# spin, a C compiler, PostgreSQL and Redis: installed or started where allowed, else named (scripts/provision.sh).
step scripts/provision.sh

# npm scripts side by side: each is one thread, and together they keep the machine's cores busy. The output
# of each that fails is shown.
checks() {
  local logs failed=0 i pids=()
  logs="$(mktemp -d)"
  for name in "$@"; do
    npm run "$name" --silent >"$logs/$name.log" 2>&1 &
    pids+=("$!")
  done
  i=0
  for name in "$@"; do
    if ! wait "${pids[$i]}"; then
      echo "npm run test:all: failed: npm run $name" >&2
      cat "$logs/$name.log" >&2
      failed=1
    fi
    i=$((i + 1))
  done
  rm -rf "$logs"
  return $failed
}
echo "npm run test:all: type-check, lint, build, check the model and the committed mutation results" >&2
checks typecheck lint build check:model check:mutation || exit 1

# The store rows (test/fixtures/stores.ts) whose code runs inside Node itself.
in_node_stores="memory,sqlite-node:sqlite,sqlite-better-sqlite3,sqlite-libsql,sqlite-mixed-drivers"
# Files whose outcome does not depend on the Node that runs vitest: the built package on Deno and Bun, the
# Workers in workerd, the model in spin, the provisioning script, the compiler's answer on the docs' code,
# and the MCP conformance suite (1 to 2 minutes; the proxy it drives runs on every Node in its own tests).
# The first Node runs them; the others leave them out.
once=(
  test/docs-code-types.test.ts
  test/mcp-conformance.test.ts
  test/runtimes.test.ts
  test/cloudflare-example.test.ts
  test/cloudflare-lease-renewals.test.ts
  test/cloudflare-released-tokens.test.ts
  test/cloudflare-store.test.ts
  test/cloudflare-stubs.test.ts
  test/cloudflare-worker-timers.test.ts
  test/model-table.test.ts
  test/provision.test.ts
)
# Test files side by side, one more than the cores: many files spend part of their time waiting on a process
# or a server, and vitest's default (one fewer than the cores) leaves a 2-core machine half idle. Measured on
# 2 cores: Node 24's suite 253 s with 2 workers, 212 s with 3 (4 % of the CPU idle). IDEMPOTOOL_TEST_WORKERS
# sets it.
workers="${IDEMPOTOOL_TEST_WORKERS:-$(($(nproc) + 1))}"

# suite <major> <first: true|false> <vitest options…>: the whole suite on one Node.
suite() {
  local major="$1" first="$2" args=() stores="${IDEMPOTOOL_STORES:-}" file
  shift 2
  if ! $first; then
    for file in "${once[@]}"; do args+=(--exclude "$file"); done
    stores="${IDEMPOTOOL_STORES:-$in_node_stores}"
  fi
  for arg in "$@"; do
    if [[ $arg == --outputFile.json=* ]]; then
      file="${arg#--outputFile.json=}"
      arg="--outputFile.json=${file%.json}.node$major.json"
    fi
    args+=("$arg")
  done
  echo "npm run test:all: the whole suite on Node $major, store scenarios on ${stores:-every store}" >&2
  IDEMPOTOOL_SQLITE_DRIVERS=node:sqlite,better-sqlite3,libsql IDEMPOTOOL_STORES="$stores" \
    scripts/node.sh "$major" --with-better-sqlite3 node_modules/vitest/vitest.mjs run --maxWorkers="$workers" \
    ${args[@]+"${args[@]}"} || { echo "npm run test:all: the suite failed on Node $major" >&2; return 1; }
}

# One Node after another: side by side they would only share the same two cores, and slow each other's
# timing-bound tests.
status=0
first=true
for major in ${IDEMPOTOOL_TEST_NODES:-24 22}; do
  suite "$major" "$first" "$@" || status=1
  first=false
done
exit $status
