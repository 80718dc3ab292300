#!/usr/bin/env bash
# What each MPI rank holds of the inputs, and what it costs, in
# one device call on a machine of two GPUs, from the bundle of
# scripts/carry-mpi.sh. Each case runs as 1 rank x 1 GPU (one process) and
# 2 ranks x 1 GPU (mpiexec; each rank sees its own GPU through
# CUDA_VISIBLE_DEVICES=$PMI_RANK), the first also as 1 rank x 2 GPUs:
#  - RDF 5M x 5M (open box, r_max = 0.5, 500 shells): two sets, every pair:
#    rank 0 sends rank 1 set B and, with each piece, its block of A (blocks
#    of 2^20 points: docs/architecture.md, "A rank's memory");
#  - RDF 3M x 2.5M (blocks that end short of 2^20) and KNN 1.5M x 300k
#    (k = 4, every pair: a group of pieces a block of queries), the same way;
#  - SDH 10M (one set, 500 buckets): both sets whole on every rank;
#  - on the CPU backend, SDH 2M x 10k (50 buckets, every pair): 2 ranks of
#    half the cores against one process of all of them (rows of A with the
#    pieces; the broadcast it replaced is compared in
#    docs/benchmarks.md, "MPI ranks").
# Prints a table: each rank's holding, input bytes held at most, bytes
# received, share of the pairs and compute time, and each result's digest,
# which must be one per case. Logs and summary.md under $OUT.
#
# Usage (on the device):
#   mkdir -p /tmp/mpi && tar -xJf .mpi-carry/bundle.tar.xz -C /tmp/mpi && /tmp/mpi/bin/ranks-memory.sh
# BENCH_SCALE=0.01 BACKEND=cpu: a dry run where no GPU is.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
export PATH=$here/bin:$PATH LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TWOBS_CACHE=${TWOBS_CACHE:-/tmp/twobs-cache} UCX_TLS=${UCX_TLS:-self,sm}
OUT=${OUT:-/tmp/ranks-memory}; mkdir -p "$OUT"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
SCALE=${BENCH_SCALE:-1}
BACKEND=${BACKEND:-cuda}
cores=$(nproc)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | tee "$OUT/gpus.txt"
: >"$OUT/runs.tsv"; : >"$OUT/runs.log"
cat > "$here/bin/on-rank-gpu" <<'ON'
#!/bin/sh
export CUDA_VISIBLE_DEVICES=${PMI_RANK:?not started by mpiexec}
exec twobs "$@"
ON
chmod +x "$here/bin/on-rank-gpu"

