#!/usr/bin/env bash
# The GPU test suite: every built-in with every forced variant that applies,
# self and two-set, odd sizes, one- and two-point inputs, small blocks to force
# streaming, DOB overflow forced by a tiny pool, and two GPUs when present; each
# case on fresh random data against the CPU backend (twobs run --verify).
# Prints one line per case and a closing "N passed, N failed" line.
#
# Usage (on a GPU machine, from the repository root, with the release binary):
#   scripts/gpu-suite.sh [LOG_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
TWOBS=${TWOBS:-target/release/twobs}
LOG=${1:-${OUT:-/tmp}/gpu-suite}
mkdir -p "$LOG"
export TWOBS_CACHE=${TWOBS_CACHE:-/tmp/twobs-cache}
GPUS=$(nvidia-smi -L 2>/dev/null | wc -l)
passed=0
failed=0
case_no=0

# run NAME ARGS...: one case, verified against the CPU backend.
run() {
  local name=$1
  shift
  case_no=$((case_no + 1))
  local seed=$(( (RANDOM << 15) | RANDOM ))
  local log="$LOG/$(printf '%03d' $case_no)-${name//[^A-Za-z0-9_.-]/_}.log"
  local start=$(date +%s%N)
  if timeout 300 "$TWOBS" run "$@" --backend cuda --verify --seed "$seed" --quiet \
      --out "$LOG/out-$case_no.tmp" --report "$LOG/report-$case_no.json" >"$log" 2>&1; then
    passed=$((passed + 1))
    printf 'PASS  %-58s %6d ms  %s\n' "$name" "$(( ($(date +%s%N) - start) / 1000000 ))" "$(grep -o 'verified: .*' "$log" | cut -c11-80)"
  else
    failed=$((failed + 1))
    printf 'FAIL  %-58s seed %s: %s\n' "$name" "$seed" "$(grep -m1 -E 'error|panicked' "$log" | cut -c1-300)"
  fi
  rm -f "$LOG"/out-$case_no.*  "$LOG"/out-${case_no}_*
}

INPUTS="register_shm register_roc shuffle naive"
N=3001      # odd, not a multiple of any block size
NA=2999
NB=1777

# Every forced variant that applies, on odd sizes.
for ic in $INPUTS; do
  for out in "op" "aop --copies 2" "aop --copies 4" "aop --copies 8" "aop --copies 16" "aop --copies 32" "global"; do
    tag="${out// --copies /}"
    run "sdh $ic $tag" sdh --input uniform:$N --param bins=97 --input-cache $ic --output $out
    run "rdf $ic $tag" rdf --input uniform:$NA --input uniform:$NB --param bins=53 --input-cache $ic --output $out
    run "rdf open-box $ic $tag" rdf --input clustered:$NA --input uniform:$NB --param box=0 --param r_max=1.0 --input-cache $ic --output $out
  done
  for out in "register" "op" "aop --copies 4" "aop --copies 32" "global"; do
    tag="${out// --copies /}"
    run "2pcf $ic $tag" 2pcf --input uniform:$N --param r=0.2 --input-cache $ic --output $out
  done
  run "sdh 2 bins $ic register" sdh --input uniform:$N --param bins=2 --input-cache $ic --output register
  run "kde $ic register" kde --input uniform:$N --input-cache $ic
  run "selfjoin $ic dob" selfjoin --input uniform:$N --param eps=0.05 --input-cache $ic
  run "nlj $ic dob" nlj --input uniform:$NA --input uniform:$NB --param d=2 --input-cache $ic
  run "knn $ic topk k=8" knn --input uniform:$N --input-cache $ic
  run "knn $ic topk k=1" knn --input clustered:$N --param k=1 --input-cache $ic
  run "knn $ic topk k=33" knn --input exponential:$N --param k=33 --input-cache $ic
done

