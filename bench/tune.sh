#!/usr/bin/env bash
# `twobs tune` on the device machine's GPU, its profile kept apart from the
# user's ($OUT/profiles): the sweep's table on stdout ($OUT/tune.md), a line per
# shape timed ($OUT/tune.log), the profile with every time ($OUT/profiles/).
# With BENCH=1, then the kernels' benchmark (bench/kernels.py: SDH, RDF,
# 2PCF on the grid and over every pair) without the profile and with it,
# interleaved in the same call ($OUT/kernels.md).
# Usage: OUT=dir [BENCH=1] bench/tune.sh [twobs tune arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?OUT: where the sweep goes}"
export TWOBS_CACHE="${TWOBS_CACHE:-/tmp/twobs-cache}"
start=$(date +%s)
TWOBS_PROFILES="$OUT/profiles" target/release/twobs tune "$@" >"$OUT/tune.md" 2>"$OUT/tune.log"
echo "twobs tune $*: $(($(date +%s) - start)) s" >>"$OUT/tune.md"
cat "$OUT/tune.md"
if [ "${BENCH:-}" = 1 ]; then
  wrappers=$(mktemp -d)
  mkdir -p "$wrappers/none"
  printf '#!/bin/sh\nTWOBS_PROFILES=%s exec %s "$@"\n' "$wrappers/none" "$PWD/target/release/twobs" >"$wrappers/untuned"
  printf '#!/bin/sh\nTWOBS_PROFILES=%s exec %s "$@"\n' "$OUT/profiles" "$PWD/target/release/twobs" >"$wrappers/tuned"
  chmod +x "$wrappers/untuned" "$wrappers/tuned"
  BINARIES="untuned=$wrappers/untuned,tuned=$wrappers/tuned" BENCH_CASES="${BENCH_CASES:-0,1,2,3,8,4}" \
    python3 bench/kernels.py >"$OUT/kernels.log"
  rm -f "$OUT"/*.npy
  tail -n 12 "$OUT/kernels.md"
fi