n() { python3 -c "print(max(2, int($1 * $SCALE)))"; }
run() { # case, label, result extension, then the command; report and result in $work, log appended to $OUT/runs.log
  local case=$1 label=$2 ext=$3; shift 3
  local start=$(date +%s.%N)
  # (each run at most 150 s: the whole call stays within the device's 600 s)
  timeout 150 "$@" --seed 7 --quiet --report "$work/$label.json" --out "$work/$label.$ext" >"$work/$label.log" 2>&1
  local rc=$? end=$(date +%s.%N)
  { echo "== $label rc=$rc: $*"; tail -5 "$work/$label.log"; } >>"$OUT/runs.log"
  printf '%s\t%s\t%s\t%s\t%s\n' "$case" "$label" "$ext" "$rc" "$(python3 -c "print(round($end - $start, 3))")" >>"$OUT/runs.tsv"
  echo "$label rc=$rc"
}
gpu_case() { # case, result extension, then the arguments of `twobs run`
  local case=$1 ext=$2; shift 2
  run "$case" "$case-1rank-1gpu" "$ext" twobs run "$@" --backend "$BACKEND" --gpus 0
  run "$case" "$case-2ranks-1gpu" "$ext" mpiexec -n 2 on-rank-gpu run "$@" --backend "$BACKEND"
}
# Kernels into the cache first (blocks of 2^20 on two ranks, whole sets on one), so that few runs pay NVRTC.
mpiexec -n 2 on-rank-gpu run rdf --input uniform:$(n 2200000) --input uniform:$(n 2200000) --param box=0 --param r_max=0.5 --backend "$BACKEND" --quiet --out "$work/warm.csv" >/dev/null 2>&1
twobs run rdf --input uniform:2000 --input uniform:2000 --param box=0 --param r_max=0.5 --backend "$BACKEND" --quiet --out "$work/warm.csv" >/dev/null 2>&1
rdf=(rdf --input uniform:$(n 5000000) --input uniform:$(n 5000000) --param box=0 --param r_max=0.5 --param bins=500)
gpu_case rdf5m csv "${rdf[@]}"
run rdf5m rdf5m-1rank-2gpus csv twobs run "${rdf[@]}" --backend "$BACKEND" --gpus 0,1
gpu_case rdf3m csv rdf --input uniform:$(n 3000000) --input clustered:$(n 2500000) --param box=0 --param r_max=0.5 --param bins=200
gpu_case knn npy knn --input uniform:$(n 1500000) --input uniform:$(n 300000) --param k=4 --index none
twobs run sdh --input uniform:2000 --param bins=500 --backend "$BACKEND" --quiet --out "$work/warm.csv" >/dev/null 2>&1
gpu_case sdh10m csv sdh --input uniform:$(n 10000000) --param bins=500
# The CPU: rows of A with the pieces, 2 ranks of half the cores against one process.
half=$(( cores / 2 > 0 ? cores / 2 : 1 ))
cpu=(sdh --input uniform:$(n 2000000) --input clustered:$(n 10000) --param bins=50 --index none --backend cpu)
twobs run sdh --input uniform:2000 --input uniform:100 --index none --backend cpu --quiet --out "$work/warm.csv" >/dev/null 2>&1
run cpu cpu-1rank csv twobs run "${cpu[@]}" --threads "$(( half * 2 ))"
run cpu cpu-2ranks csv mpiexec -n 2 twobs run "${cpu[@]}" --threads "$half"
python3 - "$OUT" "$work" <<'PY'
import hashlib, json, os, sys
out, work = sys.argv[1], sys.argv[2]
rows = ["| run | rc | process (s) | compute (s), slowest rank | per rank: holding, input held, received, share of pairs, compute (s) | result digest |",
        "| --- | ---: | ---: | ---: | --- | --- |"]
digests = {}
for line in open(os.path.join(out, "runs.tsv")):
    case, label, ext, rc, process = line.rstrip("\n").split("\t")
    try:
        r = json.load(open(os.path.join(work, label + ".json")))
        digest = hashlib.sha256(open(os.path.join(work, f"{label}.{ext}"), "rb").read()).hexdigest()[:16]
    except Exception as e:
        rows.append(f"| {label} | {rc} | {process} | failed: {e} | | |"); continue
    digests.setdefault(case, set()).add(digest)
    ranks = r.get("ranks") or []
    compute = max([x["compute_s"] for x in ranks] or [r["timings"]["compute_s"]])
    pairs = sum(x["pairs"] for x in ranks) or 1
    mb = lambda b: f"{b / 1e6:.1f} MB"
    per = "; ".join(f"rank {x['rank']}: {x['holding']}, {mb(x['input_bytes'])}, {mb(x['received_bytes'])}, {100 * x['pairs'] / pairs:.1f}%, {x['compute_s']:.3f}" for x in ranks) or "one process"
    rows.append(f"| {label} | {rc} | {float(process):.3f} | {compute:.3f} | {per} | {digest} |")
rows.append("")
for case, d in digests.items():
    rows.append(f"{case}: {'digests equal' if len(d) == 1 else 'DIGESTS DIFFER: ' + ', '.join(sorted(d))}")
text = "\n".join(rows) + "\n"
print(text)
open(os.path.join(out, "summary.md"), "w").write(text)
PY
