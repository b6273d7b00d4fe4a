#!/usr/bin/env bash
# npm run demo: builds the package and runs `idempotool demo` on the embedded SQLite default. It runs on the
# Node that runs npm when that is Node 22 or later (the versions the package supports, whose built-in
# node:sqlite needs nothing compiled); on an older Node it runs on Node 24, which scripts/node.sh installs
# from the npm registry into a cache folder the first time, and says so.
#
# Usage: npm run demo [-- <idempotool demo options…>]
set -euo pipefail
cd "$(dirname "$0")/.."
npm run build --silent
major="$(node -p 'process.versions.node.split(".")[0]')"
if ((major >= 22)); then
  exec node dist/cli/main.js demo "$@"
fi
echo "npm run demo: Node $(node --version) is older than the package supports (22 or 24); running the demo on Node 24" >&2
exec scripts/node.sh 24 dist/cli/main.js demo "$@"
