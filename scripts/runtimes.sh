#!/usr/bin/env bash
# Runs the built package (dist/) on Deno and on Bun: the store conformance suite on memoryStore,
# tieredStore and sqliteStore on the runtime's own SQLite, the send_email scenario through the repeat
# sources, idempotool/http and idempotool/mcp (test/runtimes/run.ts, one line per case). Installs each
# runtime from npm (the official binaries in the deno and bun packages) into a cache folder the first time.
#
# Usage: npm run build && scripts/runtimes.sh [deno] [bun]      (default: both)
# Cache: $IDEMPOTOOL_CACHE_DIR, default ${XDG_CACHE_HOME:-~/.cache}/idempotool (deno/ and bun/ in it), as scripts/node.sh.
# Versions: $IDEMPOTOOL_DENO_VERSION (default below) and $IDEMPOTOOL_BUN_VERSION.
#
# It fails, never skips: when dist/ is missing, when a runtime cannot be installed, or when any case fails.
set -euo pipefail
cd "$(dirname "$0")/.."

deno_version="${IDEMPOTOOL_DENO_VERSION:-2.9.6}"
bun_version="${IDEMPOTOOL_BUN_VERSION:-1.4.5}"
cache="${IDEMPOTOOL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/idempotool}"

if ! [[ -f dist/index.js && -f dist/sqlite/index.js ]]; then
  echo "scripts/runtimes.sh: dist/ is missing: run npm run build first" >&2
  exit 1
fi

# The version a runtime binary reports ("deno 2.9.6 (stable, …)" or "1.4.5"), or nothing.
reported_version() {
  "$1" --version 2>/dev/null | head -n 1 | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -n 1 || true
}

# Installs $1 (deno or bun) at version $2 into the cache unless it is there; prints the binary's path.
install_runtime() {
  local name=$1 version=$2
  local dir="$cache/$name"
  local bin="$dir/node_modules/.bin/$name"
  if [[ "$(reported_version "$bin")" != "$version" ]]; then
    echo "scripts/runtimes.sh: installing $name@$version into $dir" >&2
    mkdir -p "$dir"
    if ! npm install --prefix "$dir" --no-save --no-audit --no-fund --loglevel=error "$name@$version" >&2; then
      echo "scripts/runtimes.sh: could not install $name@$version: the $name checks did not run" >&2
      return 1
    fi
  fi
  local got
  got="$(reported_version "$bin")"
  if [[ $got != "$version" ]]; then
    echo "scripts/runtimes.sh: $bin reports version '${got:-none}', not $version" >&2
    return 1
  fi
  echo "$bin"
}

runtimes=("$@")
if [[ ${#runtimes[@]} -eq 0 ]]; then runtimes=(deno bun); fi

status=0
for runtime in "${runtimes[@]}"; do
  case $runtime in
    deno)
      deno="$(install_runtime deno "$deno_version")" || exit 1
      echo "scripts/runtimes.sh: Deno $deno_version: test/runtimes/run.ts" >&2
      # Sloppy imports let the runner's own .ts files import each other as .js, as tsc wants them spelled.
      # Read and write: SQLite's temporary files; env: the temporary folder's name (TMPDIR).
      "$deno" run --unstable-sloppy-imports --no-lock --no-prompt --allow-read --allow-write --allow-env \
        test/runtimes/run.ts || status=1
      ;;
    bun)
      bun="$(install_runtime bun "$bun_version")" || exit 1
      echo "scripts/runtimes.sh: Bun $bun_version: test/runtimes/run.ts" >&2
      # The project's tsconfig paths point the package's name at src/; this tsconfig has none (see it).
      "$bun" --no-install --tsconfig-override=test/runtimes/tsconfig.bun.json test/runtimes/run.ts || status=1
      ;;
    *)
      echo "scripts/runtimes.sh: unknown runtime '$runtime' (deno or bun)" >&2
      exit 1
      ;;
  esac
done
exit $status
