#!/usr/bin/env bash
# Kernel time of forced variants of one problem on the GPU, one line each:
#   scripts/sweep.sh PROBLEM "ARGS" "VARIANT ARGS" "VARIANT ARGS" ...
# e.g. scripts/sweep.sh sdh "--input uniform:1000000 --param bins=500" "--points-per-thread 4" "--block-size 1024"
set -uo pipefail
cd "$(dirname "$0")/.."
TWOBS=${TWOBS:-target/release/twobs}
problem=$1
args=$2
shift 2
for variant in "$@"; do
  # shellcheck disable=SC2086
  "$TWOBS" run "$problem" $args $variant --backend cuda --quiet --seed 7 --report - --out /tmp/sweep.npy 2>/dev/null |
    python3 -c 'import json, sys
r = json.load(sys.stdin)
t = r["timings"]
print("%-44s %-36s kernel %.4f s  %.3e pairs/s" % (sys.argv[1], r["plans"][0]["variant"], t["gpu"]["kernel_s"], int(r["pairs"]) / t["gpu"]["kernel_s"]))' "$variant" ||
    echo "$variant: failed"
done
