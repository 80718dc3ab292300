#!/usr/bin/env bash
# Issue 10, c13: the histograms' unsure pairs, on the GPU machine.
#  1. the built-ins' estimate (sqrt.approx.ftz.f32) against the square root on
#     every float key (scripts/estimate-error.py): how narrow the bracket may be;
#  2. SDH 50/500 and RDF open/periodic with each binary given in BINARIES
#     (scripts/bench-ab.py, 3 interleaved runs, medians);
#  3. the key probes (every one of the 2^32 keys against its value) of the
#     parity binary given in PARITY.
# Usage: BINARIES=name=path,... PARITY=path scripts/bracket-bench.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/bracket-bench}
mkdir -p "$OUT"
export TWOBS_CACHE=${TWOBS_CACHE:-/tmp/twobs-cache}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv >"$OUT/gpu.txt" 2>&1
python3 scripts/estimate-error.py >"$OUT/estimate-error.txt" 2>&1
cat "$OUT/estimate-error.txt"
BENCH_CASES=${BENCH_CASES:-0,1,2,3} python3 scripts/bench-ab.py >"$OUT/bench-ab.log" 2>&1
cat "$OUT/bench-ab.md" 2>/dev/null || tail -20 "$OUT/bench-ab.log"
if [[ -n ${PARITY:-} ]]; then
  "$PARITY" keys/ --test-threads 1 >"$OUT/keys.log" 2>&1
  grep -E "^test |test result" "$OUT/keys.log"
fi
nvidia-smi --query-gpu=clocks.sm,clocks_throttle_reasons.active --format=csv >>"$OUT/gpu.txt" 2>&1
