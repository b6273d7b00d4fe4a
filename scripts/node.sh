#!/usr/bin/env bash
# Runs a command on a given Node major version, installed from the npm registry (the official binary inside
# node-linux-<arch>@<major>) into a cache folder the first time. The project claims Node 22 and 24, and the
# machine's own Node may be neither: the tests, the benchmark and the demo run through this script.
#
# Usage: scripts/node.sh <major> [--with-better-sqlite3] <node arguments…>
#   e.g. scripts/node.sh 24 node_modules/vitest/vitest.mjs run src/sqlite
#        scripts/node.sh 22 --with-better-sqlite3 node_modules/vitest/vitest.mjs run
#        scripts/node.sh 24 --path        prints the binary's path and nothing else
#
# --with-better-sqlite3 makes sure better-sqlite3 (a devDependency, kept to test that driver) has its native
# addon built for this Node. An addon loads only in the Node ABI it was built for, so each ABI's build is
# kept beside the others in node_modules/better-sqlite3/lib/binding/node-v<abi>-<platform>-<arch>/, where
# the package's loader looks for it; the one `npm install` built is moved there too. A build takes about a
# minute and is cached in the cache folder, keyed by better-sqlite3's version and the ABI.
#
# The chosen Node's folder comes first on PATH, so a test that starts `node` or `npm` gets the same Node.
# Cache: $IDEMPOTOOL_CACHE_DIR, default ${XDG_CACHE_HOME:-~/.cache}/idempotool.
# It fails, never falls back to another Node: when the version cannot be installed, the command did not run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
me="scripts/node.sh"

major="${1:-}"
if ! [[ $major =~ ^[0-9]+$ ]]; then
  echo "usage: $me <major> [--with-better-sqlite3] <node arguments…>   (e.g. $me 24 --version)" >&2
  exit 2
fi
shift
with_better_sqlite3=false
print_path=false
case "${1:-}" in
  --with-better-sqlite3) with_better_sqlite3=true; shift ;;
  --path) print_path=true; shift ;;
esac

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) platform=linux; arch=x64 ;;
  Linux-aarch64 | Linux-arm64) platform=linux; arch=arm64 ;;
  Darwin-arm64) platform=darwin; arch=arm64 ;;
  Darwin-x86_64) platform=darwin; arch=x64 ;;
  *)
    echo "$me: no Node package on npm for $(uname -s) $(uname -m); install Node $major yourself and run the command with it" >&2
    exit 1
    ;;
esac
package="node-$platform-$arch"
cache="${IDEMPOTOOL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/idempotool}"
prefix="$cache/node$major"
home="$prefix/node_modules/$package"
node="$home/bin/node"

if ! [[ -x $node ]] || [[ "$("$node" --version 2>/dev/null)" != "v$major."* ]]; then
  echo "$me: installing Node $major ($package@$major from the npm registry) into $prefix" >&2
  mkdir -p "$prefix"
  if ! npm install --prefix "$prefix" --no-save --no-package-lock --no-audit --no-fund --loglevel=error "$package@$major" >&2; then
    echo "$me: could not install $package@$major: nothing ran on Node $major" >&2
    exit 1
  fi
fi
version="$("$node" --version)"
if [[ $version != "v$major."* ]]; then
  echo "$me: $node is $version, not Node $major" >&2
  exit 1
fi
if $print_path; then
  echo "$node"
  exit 0
fi

