#!/usr/bin/env bash
# npm test: the inner loop. Type-checks, then runs every test that needs no server and starts no process
# (vitest.config.ts lists the others, which `npm run test:all` runs), in a couple of minutes, on any machine
# with Node 22 or 24 and nothing else: on another Node, scripts/node.sh fetches Node 24 from the npm registry.
#
# Usage: npm test [-- <vitest options…>]     e.g. npm test -- src/core
set -uo pipefail
cd "$(dirname "$0")/.."

echo "npm test: type-check" >&2
npm run typecheck --silent || { echo "npm test: failed: type-check" >&2; exit 1; }

major="$(node -p 'process.versions.node.split(".")[0]')"
case "$major" in
  22 | 24) node=(node) ;;
  *) node=(scripts/node.sh 24) ;;
esac
echo "npm test: the quick suite on Node $("${node[@]}" --version) (npm run test:all runs everything)" >&2
IDEMPOTOOL_SUITE=quick exec "${node[@]}" node_modules/vitest/vitest.mjs run "$@"
