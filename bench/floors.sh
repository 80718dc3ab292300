#!/usr/bin/env bash
# The SASS instruction floors of the planner's kernels for the brute-force
# cases of bench/kernels.py (1M uniform points), on the GPU machine (needs cuobjdump):
# bench/sass-floor.py on each kernel NVRTC builds for sm_90. Without a GPU:
# PATH="$(scripts/sass-tools.sh):$PATH" bench/floors.sh (NVRTC on the library path).
set -uo pipefail
cd "$(dirname "$0")/.."
TWOBS=${TWOBS:-target/release/twobs}
LOG=${1:-${OUT:-/tmp}/floors}
mkdir -p "$LOG"
one=499999500000   # pairs of one set of 1M points
two=1000000000000  # pairs of 1M x 1M
floor() {  # NAME PAIRS MARKER-ARGS -- GEN-ARGS
  local name=$1 pairs=$2; shift 2
  local marker=(); while [[ $1 != -- ]]; do marker+=("$1"); shift; done; shift
  rm -f "$LOG/$name.cubin"  # this script's own output from an earlier run: twobs never overwrites a file
  "$TWOBS" gen "$@" --device h200 --check --cubin "$LOG/$name.cubin" >/dev/null 2>"$LOG/$name.log" || { echo "$name: gen failed"; return; }
  python3 bench/sass-floor.py "$LOG/$name.cubin" --pairs-total "$pairs" "${marker[@]}" | tee "$LOG/$name.json" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d.pop(\"opcodes\"); print(\"$name\", json.dumps(d))"
}
# Markers, once a pair: the approximate sqrt of a bucket from keys, and the
# comparison that makes a count's indicator (the built-ins count failures,
# k >= first_fail).
floor sdh-50 $one --marker MUFU.SQRT -- sdh --param bins=50
floor sdh-500 $one --marker MUFU.SQRT -- sdh --param bins=500
floor rdf-open $two --marker MUFU.SQRT -- rdf --points 1000000x1000000 --param box=0 --param r_max=0.5
floor rdf-periodic $two --marker MUFU.SQRT -- rdf --points 1000000x1000000
floor 2pcf $one --marker FSET.BF.GE.AND -- 2pcf --param r=0.1
