#!/usr/bin/env bash
# MPI ranks against GPUs of one process, in one device call on a
# machine of two GPUs: SDH 10M points (500 buckets) and RDF 5M x 5M (open
# box, 500 shells), each as 1 rank x 1 GPU, 2 ranks x 1 GPU (mpiexec; each
# rank sees its own GPU through CUDA_VISIBLE_DEVICES=$PMI_RANK) and
# 1 rank x 2 GPUs, uniform points (seed 7), kernels compiled into the cache
# by a small run first. A tiny 2-rank run comes first. Logs and reports
# under $OUT; the table last. Runs from the bundle of scripts/carry-mpi.sh.
#
# Usage (on the device): tar -xJf .mpi-carry/bundle.tar.xz -C /tmp/mpi && /tmp/mpi/bin/ranks.sh
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
export PATH=$here/bin:$PATH LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TWOBS_CACHE=/tmp/twobs-cache UCX_TLS=${UCX_TLS:-self,sm}
OUT=${OUT:-/tmp/ranks}; mkdir -p "$OUT"
SCALE=${BENCH_SCALE:-1}
BACKEND=${BACKEND:-cuda}   # cpu: a dry run of the script where no GPU is
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null
rm -f "$OUT/runs.txt"
# Each rank on the GPU of its rank number.
cat > "$here/bin/on-rank-gpu" <<'ON'
#!/bin/sh
export CUDA_VISIBLE_DEVICES=${PMI_RANK:?not started by mpiexec}
exec twobs "$@"
ON
chmod +x "$here/bin/on-rank-gpu"

mpiexec -n 2 on-rank-gpu run sdh --input uniform:100000 --backend "$BACKEND" --report "$OUT/tiny.json" --out "$OUT/tiny.csv" >"$OUT/tiny.log" 2>&1
echo "tiny: 2 ranks, SDH 100k: rc $?"; tail -4 "$OUT/tiny.log"

n() { python3 -c "print(int($1 * $SCALE))"; }
run() { # label, then the command; its report in $OUT/$label.json
  local label=$1; shift
  local start=$(date +%s.%N)
  "$@" --backend "$BACKEND" --seed 7 --quiet --report "$OUT/$label.json" --out "$OUT/$label.csv" >"$OUT/$label.log" 2>&1
  local rc=$? end=$(date +%s.%N)
  echo "$label rc=$rc process_s=$(python3 -c "print(round($end - $start, 3))")" | tee -a "$OUT/runs.txt"
}
sdh=(run sdh --input uniform:$(n 10000000) --param bins=500)
rdf=(run rdf --input uniform:$(n 5000000) --input uniform:$(n 5000000) --param box=0 --param r_max=0.5)
for case in sdh rdf; do
  if [[ $case == sdh ]]; then args=("${sdh[@]}"); else args=("${rdf[@]}"); fi
  twobs run "${args[1]}" --input uniform:2000 --backend "$BACKEND" --quiet --out "$OUT/warm.csv" >/dev/null 2>&1
  run "$case-1rank-1gpu" twobs "${args[@]}" --gpus 0
  run "$case-2ranks-1gpu" mpiexec -n 2 on-rank-gpu "${args[@]}"
  run "$case-1rank-2gpus" twobs "${args[@]}" --gpus 0,1
done
python3 - "$OUT" <<'PY'
import hashlib, json, os, sys
out = sys.argv[1]
process = {l.split()[0]: float(l.split("process_s=")[1]) for l in open(os.path.join(out, "runs.txt"))}
rows = ["| case | run | compute (s), slowest rank | whole process (s) | speed-up (compute) | speed-up (process) | per rank: share of pairs, compute (s) | result digest |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | --- |"]
for case in ("sdh", "rdf"):
    base = None
    for run in ("1rank-1gpu", "2ranks-1gpu", "1rank-2gpus"):
        label = f"{case}-{run}"
        try:
            r = json.load(open(os.path.join(out, label + ".json")))
        except Exception as e:
            rows.append(f"| {case} | {run} | failed: {e} | | | | | |"); continue
        ranks = r.get("ranks") or []
        compute = max([x["compute_s"] for x in ranks] or [r["timings"]["compute_s"]])
        pairs = sum(x["pairs"] for x in ranks) or 1
        per = "; ".join(f"rank {x['rank']}: {100 * x['pairs'] / pairs:.1f}%, {x['compute_s']:.3f}" for x in ranks)
        digest = hashlib.sha256(open(os.path.join(out, label + ".csv"), "rb").read()).hexdigest()[:16]
        base = base or (compute, process[label])
        rows.append(f"| {case} | {run} | {compute:.3f} | {process[label]:.3f} | {base[0] / compute:.3f}x | {base[1] / process[label]:.3f}x | {per} | {digest} |")
print("\n".join(rows))
open(os.path.join(out, "ranks.md"), "w").write("\n".join(rows) + "\n")
PY
