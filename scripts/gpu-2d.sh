#!/usr/bin/env bash
# Two-dimensional histograms on the GPU (issue 37): the built-ins ddrppi
# (rp, pi) and ddsmu (s, mu) against the CPU backend, and their timing.
#  1. The parity suite's cases for them (tests/parity.rs: every plan variant
#     the planner may pick, forced one by one, every pair and on the grid;
#     one and two sets, a log-spaced first axis, a periodic box, weights
#     per point; blocks, streams, 1 and 2 points, the CPU beside the GPU).
#  2. twobs xi --rp-pi (cells and wp) and --s-mu, with randoms and in a
#     box, on N points: the same file with --backend cuda and cpu, byte for byte.
#  3. One timing on 1M uniform points in the unit cube: ddrppi and ddsmu,
#     on the grid (auto) and over every pair (--index none), GPU and, for
#     the grid, the CPU backend (2 threads less than the machine's).
# Logs go to $OUT/gpu-2d; summary-PART.txt holds the lines printed here,
# the last saying "N passed, N failed".
#
# Build here first: scripts/build-device.sh; then on the device
#   scripts/gpu-2d.sh parity      (1, a few minutes: its NVRTC compiles are the cost)
#   scripts/gpu-2d.sh xi timing   (2 and 3)
# or scripts/gpu-2d.sh (all three), with carry ["target/release/twobs", "target/release/parity"].
set -uo pipefail
cd "$(dirname "$0")/.."
TWOBS=${TWOBS:-target/release/twobs}
PARITY=${PARITY:-target/release/parity}
PARTS=${*:-parity xi timing}
LOG=${OUT:-/tmp}/gpu-2d
mkdir -p "$LOG"
export TWOBS_CACHE=${TWOBS_CACHE:-/tmp/twobs-cache}
N=${N:-200000}
SUMMARY="$LOG/summary-${PARTS// /-}${FILTERS:+-${FILTERS// /-}}.txt"
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
passed=0
failed=0

# 1. Parity: every case whose name holds ddrppi or ddsmu (FILTERS="ddrppi"
# and then FILTERS="ddsmu" split it over two calls, should one exceed a call).
for filter in ${FILTERS:-ddrppi ddsmu}; do
  [[ " $PARTS " == *" parity "* ]] || break
  "$PARITY" "$filter" >"$LOG/parity-$filter.log" 2>&1
  rc=$?
  line=$(grep -E '^test result' "$LOG/parity-$filter.log" | tail -1)
  if [[ $rc -eq 0 ]] && ! grep -q ' 0 passed' <<<"$line"; then
    passed=$((passed + 1))
    say "parity $filter: $line"
  else
    failed=$((failed + 1))
    say "parity $filter: FAILED (rc $rc): $line"
    grep -E '^test .*FAILED|differs' "$LOG/parity-$filter.log" | head -20 | tee -a "$SUMMARY"
  fi
done

