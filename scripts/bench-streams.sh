#!/usr/bin/env bash
# Kernel and compute time of one case over CUDA streams per GPU and forced
# shapes, medians of REPS runs, in one call: whether a launch's last wave of
# blocks leaves the GPU idle (more streams fill it with the next launch).
# Usage: scripts/bench-streams.sh [twobs run args...]   (TWOBS, STREAMS, SHAPES, REPS)
# e.g.   SHAPES="256x2 512x4" scripts/bench-streams.sh 2pcf --param r=0.1 --index none
set -uo pipefail
cd "$(dirname "$0")/.."
TWOBS=${TWOBS:-target/release/twobs}
STREAMS=${STREAMS:-1 2 4}
SHAPES=${SHAPES:-planned}
REPS=${REPS:-3}
N=${BENCH_N:-1000000}
export TWOBS_CACHE=${TWOBS_CACHE:-/tmp/twobs-cache}
echo "| shape | streams | kernel (s) | compute (s) | launches | result |"
echo "| --- | ---: | ---: | ---: | ---: | --- |"
for shape in $SHAPES; do
  forced=()
  [[ $shape != planned ]] && forced=(--block-size "${shape%x*}" --points-per-thread "${shape#*x}")
  for s in $STREAMS; do
    "$TWOBS" run "$@" --input "uniform:$N" "${forced[@]}" --streams "$s" --backend "${BACKEND:-cuda}" --quiet --seed 7 --report - >/dev/null 2>&1  # warm-up
    for _ in $(seq "$REPS"); do
      "$TWOBS" run "$@" --input "uniform:$N" "${forced[@]}" --streams "$s" --backend "${BACKEND:-cuda}" --quiet --seed 7 --report - 2>/dev/null
      echo
    done | python3 -c '
import json, statistics, sys
text, runs, dec = sys.stdin.read(), [], json.JSONDecoder()
while text.strip():
    r, end = dec.raw_decode(text.strip())
    runs.append(r)
    text = text.strip()[end:]
gpu = [r["timings"].get("gpu", {}) for r in runs]
k = statistics.median(g.get("kernel_s", float("nan")) for g in gpu)
c = statistics.median(r["timings"]["compute_s"] for r in runs)
res = " / ".join({json.dumps(r["result"], sort_keys=True)[:60] for r in runs})
launches = gpu[0].get("launches")
print(f"| {sys.argv[1]} | {sys.argv[2]} | {k:.4f} | {c:.4f} | {launches} | {res} |")
' "$shape" "$s"
  done
done
