#!/usr/bin/env bash
# The kernels' benchmark (bench/kernels.py) with the planner's plan beside
# forced kernel shapes, interleaved in one call: each shape is a wrapper of
# target/release/twobs that adds its flags to every run.
# Usage: OUT=dir SHAPES="r4-b256=--points-per-thread 4 --block-size 256;..." \
#        [BENCH_CASES=0,1,2,3,8] bench/shapes.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?OUT: where the table goes}" "${SHAPES:?SHAPES: name=flags;...}"
wrappers=$(mktemp -d)
binaries="planner=$PWD/target/release/twobs"
IFS=';' read -ra shapes <<<"$SHAPES"
for shape in "${shapes[@]}"; do
  name=${shape%%=*} flags=${shape#*=}
  printf '#!/bin/sh\nexec %s "$@" %s\n' "$PWD/target/release/twobs" "$flags" >"$wrappers/$name"
  chmod +x "$wrappers/$name"
  binaries="$binaries,$name=$wrappers/$name"
done
BINARIES="$binaries" BENCH_CASES="${BENCH_CASES:-0,1,2,3,8}" python3 bench/kernels.py >"$OUT/shapes.log"
mv "$OUT/kernels.md" "$OUT/shapes.md" && mv "$OUT/kernels.json" "$OUT/shapes.json"
rm -f "$OUT"/*.npy
cat "$OUT/shapes.md"
