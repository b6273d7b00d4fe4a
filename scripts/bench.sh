#!/usr/bin/env bash
# npm run bench: builds the library, then runs bench/run.ts on Node 24, or on the Node that --node names, with
# better-sqlite3 built for it (the bench measures sqliteStore on both drivers), through scripts/node.sh.
#
# Usage: npm run bench -- [--node <major>] [bench options…]      (npm run bench -- --help lists them)
#   e.g. npm run bench -- --node 22 --quick
# --node stays among the options bench/run.ts gets: it checks that it runs on that Node, and the results
# record the command as given.
set -euo pipefail
cd "$(dirname "$0")/.."

major=24
previous=""
for arg in "$@"; do
  case "$arg" in
    --node=*) major="${arg#--node=}" ;;
    *) [[ $previous == --node ]] && major="$arg" ;;
  esac
  previous="$arg"
done
if [[ $previous == --node ]]; then
  echo "npm run bench: --node needs a Node major version, e.g. --node 22" >&2
  exit 2
fi

npm run build --silent
exec scripts/node.sh "$major" --with-better-sqlite3 --expose-gc --import tsx bench/run.ts "$@"
