#!/usr/bin/env bash
# Issue 35's CPU comparison at 1M (scripts/bench-cells-cpu.py --n 1000000,
# docs/bench/cells-cpu-1m-clustered.json) checked on a GPU: the same points
# counted over every pair (--index none) and by the hierarchy (--index
# cells) must equal the CPU hierarchy's counts bucket for bucket.
# Here first: target/cells1m/points.npy (the bench's points) and
# target/cells1m/counts-cpu.npy (its counts); then
#   run (carry ["target/release/twobs", "target/cells1m"]): scripts/gpu-cells-1m-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cells1m}; mkdir -p "$OUT"
export TWOBS_CACHE=/tmp/twobs-cache
args=(--input target/cells1m/points.npy --log-bins --param bins=20 --param r_min=0.001 --param r_max=0.5 --backend cuda --quiet)
for index in none cells; do
  target/release/twobs run sdh "${args[@]}" --index "$index" --out "$OUT/counts-$index.npy" --report "$OUT/report-$index.json"
done
python3 - "$OUT" <<'PY' | tee "$OUT/check.txt"
import json, sys
import numpy as np
out = sys.argv[1]
cpu = np.load("target/cells1m/counts-cpu.npy")
for index in ("none", "cells"):
    gpu = np.load(f"{out}/counts-{index}.npy")[:, 2].astype(np.int64)
    t = json.load(open(f"{out}/report-{index}.json"))["timings"]
    print(f"GPU --index {index}: compute {t['compute_s']:.3f} s, {int(gpu.sum())} pairs counted; equal to the CPU hierarchy's counts: {bool(np.array_equal(gpu, cpu))}")
PY