# 2. twobs xi on both backends, byte for byte.
check() { # name, then the arguments of twobs xi
  local name=$1
  shift
  for backend in cuda cpu; do
    "$TWOBS" xi "$@" --backend "$backend" --out "$LOG/$name-$backend.csv" ${WP:+--wp "$LOG/$name-$backend-wp.csv"} \
      >"$LOG/$name-$backend.log" 2>&1 ||
      { say "$name: $backend failed (see $LOG/$name-$backend.log)"; failed=$((failed + 1)); return; }
  done
  if cmp -s "$LOG/$name-cuda.csv" "$LOG/$name-cpu.csv" &&
    { [[ -z ${WP:-} ]] || cmp -s "$LOG/$name-cuda-wp.csv" "$LOG/$name-cpu-wp.csv"; }; then
    say "$name: equal ($(grep -h -E '^(DD|RR|DR):' "$LOG/$name-cuda.log" | tr '\n' ' '))"
    passed=$((passed + 1))
  else
    say "$name: cuda and cpu differ:"
    diff "$LOG/$name-cuda.csv" "$LOG/$name-cpu.csv" | head -10 | tee -a "$SUMMARY"
    failed=$((failed + 1))
  fi
}
if [[ " $PARTS " == *" xi "* ]]; then
rp=(--param rp_bins=12 --param rp_min=0.002 --param rp_max=0.05 --log-bins --param pi_bins=10 --param pi_max=0.05)
WP=1 check rppi --data clustered:$N --randoms uniform:$((2 * N)) --rp-pi 0.05 "${rp[@]}" --norm squared
WP=1 check rppi-box --data uniform:$N --box 1 --rp-pi 0.05 "${rp[@]}"
sm=(--param s_bins=15 --param s_min=0.002 --param s_max=0.05 --log-bins)
check smu --data clustered:$N --randoms uniform:$((2 * N)) --s-mu 8 "${sm[@]}"
check smu-box --data uniform:$N --box 1 --s-mu 8 "${sm[@]}"
fi

# 3. Timing on 1M points: the run's own timings (report JSON), one line each.
time_run() { # name, backend, then the arguments of twobs run
  local name=$1 backend=$2
  shift 2
  if "$TWOBS" run "$@" --input uniform:1000000 --backend "$backend" --out "$LOG/$name.csv" \
    --report "$LOG/$name.json" >"$LOG/$name.log" 2>&1; then
    python3 - "$LOG/$name.json" "$name" <<'PY' | tee -a "$SUMMARY"
import json, sys
r = json.load(open(sys.argv[1]))
t = r.get("timings", {})
idx = r.get("index", {})
print(f"{sys.argv[2]}: {r.get('device', '?')}, index {idx.get('index', '?')} ({idx.get('pairs', '?')} pairs), "
      f"compute {t.get('compute_s', '?')} s, total {t.get('total_s', '?')} s, plan {(r.get('plans') or [{}])[0].get('variant', '-')}")
PY
  else
    say "$name: failed (see $LOG/$name.log)"
    failed=$((failed + 1))
  fi
}
if [[ " $PARTS " == *" timing "* ]]; then
cpus=$(($(nproc) > 4 ? $(nproc) - 2 : 2))
time_run ddrppi-1M-grid-gpu cuda ddrppi --param rp_max=0.02 --param pi_max=0.02 --param pi_bins=20
time_run ddrppi-1M-all-pairs-gpu cuda ddrppi --param rp_max=0.02 --param pi_max=0.02 --param pi_bins=20 --index none
time_run ddsmu-1M-grid-gpu cuda ddsmu --param s_max=0.02 --param mu_bins=10
time_run ddsmu-1M-all-pairs-gpu cuda ddsmu --param s_max=0.02 --param mu_bins=10 --index none
time_run ddrppi-1M-grid-cpu cpu ddrppi --param rp_max=0.02 --param pi_max=0.02 --param pi_bins=20 --threads "$cpus"
for name in ddrppi-1M-grid ddrppi-1M-all-pairs; do
  if [[ -e "$LOG/$name-gpu.csv" && -e "$LOG/ddrppi-1M-grid-cpu.csv" ]] && [[ $name == *grid ]]; then
    if cmp -s "$LOG/$name-gpu.csv" "$LOG/ddrppi-1M-grid-cpu.csv"; then
      say "$name: GPU cells equal the CPU's"
      passed=$((passed + 1))
    else
      say "$name: GPU cells differ from the CPU's"
      failed=$((failed + 1))
    fi
  fi
done
if cmp -s "$LOG/ddrppi-1M-grid-gpu.csv" "$LOG/ddrppi-1M-all-pairs-gpu.csv"; then
  say "ddrppi 1M: the grid's cells equal every pair's"
  passed=$((passed + 1))
else
  say "ddrppi 1M: the grid's cells differ from every pair's"
  failed=$((failed + 1))
fi
fi
say "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
