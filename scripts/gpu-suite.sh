#!/usr/bin/env bash
# The GPU test suite, on a GPU machine, from the repository root, with what
# scripts/build-device.sh makes here (the GPU machines have no Rust
# toolchain). Parts, each run in this order when named (default: kernels
# parity cli xi md, then gpus where there are two GPUs or more and python
# where target/wheels holds a wheel):
#   kernels  target/release/kernels: every kernel variant compiled by NVRTC
#            (the local suite compiles a representative set);
#   parity   target/release/parity: the CPU/GPU parity cases of
#            tests/parity.rs (every plan variant of every built-in and of the
#            manhattan example, forced block sizes, one and two points,
#            streamed blocks, one and four streams, DOB overflow, grids,
#            triclinic boxes, molecules excluded, 2-D buckets, every one of the
#            2^32 keys, two GPUs), each on fresh random data against the CPU
#            backend; PARITY_FILTER (a name filter, say `knn` or `two-gpus`)
#            runs some of them;
#   cli      the command line end to end: every built-in and user example
#            with --verify on its planner's plan, and sampled verification of
#            100,000-point inputs;
#   xi       `twobs xi` with --backend cuda and --backend cpu must write the
#            same files, byte for byte: Landy-Szalay with --norm squared, a
#            jackknife with --cov, --box linear and log, --radec, --rp-pi
#            with --wp and --s-mu, with randoms and in a box (N points each);
#   md       the MD files of tests/data/md-peer (LAMMPS dump, .gro) on the
#            GPU with --verify, partial g(r) with and without molecules
#            excluded, and the counts equal to MDAnalysis's InterRDF as
#            recorded there;
#   gpus     runs shared between every GPU of the machine, large enough to
#            split (SDH 8M, RDF 5M x 5M, a 10M 2-D self-join); each must
#            succeed (their results are parity's to check);
#   python   the Python package on the GPU: target/wheels's wheel installed
#            into /tmp/site, then pytest python/tests/test_gpu.py and
#            test_gpu_arrays.py (every function against the CPU backend,
#            arrays read on the GPU against the host path, CuPy, PyTorch,
#            JAX, streams, Ctrl-C);
#   ranks    the Python package's comm= on two GPUs, a rank each, from the
#            bundle `scripts/carry-mpi.sh --python` makes here
#            (.mpi-carry: MPICH, mpi4py and the twobs wheel with `mpi`);
#            scripts/gpu-python-ranks.py compares each case with one GPU alone.
# Carry target/release/{twobs,parity,kernels} (and target/wheels for python,
# .mpi-carry for ranks). Logs under $OUT/gpu-suite (or /tmp/gpu-suite);
# prints the failures and a closing "N passed, N failed" line; the exit
# status is 0 only when every part passed.
#
# Usage: scripts/gpu-suite.sh [PART...]   (TWOBS, PARITY, KERNELS: the binaries; N: xi's points)
set -uo pipefail
cd "$(dirname "$0")/.."
TWOBS=${TWOBS:-target/release/twobs}
PARITY=${PARITY:-target/release/parity}
KERNELS=${KERNELS:-target/release/kernels}
LOG=${OUT:-/tmp}/gpu-suite
mkdir -p "$LOG"
export TWOBS_CACHE=${TWOBS_CACHE:-/tmp/twobs-cache}
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
nvidia-smi -L >"$LOG/gpus.txt" 2>&1
parts=("$@")
if [[ ${#parts[@]} -eq 0 ]]; then
  parts=(kernels parity cli xi md)
  ((gpus >= 2)) && parts+=(gpus)
  ls target/wheels/twobs-*.whl >/dev/null 2>&1 && parts+=(python)
fi
echo "parts: ${parts[*]} (GPUs: $gpus)"

passed=0
failed=0
pass() { passed=$((passed + 1)); printf 'PASS  %s\n' "$*"; }
fail() { failed=$((failed + 1)); printf 'FAIL  %s\n' "$*"; }
# A test binary's run: its result line, and its failures.
binary_result() {  # NAME LOG RC
  local line
  line=$(grep -E '^test result' "$2" | tail -1)
  grep -E "TWOBS_TEST_SEED" "$2" | head -1
  if [[ $3 -eq 0 ]] && [[ -n $line ]] && ! grep -q ' 0 passed' <<<"$line"; then
    pass "$1: $line"
  else
    fail "$1 (rc $3): ${line:-no result line}"
    grep -A3 -E "^---- |^test .*FAILED" "$2" | head -60
  fi
}

part_kernels() {
  if [[ ! -x $KERNELS ]]; then
    fail "kernels: no $KERNELS (scripts/build-device.sh builds it)"
    return
  fi
  TWOBS_ALL_KERNELS=1 "$KERNELS" nvrtc_compiles_every_kernel --nocapture >"$LOG/kernels.log" 2>&1
  local rc=$?
  grep -E "kernels compiled" "$LOG/kernels.log"
  binary_result kernels "$LOG/kernels.log" $rc
}

part_parity() {
  local filter=${PARITY_FILTER:-}
  # shellcheck disable=SC2086
  "$PARITY" $filter --test-threads 4 >"$LOG/parity${filter:+-$filter}.log" 2>&1
  binary_result "parity${filter:+ $filter}" "$LOG/parity${filter:+-$filter}.log" $?
}

# verify NAME ARGS...: one `twobs run` through the command line, verified against the CPU backend.
case_no=0
verify() {
  local name=$1
  shift
  case_no=$((case_no + 1))
  local seed=$(((RANDOM << 15) | RANDOM))
  local log="$LOG/cli-$(printf '%03d' $case_no)-${name//[^A-Za-z0-9_.-]/_}.log"
  if timeout 300 "$TWOBS" run "$@" --backend cuda --verify --seed "$seed" --quiet \
    --out "$LOG/out-$case_no.npy" --report "$LOG/report-$case_no.json" >"$log" 2>&1; then
    # --quiet keeps the summary off the log; the report says what --verify compared.
    pass "$(printf '%-44s %s' "$name" "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["verified"][:80])' "$LOG/report-$case_no.json")")"
  else
    fail "$(printf '%-44s seed %s: %s' "$name" "$seed" "$(grep -m1 -E 'error|panicked' "$log" | cut -c1-300)")"
  fi
  rm -f "$LOG"/out-$case_no.* "$LOG"/out-${case_no}_*
}

part_cli() {
  local p
  for p in sdh 2pcf kde selfjoin knn; do
    verify "$p planned" $p --input uniform:3001
  done
  verify "rdf planned" rdf --input uniform:2999 --input uniform:1777
  verify "nlj planned" nlj --input uniform:2999 --input uniform:1777 --param d=3
  verify "manhattan planned" examples/manhattan/manhattan.xml --input clustered:3001
  verify "periodic_rdf planned" examples/periodic_rdf/periodic_rdf.xml --input uniform:3001
  verify "2pcf 100000 points (sampled verify)" 2pcf --input uniform:100000 --param r=0.05
  verify "sdh 100000 points (sampled verify)" sdh --input clustered:100000 --param bins=500
}

# xi_same NAME ARGS...: `twobs xi` on both backends; the files (and --cov, --wp where COV, WP) must be equal.
xi_same() {
  local name=$1 backend
  shift
  for backend in cuda cpu; do
    if ! "$TWOBS" xi "$@" --backend "$backend" --out "$LOG/xi-$name-$backend.csv" \
      ${COV:+--cov "$LOG/xi-$name-$backend-cov.csv"} ${WP:+--wp "$LOG/xi-$name-$backend-wp.csv"} \
      >"$LOG/xi-$name-$backend.log" 2>&1; then
      fail "xi $name: $backend failed (see $LOG/xi-$name-$backend.log)"
      return
    fi
  done
  if cmp -s "$LOG/xi-$name-cuda.csv" "$LOG/xi-$name-cpu.csv" &&
    { [[ -z ${COV:-} ]] || cmp -s "$LOG/xi-$name-cuda-cov.csv" "$LOG/xi-$name-cpu-cov.csv"; } &&
    { [[ -z ${WP:-} ]] || cmp -s "$LOG/xi-$name-cuda-wp.csv" "$LOG/xi-$name-cpu-wp.csv"; }; then
    pass "xi $name: equal ($(grep -h -E '^(DD|RR|DR):' "$LOG/xi-$name-cuda.log" | tr '\n' ' '))"
  else
    fail "xi $name: cuda and cpu differ"
    diff "$LOG/xi-$name-cuda.csv" "$LOG/xi-$name-cpu.csv" | head -10
  fi
}

part_xi() {
  local n=${N:-200000}
  # Patch numbers 0..7 for N data points and 2N randoms, one a line; RA and
  # Dec in degrees, uniform over a sixth of the sky, for N/4 and N/2 points.
  python3 -c "
import math, random, sys
n, d = int(sys.argv[1]), sys.argv[2]
open(d + '/xi-pd.txt', 'w').write(''.join(f'{i % 8}\n' for i in range(n)))
open(d + '/xi-pr.txt', 'w').write(''.join(f'{i % 8}\n' for i in range(2 * n)))
rng = random.Random(37)
sky = lambda m: ''.join(f'{rng.uniform(0, 60)!r},{math.degrees(math.asin(rng.uniform(-0.5, 0.5)))!r}\n' for _ in range(m))
open(d + '/xi-sky.csv', 'w').write(sky(n // 4))
open(d + '/xi-sky-r.csv', 'w').write(sky(n // 2))
" "$n" "$LOG"
  local range=(--param bins=20 --param r_min=0.002 --param r_max=0.1 --log-bins)
  xi_same squared --data clustered:$n --randoms uniform:$((2 * n)) --norm squared "${range[@]}"
  COV=1 xi_same jackknife --data clustered:$n --randoms uniform:$((2 * n)) --norm squared \
    --patches "$LOG/xi-pd.txt" --random-patches "$LOG/xi-pr.txt" "${range[@]}"
  xi_same box --data uniform:$n --box 1 --param bins=25 --param r_min=0 --param r_max=0.25
  xi_same box-log --data clustered:$n --box 1 "${range[@]}"
  xi_same radec --radec --data "$LOG/xi-sky.csv" --randoms "$LOG/xi-sky-r.csv" --norm squared \
    --param bins=20 --param theta_min=0.01 --param theta_max=10 --log-bins
  local rp=(--param rp_bins=12 --param rp_min=0.002 --param rp_max=0.05 --log-bins --param pi_bins=10 --param pi_max=0.05)
  WP=1 xi_same rppi --data clustered:$n --randoms uniform:$((2 * n)) --rp-pi 0.05 "${rp[@]}" --norm squared
  WP=1 xi_same rppi-box --data uniform:$n --box 1 --rp-pi 0.05 "${rp[@]}"
  local sm=(--param s_bins=15 --param s_min=0.002 --param s_max=0.05 --log-bins)
  xi_same smu --data clustered:$n --randoms uniform:$((2 * n)) --s-mu 8 "${sm[@]}"
  xi_same smu-box --data uniform:$n --box 1 --s-mu 8 "${sm[@]}"
}

part_md() {
  local data=tests/data/md-peer k index
  local cases
  cases=$(python3 -c 'import json, sys; [print(k) for k in range(len(json.load(open(sys.argv[1]))["cases"]))]' "$data/mdanalysis.json")
  for k in $cases; do
    for index in auto none; do
      local file types exclude bins r_max topology
      read -r file types exclude bins r_max topology < <(python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["cases"][int(sys.argv[2])]
print(c["file"], c["types"], int(c["exclude_molecule"]), c["bins"], c["r_max"], c.get("topology", "-"))' "$data/mdanalysis.json" "$k")
      local name="md $file $types exclude$exclude $index"
      local out="$LOG/md-${k}-$index.csv"
      local args=(run rdf --input "$data/$file" --types "$types" --param "r_max=$r_max" --param "bins=$bins"
        --backend cuda --verify --index "$index" --out "$out" --report "$out.json")
      [[ $exclude == 1 ]] && args+=(--exclude-same molecule)
      [[ $topology != - ]] && args+=(--topology "$data/$topology")
      if ! timeout 300 "$TWOBS" "${args[@]}" >"$out.log" 2>&1; then
        fail "$name: $(grep -m1 -E 'error|panicked' "$out.log" | cut -c1-300)"
        continue
      fi
      if python3 - "$data/mdanalysis.json" "$k" "$out" "$out.json" >>"$out.log" 2>&1 <<'EOF'; then
import csv, json, sys
c = json.load(open(sys.argv[1]))["cases"][int(sys.argv[2])]
mine = [int(r["count"]) for r in csv.DictReader(open(sys.argv[3]))]
theirs = [n // 2 if c["both_orders"] else n for n in c["counts"]]
report = json.load(open(sys.argv[4]))
assert report.get("backend") == "cuda", report.get("backend")
assert mine == theirs, f"twobs {mine} against InterRDF {theirs}"
EOF
        pass "$name: as InterRDF; $(python3 -c 'import json, sys; print(str(json.load(open(sys.argv[1])).get("verified"))[:70])' "$out.json")"
      else
        fail "$name: $(tail -1 "$out.log" | cut -c1-300)"
      fi
    done
  done
}

# shared NAME ARGS...: one `twobs run` on every GPU; it must succeed and say how it shared.
shared() {
  local name=$1
  shift
  local start
  start=$(date +%s%N)
  if timeout 300 "$TWOBS" run "$@" --backend cuda --quiet --report "$LOG/gpus-$name.json" \
    --out "$LOG/gpus-$name.npy" >"$LOG/gpus-$name.log" 2>&1; then
    pass "$(printf 'gpus %-26s %6d ms  %s' "$name" "$((($(date +%s%N) - start) / 1000000))" \
      "$(python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(str(r["schedule"].get("gpus", ""))[:150], "| compute", round(r["timings"]["compute_s"], 3))' "$LOG/gpus-$name.json")")"
  else
    fail "gpus $name: $(tail -c 300 "$LOG/gpus-$name.log")"
  fi
  rm -f "$LOG/gpus-$name.npy"
}

part_gpus() {
  shared sdh-8M sdh --input uniform:8000000 --param bins=500
  shared rdf-5Mx5M-open rdf --input uniform:5000000 --input uniform:5000000 --param box=0 --param r_max=0.5
  shared selfjoin-10M-2d selfjoin --input uniform:10000000 --param eps=0.001009
}

part_python() {
  if ! ls target/wheels/twobs-*.whl >/dev/null 2>&1; then
    fail "python: no wheel in target/wheels (scripts/build-device.sh builds it)"
    return
  fi
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    target/wheels/twobs-*.whl 2>&1 | tail -3
  # The tests import the installed package, not the checkout's python/twobs (which has no extension there).
  PYTHONPATH=/tmp/site timeout 900 python3 -m pytest -q -p no:cacheprovider \
    python/tests/test_gpu.py python/tests/test_gpu_arrays.py >"$LOG/pytest.log" 2>&1
  local rc=$?
  if [[ $rc -eq 0 ]]; then
    pass "python: $(tail -1 "$LOG/pytest.log")"
  else
    fail "python (rc $rc): $(tail -1 "$LOG/pytest.log")"
    grep -E "^(FAILED|ERROR)" "$LOG/pytest.log" | head -20
  fi
}

part_ranks() {
  if [[ ! -e .mpi-carry/bundle.tar.xz ]] || ! ls .mpi-carry/py/*.whl >/dev/null 2>&1; then
    fail "ranks: no .mpi-carry bundle with wheels (scripts/carry-mpi.sh --python makes it)"
    return
  fi
  mkdir -p /tmp/mpi && tar -xJf .mpi-carry/bundle.tar.xz -C /tmp/mpi
  python3 -m venv --system-site-packages /tmp/pyranks
  /tmp/pyranks/bin/pip install --quiet --no-index --no-deps .mpi-carry/py/*.whl 2>&1 | tail -3
  cat >/tmp/mpi/bin/on-rank-gpu-python <<'ON'
#!/bin/sh
export CUDA_VISIBLE_DEVICES=${PMI_RANK:?not started by mpiexec}
exec /tmp/pyranks/bin/python "$@"
ON
  chmod +x /tmp/mpi/bin/on-rank-gpu-python
  PATH=/tmp/mpi/bin:$PATH LD_LIBRARY_PATH=/tmp/mpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} UCX_TLS=${UCX_TLS:-self,sm} \
    timeout 900 mpiexec -n 2 on-rank-gpu-python scripts/gpu-python-ranks.py >"$LOG/ranks.log" 2>&1
  local rc=$?
  cat "$LOG/ranks.log"
  if [[ $rc -eq 0 ]]; then pass "ranks: every case agrees"; else fail "ranks (rc $rc)"; fi
}

for part in "${parts[@]}"; do
  case $part in
    kernels | parity | cli | xi | md | gpus | python | ranks) "part_$part" ;;
    *) fail "no part $part (kernels parity cli xi md gpus python ranks)" ;;
  esac
done
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
