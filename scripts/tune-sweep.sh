#!/usr/bin/env bash
# `twobs tune` on the device machine's GPU, its profile kept apart from the
# user's ($OUT/profiles): the sweep's table on stdout ($OUT/tune.md), a line per
# shape timed ($OUT/tune.log), the profile with every time ($OUT/profiles/).
# Usage: OUT=dir scripts/tune-sweep.sh [twobs tune arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?OUT: where the sweep goes}"
export TWOBS_CACHE="${TWOBS_CACHE:-/tmp/twobs-cache}"
export TWOBS_PROFILES="$OUT/profiles"
start=$(date +%s)
target/release/twobs tune "$@" >"$OUT/tune.md" 2>"$OUT/tune.log"
echo "twobs tune $*: $(($(date +%s) - start)) s" >>"$OUT/tune.md"
cat "$OUT/tune.md"
