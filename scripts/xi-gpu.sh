#!/usr/bin/env bash
# twobs xi on the GPU against the CPU backend (issue 37): the same command
# with --backend cuda and --backend cpu must write the same file, byte for
# byte (counts exact on both; xi, xi_err and the covariance computed on the
# host from them). Cases: Landy-Szalay against randoms with --norm squared,
# the same with a jackknife over patches (--patches, --cov), --box with
# analytic RR (the built-in dd_periodic), and w(theta) with --radec (ddtheta,
# f64 on both backends: CUDA's asin against the host's, equal but within an
# ulp of an edge). Points from twobs's own generators.
# Logs and outputs go to $OUT/xi-gpu (or the folder given); the last line says
# "N passed, N failed".
#
# Usage: scripts/xi-gpu.sh [LOG_DIR]   (TWOBS=binary, default target/release/twobs)
set -uo pipefail
cd "$(dirname "$0")/.."
TWOBS=${TWOBS:-target/release/twobs}
LOG=${1:-${OUT:-/tmp}/xi-gpu}
mkdir -p "$LOG"
export TWOBS_CACHE=${TWOBS_CACHE:-/tmp/twobs-cache}
N=${N:-200000}

# Patch numbers 0..7 for N data points and 2N randoms, one a line; RA and
# Dec in degrees, uniform over a sixth of the sky, for N/4 and N/2 points.
python3 -c "
import math, random, sys
n = int(sys.argv[1])
open(sys.argv[2] + '/pd.txt', 'w').write(''.join(f'{i % 8}\n' for i in range(n)))
open(sys.argv[2] + '/pr.txt', 'w').write(''.join(f'{i % 8}\n' for i in range(2 * n)))
rng = random.Random(37)
sky = lambda m: ''.join(f'{rng.uniform(0, 60)!r},{math.degrees(math.asin(rng.uniform(-0.5, 0.5)))!r}\n' for _ in range(m))
open(sys.argv[2] + '/sky.csv', 'w').write(sky(n // 4))
open(sys.argv[2] + '/sky-r.csv', 'w').write(sky(n // 2))
" "$N" "$LOG"

passed=0
failed=0
check() { # name, then the arguments of twobs xi
  local name=$1
  shift
  for backend in cuda cpu; do
    "$TWOBS" xi "$@" --backend "$backend" --out "$LOG/$name-$backend.csv" \
      ${COV:+--cov "$LOG/$name-$backend-cov.csv"} >"$LOG/$name-$backend.log" 2>&1 ||
      { echo "$name: $backend failed (see $LOG/$name-$backend.log)"; failed=$((failed + 1)); return; }
  done
  if cmp -s "$LOG/$name-cuda.csv" "$LOG/$name-cpu.csv" &&
    { [[ -z ${COV:-} ]] || cmp -s "$LOG/$name-cuda-cov.csv" "$LOG/$name-cpu-cov.csv"; }; then
    echo "$name: equal ($(grep -h -E '^(DD|RR|DR):' "$LOG/$name-cuda.log" | tr '\n' ' '))"
    passed=$((passed + 1))
  else
    echo "$name: cuda and cpu differ:"
    diff "$LOG/$name-cuda.csv" "$LOG/$name-cpu.csv" | head -10
    failed=$((failed + 1))
  fi
}

range=(--param bins=20 --param r_min=0.002 --param r_max=0.1 --log-bins)
check squared --data clustered:$N --randoms uniform:$((2 * N)) --norm squared "${range[@]}"
COV=1 check jackknife --data clustered:$N --randoms uniform:$((2 * N)) --norm squared \
  --patches "$LOG/pd.txt" --random-patches "$LOG/pr.txt" "${range[@]}"
check box --data uniform:$N --box 1 --param bins=25 --param r_min=0 --param r_max=0.25
check box-log --data clustered:$N --box 1 "${range[@]}"
check radec --radec --data "$LOG/sky.csv" --randoms "$LOG/sky-r.csv" --norm squared \
  --param bins=20 --param theta_min=0.01 --param theta_max=10 --log-bins
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
