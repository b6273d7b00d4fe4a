#!/usr/bin/env bash
# npm run demo: builds the package and runs `idempotool demo` on the embedded SQLite default. It runs on the
# Node that runs npm when that is a version the package supports (22.23+ or 24, whose built-in node:sqlite
# needs nothing compiled); on any other Node it runs on Node 24, which scripts/node.sh installs
# from the npm registry into a cache folder the first time, and says so.
#
# Usage: npm run demo [-- <idempotool demo options…>]
set -euo pipefail
cd "$(dirname "$0")/.."
npm run build --silent
# The versions package.json's engines claims: ^22.23 or ^24 (older 22s lack parts of node:sqlite).
if node -e '
  const [major, minor] = process.versions.node.split(".").map(Number);
  process.exit((major === 22 && minor >= 23) || major === 24 ? 0 : 1);
'; then
  exec node dist/cli/main.js demo "$@"
fi
echo "npm run demo: Node $(node --version) is not one the package supports (^22.23 or ^24); running the demo on Node 24" >&2
exec scripts/node.sh 24 dist/cli/main.js demo "$@"