# Makes sure the better-sqlite3 installed at $1 has a native addon built for this Node. Releases from 13 on
# ship prebuilt Node-API addons that load in every Node (nothing to do); older ones are built per ABI.
ensure_better_sqlite3() {
  local module="$1"
  abi="$("$node" -p process.versions.modules)"
  binding="$module/lib/binding/node-v$abi-$platform-$arch"
  # What npm install built is for the Node that ran it: move it beside the others, under its own ABI.
  built="$module/build/Release/better_sqlite3.node"
  if [[ -f $built ]]; then
    built_abi="$(sed -n 's/^ *"node_module_version": *\([0-9]*\).*/\1/p' "$module/build/config.gypi" 2>/dev/null | head -n 1)"
    if [[ -n $built_abi ]]; then
      mkdir -p "$module/lib/binding/node-v$built_abi-$platform-$arch"
      # Another run may have moved it first: only a build still there and not moved is an error.
      mv -f "$built" "$module/lib/binding/node-v$built_abi-$platform-$arch/better_sqlite3.node" 2>/dev/null ||
        [[ ! -f $built ]]
    else
      echo "$me: cannot tell which Node built $built; leaving it (it may shadow the other builds)" >&2
    fi
  fi
  # Whether an addon loads in this Node: a build against another Node's headers does not (ABI mismatch).
  loads() { "$node" -e 'process.dlopen({ exports: {} }, process.argv[1])' "$1" 2>/dev/null; }
  if [[ -f $binding/better_sqlite3.node ]] && ! loads "$binding/better_sqlite3.node"; then
    echo "$me: the better-sqlite3 build for Node $version (ABI $abi) does not load in it; replacing it" >&2
    rm -f "$binding/better_sqlite3.node"
  fi
  if ! [[ -f $binding/better_sqlite3.node ]]; then
    bs3_version="$("$node" -p "require('$module/package.json').version")"
    stored="$cache/better-sqlite3/$bs3_version/node-v$abi-$platform-$arch/better_sqlite3.node"
    if [[ -f $stored ]] && ! loads "$stored"; then rm -f "$stored"; fi
    if ! [[ -f $stored ]]; then
      echo "$me: building better-sqlite3 $bs3_version for Node $version (ABI $abi): about a minute, once" >&2
      work="$(mktemp -d)"
      trap 'rm -rf "$work"' EXIT
      cp -R "$module" "$work/better-sqlite3"
      rm -rf "$work/better-sqlite3/build" "$work/better-sqlite3/lib/binding"
      gyp="$(dirname "$(command -v npm)")/../lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js"
      [[ -f $gyp ]] || gyp="$(npm root -g)/npm/node_modules/node-gyp/bin/node-gyp.js"
      # npm hands its own nodedir (often the system Node's headers) to node-gyp through the environment
      # of every script it runs, and node-gyp prefers it: name this Node's headers there too.
      if ! (cd "$work/better-sqlite3" && PATH="$home/bin:$PATH" npm_config_nodedir="$home" \
        "$node" "$gyp" rebuild --release --nodedir="$home" --jobs="$(nproc 2>/dev/null || echo 2)" \
        >"$work/build.log" 2>&1) || ! loads "$work/better-sqlite3/build/Release/better_sqlite3.node"; then
        tail -n 30 "$work/build.log" >&2
        echo "$me: could not build better-sqlite3 for Node $version (needs python3, make and a C++ compiler)" >&2
        exit 1
      fi
      mkdir -p "$(dirname "$stored")"
      # Each run copies under its own name, so two runs building at once never write into one file.
      cp "$work/better-sqlite3/build/Release/better_sqlite3.node" "$stored.tmp.$$"
      mv -f "$stored.tmp.$$" "$stored"
      # exec below replaces this shell without running the EXIT trap: remove the working copy now.
      rm -rf "$work"
      trap - EXIT
    fi
    mkdir -p "$binding"
    cp "$stored" "$binding/better_sqlite3.node.tmp.$$"
    mv -f "$binding/better_sqlite3.node.tmp.$$" "$binding/better_sqlite3.node"
  fi
}

if $with_better_sqlite3; then
  if ! [[ -f $root/node_modules/better-sqlite3/package.json ]]; then
    echo "$me: better-sqlite3 is not installed (npm ci installs it as a devDependency)" >&2
    exit 1
  fi
  # better-sqlite3 under its own name, and older majors kept under an alias (better-sqlite3-12) to test them.
  for module in "$root"/node_modules/better-sqlite3 "$root"/node_modules/better-sqlite3-*; do
    [[ -f $module/package.json && ! -d $module/prebuilds ]] || continue
    ensure_better_sqlite3 "$module"
  done
fi

export PATH="$home/bin:$PATH"
exec "$node" "$@"