# The planner's choices, including forced block sizes.
for p in sdh 2pcf kde selfjoin knn; do
  run "$p planned" $p --input uniform:$N
  run "$p planned block 32" $p --input uniform:$N --block-size 32
  run "$p planned block 1024" $p --input uniform:$N --block-size 1024
done
run "rdf planned" rdf --input uniform:$NA --input uniform:$NB
run "nlj planned" nlj --input uniform:$NA --input uniform:$NB --param d=3

# One and two points.
for n in 1 2; do
  for p in sdh 2pcf kde selfjoin knn; do
    run "$p n=$n" $p --input uniform:$n
  done
  run "rdf n=$n" rdf --input uniform:$n --input uniform:$n
  run "nlj n=$n" nlj --input uniform:$n --input uniform:$n --param d=1000
done

# Small blocks: the input streamed as block pairs.
for p in sdh 2pcf kde knn; do
  run "$p streamed blocks of 1000" $p --input uniform:$N --block-points 1000
done
run "selfjoin streamed blocks of 700" selfjoin --input uniform:$N --param eps=0.05 --block-points 700
run "rdf streamed blocks of 600" rdf --input uniform:$NA --input uniform:$NB --block-points 600
run "nlj streamed blocks of 500" nlj --input uniform:$NA --input uniform:$NB --param d=2 --block-points 500
run "knn streamed, 1 stream" knn --input uniform:$N --block-points 1000 --streams 1
run "sdh streamed, 4 streams" sdh --input uniform:$N --block-points 512 --streams 4

# The direct output buffer overflows: resume points and pool growth.
run "selfjoin pool of 1024 pairs" selfjoin --input uniform:$N --param eps=0.05 --pool-pairs 1024
run "selfjoin pool of 20000 pairs" selfjoin --input uniform:$N --param eps=0.05 --pool-pairs 20000
run "selfjoin pool of 20000, streamed" selfjoin --input uniform:$N --param eps=0.05 --pool-pairs 20000 --block-points 1000
run "nlj pool of 4096 pairs" nlj --input uniform:$NA --input uniform:$NB --param d=5 --pool-pairs 4096
run "nlj pool of 4096, naive input" nlj --input uniform:$NA --input uniform:$NB --param d=5 --pool-pairs 4096 --input-cache naive
run "selfjoin pool of 3000, shuffle input" selfjoin --input clustered:$N --param eps=0.05 --pool-pairs 3000 --input-cache shuffle

# Larger inputs: verified on sampled rows.
run "2pcf 100000 points (sampled verify)" 2pcf --input uniform:100000 --param r=0.05
run "sdh 100000 points (sampled verify)" sdh --input clustered:100000 --param bins=500

# Two GPUs.
if [[ $GPUS -ge 2 ]]; then
  run "sdh 2 GPUs" sdh --input uniform:$N --gpus 0,1 --block-points 800
  run "rdf 2 GPUs" rdf --input uniform:$NA --input uniform:$NB --gpus 0,1 --block-points 500
  run "2pcf 2 GPUs" 2pcf --input uniform:$N --gpus 0,1 --block-points 700
  run "kde 2 GPUs" kde --input uniform:$N --gpus 0,1 --block-points 1000
  run "selfjoin 2 GPUs" selfjoin --input uniform:$N --param eps=0.05 --gpus 0,1 --block-points 700
  run "selfjoin 2 GPUs, pool of 4096" selfjoin --input uniform:$N --param eps=0.05 --gpus 0,1 --block-points 1000 --pool-pairs 4096
  run "knn 2 GPUs" knn --input uniform:$N --gpus 0,1 --block-points 1000
  run "nlj 2 GPUs" nlj --input uniform:$NA --input uniform:$NB --param d=2 --gpus 0,1 --block-points 500
  run "2pcf 2 GPUs whole" 2pcf --input uniform:200000 --gpus 0,1
else
  echo "note: one GPU visible: the two-GPU cases were not run"
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
