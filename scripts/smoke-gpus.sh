#!/usr/bin/env bash
# A short check of the runs that share work between GPUs, on a machine of
# two or more (issue 36): the parity cases of several GPUs and grids, and
# the command lines that once panicked. Logs under $OUT (or /tmp).
#
# Usage: scripts/smoke-gpus.sh [PARITY_FILTER...]
set -uo pipefail
cd "$(dirname "$0")/.."
TWOBS=${TWOBS:-target/release/twobs}
PARITY=${PARITY:-target/release/parity}
LOG=${OUT:-/tmp}
export TWOBS_CACHE=${TWOBS_CACHE:-/tmp/twobs-cache}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
filters=("$@")
[[ ${#filters[@]} -gt 0 ]] || filters=(two-gpus)
for f in "${filters[@]}"; do
  "$PARITY" "$f" --test-threads 4 >"$LOG/parity-$f.log" 2>&1
  echo "parity $f: rc $?"
  grep -E "^test result|FAILED|panicked" "$LOG/parity-$f.log" | head -20
done
# The command lines of issue 36: each ran into index.rs:268 before.
cmd() {
  local name=$1
  shift
  local start=$(date +%s%N)
  "$TWOBS" run "$@" --backend cuda --quiet --report "$LOG/$name.json" --out "$LOG/$name.out.npy" >"$LOG/$name.log" 2>&1
  local rc=$?
  printf '%-28s rc %s  %6d ms  %s\n' "$name" "$rc" "$(( ($(date +%s%N) - start) / 1000000 ))" \
    "$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["schedule"].get("gpus","")[:150], "| compute", round(r["timings"]["compute_s"],3))' "$LOG/$name.json" 2>/dev/null || tail -c 300 "$LOG/$name.log")"
  rm -f "$LOG/$name.out.npy"
}
cmd sdh-1000 sdh --input uniform:1000
cmd sdh-8M sdh --input uniform:8000000 --param bins=500
cmd rdf-5Mx5M-open rdf --input uniform:5000000 --input uniform:5000000 --param box=0 --param r_max=0.5
cmd selfjoin-10M-2d selfjoin --input uniform:10000000 --param eps=0.001009
cmd selfjoin-10M-2d-one-gpu selfjoin --input uniform:10000000 --param eps=0.001009 --gpus 0
