#!/usr/bin/env bash
# The cell hierarchy on the GPU: each case run with --index auto
# (what the planner picks; its report says why), beside --index none (brute
# force) or the grid, and for the hierarchy's own cases with --index cells
# forced; result files must be identical byte for byte. Times are the
# report's compute_s (the hierarchy's host work included: index_s) and the
# process's wall clock. Logs, reports and a summary (cells.tsv) under $OUT.
#
# Usage (on the device, binary built here by `cargo build --release`):
#   bench/cells-gpu.sh [quick|big|host]
# quick: the 1M-point cases only (a few minutes); big: the 10M
# clustered log-binned counts and SDH of 10M points only (brute force of 10M
# points in log buckets takes minutes); neither: both.
# host: the hierarchy's host steps (trees, resolver, units, sorted copies:
# the report's timings.hierarchy) on 1M clustered points in 20 log buckets
# beside every pair, and on 10M with --index cells alone (every pair took
# 179.9 s on an H200); where BASE names another build's binary
# (main's, as target/main-twobs), its 10M --index cells runs too and the
# results must be identical. About 3-4 minutes.
# $OUT gets cells.tsv (a line a run), same.txt (the comparisons), gpu.txt
# and logs.tar.gz (every run's log and report).
set -uo pipefail
cd "$(dirname "$0")/.."
TWOBS=${TWOBS:-target/release/twobs}
OUT=${OUT:-/tmp/gpu-cells-out}
LOG=$(mktemp -d)
mkdir -p "$OUT"
export TWOBS_CACHE=${TWOBS_CACHE:-/tmp/twobs-cache}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$LOG/gpu.txt"
SUMMARY=$LOG/cells.tsv
printf 'case\tindex\trc\twall_ms\tcompute_s\tindex_s\ttrees_s\tresolve_s\tunits_s\tcopies_s\tchosen\twhy\n' >"$SUMMARY"
failed=0

run() { # name index args... (BIN: the binary, $TWOBS unless set)
  local name=$1 index=$2
  shift 2
  local start=$(date +%s%N)
  "${BIN:-$TWOBS}" run "$@" --backend cuda --quiet --index "$index" --report "$LOG/$name-$index.json" \
    --out "$LOG/$name-$index.npy" >"$LOG/$name-$index.log" 2>&1
  local rc=$? wall=$(( ($(date +%s%N) - start) / 1000000 ))
  python3 - "$LOG/$name-$index.json" "$name" "$index" "$rc" "$wall" >>"$SUMMARY" <<'EOF' || printf '%s\t%s\t%s\t%s\n' "$name" "$index" "$rc" "$wall" >>"$SUMMARY"
import json, sys
path, name, index, rc, wall = sys.argv[1:]
r = json.load(open(path))
t, i = r["timings"], r["index"]
h = t.get("hierarchy") or {}
steps = [f'{h[k]:.3f}' if k in h else "-" for k in ("trees_s", "resolve_s", "units_s", "copies_s")]
chosen = "cells" if i["why"].startswith("cell hierarchy") or "--index cells" in i["why"] else i["index"]
print("\t".join([name, index, rc, wall, f'{t["compute_s"]:.3f}', f'{t.get("index_s") or 0:.3f}', *steps, chosen, i["why"][:300]]))
EOF
  tail -1 "$SUMMARY"
  [[ $rc == 0 ]] || failed=1
}

same() { # name index1 index2
  if cmp -s "$LOG/$1-$2.npy" "$LOG/$1-$3.npy"; then
    echo "$1: $2 and $3 identical" | tee -a "$LOG/same.txt"
  else
    echo "$1: $2 and $3 DIFFER" | tee -a "$LOG/same.txt"
    failed=1
  fi
}

same_files() { # label run1 run2 (their results: $LOG/run.npy)
  if cmp -s "$LOG/$2.npy" "$LOG/$3.npy"; then
    echo "$1: identical" | tee -a "$LOG/same.txt"
  else
    echo "$1: DIFFER" | tee -a "$LOG/same.txt"
    failed=1
  fi
}

case_of() { # name args...: auto, cells forced and brute force, all equal
  local name=$1
  shift
  run "$name" auto "$@"
  run "$name" cells "$@"
  run "$name" none "$@"
  same "$name" auto none
  same "$name" cells none
  rm -f "$LOG/$name"-*.npy
}

LOGB=(--log-bins --param bins=20 --param r_min=0.001 --param r_max=0.5)
# Warm-up: kernels compiled into the cache.
"$TWOBS" run sdh --input clustered:10000 "${LOGB[@]}" --backend cuda --quiet --index cells >/dev/null 2>&1
"$TWOBS" run sdh --input clustered:10000 "${LOGB[@]}" --backend cuda --quiet --index none >/dev/null 2>&1
"$TWOBS" run sdh --input uniform:10000 --param bins=50 --backend cuda --quiet --index none >/dev/null 2>&1

finish() {
  cut -c1-260 "$SUMMARY"
  echo "failed: $failed"
  cp "$SUMMARY" "$LOG/gpu.txt" "$OUT/"
  [[ -f $LOG/same.txt ]] && cp "$LOG/same.txt" "$OUT/"
  tar czf "$OUT/logs.tar.gz" -C "$LOG" --exclude '*.npy' .
  exit $failed
}

if [[ ${1:-} == host ]]; then
  for n in 1M:1000000 10M:10000000; do
    run "log20-clustered-${n%%:*}" cells sdh --input clustered:${n#*:} "${LOGB[@]}"
  done
  run log20-clustered-1M none sdh --input clustered:1000000 "${LOGB[@]}"
  same log20-clustered-1M cells none
  if [[ -n ${BASE:-} ]]; then
    BIN=$BASE run log20-clustered-10M-base cells sdh --input clustered:10000000 "${LOGB[@]}"
    same_files "log20-clustered-10M: this build against BASE" log20-clustered-10M-cells log20-clustered-10M-base-cells
  fi
  finish
fi

if [[ ${1:-} != big ]]; then
case_of log20-clustered-1M sdh --input clustered:1000000 "${LOGB[@]}"
case_of log20-uniform-1M sdh --input uniform:1000000 "${LOGB[@]}"
case_of log20-clustered-1Mx1M sdh --input clustered:1000000 --input clustered:1000000 --seed 3 "${LOGB[@]}"
case_of sdh4-uniform-1M sdh --input uniform:1000000 --param bins=4
case_of sdh500-uniform-1M sdh --input uniform:1000000 --param bins=500
case_of sdh50-clustered-1M sdh --input clustered:1000000 --param bins=50
# A cut-off histogram where the grid is the planner's: auto against the grid and brute force.
run rdf-open-1M auto rdf --input uniform:1000000 --param box=0 --param r_max=0.05
run rdf-open-1M grid rdf --input uniform:1000000 --param box=0 --param r_max=0.05
same rdf-open-1M auto grid
fi
if [[ ${1:-} != quick ]]; then
  case_of log20-clustered-10M sdh --input clustered:10000000 "${LOGB[@]}"
  run sdh50-uniform-10M auto sdh --input uniform:10000000 --param bins=50
  run sdh50-uniform-10M none sdh --input uniform:10000000 --param bins=50
  same sdh50-uniform-10M auto none
fi
finish
