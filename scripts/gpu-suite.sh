#!/usr/bin/env bash
# The GPU test suite, on a GPU machine, from the repository root, with the
# binaries scripts/build-device.sh makes:
#  0. target/release/kernels: every kernel variant compiled by NVRTC (1,092;
#     the local suite compiles a representative set);
#  1. target/release/parity: the CPU/GPU parity cases of tests/parity.rs (every
#     plan variant of every built-in and of the manhattan example, forced block
#     sizes, one and two points, streamed blocks, one and four streams, DOB
#     overflow, two GPUs), each on fresh random data against the CPU backend;
#  2. the command line end to end: every built-in with --verify on its
#     planner's plan, and sampled verification of 100,000-point inputs.
# Prints the failures and a closing "N passed, N failed" line.
#
# Usage: scripts/gpu-suite.sh [LOG_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
TWOBS=${TWOBS:-target/release/twobs}
PARITY=${PARITY:-target/release/parity}
LOG=${1:-${OUT:-/tmp}/gpu-suite}
mkdir -p "$LOG"
export TWOBS_CACHE=${TWOBS_CACHE:-/tmp/twobs-cache}

# Every kernel variant through NVRTC (CI compiles a representative set).
KERNELS=${KERNELS:-target/release/kernels}
kernels_rc=0
if [[ -x $KERNELS ]]; then
  TWOBS_ALL_KERNELS=1 "$KERNELS" nvrtc_compiles_every_kernel --nocapture >"$LOG/kernels.log" 2>&1
  kernels_rc=$?
  grep -E "kernels compiled|^test result" "$LOG/kernels.log"
else
  echo "no $KERNELS: the NVRTC matrix was not run (scripts/build-device.sh builds it)"
  kernels_rc=1
fi

"$PARITY" --test-threads 4 >"$LOG/parity.log" 2>&1
parity_rc=$?
grep -E "TWOBS_TEST_SEED|FAILED|^test result" "$LOG/parity.log"
grep -A3 -E "^---- " "$LOG/parity.log" | head -60

passed=0
failed=0
case_no=0
# run NAME ARGS...: one case through the command line, verified against the CPU backend.
run() {
  local name=$1
  shift
  case_no=$((case_no + 1))
  local seed=$(( (RANDOM << 15) | RANDOM ))
  local log="$LOG/$(printf '%03d' $case_no)-${name//[^A-Za-z0-9_.-]/_}.log"
  if timeout 300 "$TWOBS" run "$@" --backend cuda --verify --seed "$seed" --quiet \
      --out "$LOG/out-$case_no.npy" --report "$LOG/report-$case_no.json" >"$log" 2>&1; then
    passed=$((passed + 1))
    # --quiet keeps the summary off the log; the report says what --verify compared.
    printf 'PASS  %-44s %s\n' "$name" "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["verified"][:80])' "$LOG/report-$case_no.json")"
  else
    failed=$((failed + 1))
    printf 'FAIL  %-44s seed %s: %s\n' "$name" "$seed" "$(grep -m1 -E 'error|panicked' "$log" | cut -c1-300)"
  fi
  rm -f "$LOG"/out-$case_no.* "$LOG"/out-${case_no}_*
}

for p in sdh 2pcf kde selfjoin knn; do
  run "$p planned" $p --input uniform:3001
done
run "rdf planned" rdf --input uniform:2999 --input uniform:1777
run "nlj planned" nlj --input uniform:2999 --input uniform:1777 --param d=3
run "manhattan planned" examples/manhattan/manhattan.xml --input clustered:3001
run "periodic_rdf planned" examples/periodic_rdf/periodic_rdf.xml --input uniform:3001
run "2pcf 100000 points (sampled verify)" 2pcf --input uniform:100000 --param r=0.05
run "sdh 100000 points (sampled verify)" sdh --input clustered:100000 --param bins=500

echo "command line: $passed passed, $failed failed"
[[ $kernels_rc -eq 0 && $parity_rc -eq 0 && $failed -eq 0 ]]
