#!/usr/bin/env bash
# Runs every pgbench script in this folder at 1 and 16 clients, interleaved (the order reversed every
# other repetition), -T 10 each, and prints tps and per-statement latency medians per script.
# Between repetitions it deletes the new keys (keeping the 10,000 seeded ones) and vacuums both tables.
#   scripts/node.sh 24 --import tsx bench/pg/setup.ts && bench/pg/run.sh [reps=3] [seconds=10] [outdir]
# SCRIPTS="claim_floor claim_store …" picks scripts; PGOPTIONS="-c synchronous_commit=off" (libpq reads it)
# takes the commit flush out of every transaction, leaving what the statements cost the server.
#   psql -h 127.0.0.1 -U postgres -d test -f bench/pg/teardown.sql
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
reps="${1:-3}"; secs="${2:-10}"; out="${3:-$(mktemp -d /tmp/pgcost.XXXXXX)}"
mkdir -p "$out"
scripts=(${SCRIPTS:-claim_floor claim_store claim_store_stmt claim_diag_fn_donothing claim_diag_fn_doupdate claim_insfirst settle_floor settle_store settle_store_noret replay_floor replay_store replay_insfirst})
psqlc() { psql -h 127.0.0.1 -U postgres -d test -qAt "$@"; }
for ((rep = 1; rep <= reps; rep++)); do
  order=("${scripts[@]}")
  if ((rep % 2 == 0)); then order=($(printf '%s\n' "${scripts[@]}" | tac)); fi
  for c in 1 16; do
    j=$((c == 1 ? 1 : 2))
    for s in "${order[@]}"; do
      pgbench -h 127.0.0.1 -U postgres -n -M prepared -r -c "$c" -j "$j" -T "$secs" -f "$here/$s.sql" test \
        >"$out/$s.c$c.r$rep.txt" 2>&1 || { echo "pgbench failed: $s c$c"; cat "$out/$s.c$c.r$rep.txt"; exit 1; }
      echo "rep $rep c$c $s $(grep -o 'tps = [0-9.]*' "$out/$s.c$c.r$rep.txt")" >&2
    done
  done
  psqlc -c "DELETE FROM pgcost.idem WHERE length(key) > 5" -c "DELETE FROM pgcost.floor WHERE length(key) > 5" \
    -c "VACUUM ANALYZE pgcost.idem" -c "VACUUM ANALYZE pgcost.floor" -c "CHECKPOINT"
done
echo "raw output: $out" >&2
# tps median, then each statement's median latency (ms), per script and client count.
for c in 1 16; do
  for s in "${scripts[@]}"; do
    tps=$(cat "$out/$s.c$c".r*.txt | grep -o 'tps = [0-9.]*' | awk '{print $3}' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
    lat=$(for f in "$out/$s.c$c".r*.txt; do
            awk '/statement latencies/ {on=1; next} on && /^ +[0-9.]+ +[0-9]+ +[A-Z]/ {n++; printf "%d %s\n", n, $1}' "$f"
          done | sort -k1,1n -k2,2g | awk '{v[$1]=v[$1] " " $2} END {for (k in v) {n=split(v[k], a, " "); printf "%s ", a[int((n+1)/2)]}}')
    printf '| %s | %s | %.0f | %s|\n' "$s" "$c" "$tps" "$lat"
  done
done
