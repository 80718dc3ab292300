#!/usr/bin/env bash
# What each MPI rank holds of the inputs, and what it costs (issue 34), in
# one device call on a machine of two GPUs, from the bundle of
# scripts/carry-mpi.sh:
#  - RDF 5M x 5M (open box, 500 shells) and SDH 10M (500 buckets), each as
#    1 rank x 1 GPU, 2 ranks x 1 GPU (mpiexec; each rank sees its own GPU
#    through CUDA_VISIBLE_DEVICES=$PMI_RANK) and 1 rank x 2 GPUs: results'
#    digests (they must be equal), compute time, and each rank's holding,
#    input_bytes and received_bytes from the report (GPU runs hold both sets
#    whole: docs/architecture.md, "A rank's memory");
#  - on the CPU backend, sdh A x B (2M x 10k, 50 buckets, every pair) on 2 ranks of half
#    the cores each: --rank-inputs auto (B whole, A's rows with each piece)
#    against --rank-inputs whole (one broadcast), digests equal.
# Logs, reports and summary.md under $OUT (at most 8 files come back: the
# reports are folded into summary.md and runs.tsv).
#
# Usage (on the device):
#   mkdir -p /tmp/mpi && tar -xJf .mpi-carry/bundle.tar.xz -C /tmp/mpi && /tmp/mpi/bin/bench-ranks-memory.sh
# BENCH_SCALE=0.01 BACKEND=cpu: a dry run where no GPU is.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
export PATH=$here/bin:$PATH LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TWOBS_CACHE=/tmp/twobs-cache UCX_TLS=${UCX_TLS:-self,sm}
OUT=${OUT:-/tmp/bench-ranks-memory}; mkdir -p "$OUT"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
SCALE=${BENCH_SCALE:-1}
BACKEND=${BACKEND:-cuda}
cores=$(nproc)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | tee "$OUT/gpus.txt"
: >"$OUT/runs.tsv"
cat > "$here/bin/on-rank-gpu" <<'ON'
#!/bin/sh
export CUDA_VISIBLE_DEVICES=${PMI_RANK:?not started by mpiexec}
exec twobs "$@"
ON
chmod +x "$here/bin/on-rank-gpu"

n() { python3 -c "print(max(2, int($1 * $SCALE)))"; }
run() { # label, then the command; its report and result in $work, its log appended to $OUT/runs.log
  local label=$1; shift
  local start=$(date +%s.%N)
  # (each run at most 150 s: the whole call stays within the device's 600 s)
  timeout 150 "$@" --seed 7 --quiet --report "$work/$label.json" --out "$work/$label.csv" >"$work/$label.log" 2>&1
  local rc=$? end=$(date +%s.%N)
  { echo "== $label rc=$rc: $*"; tail -5 "$work/$label.log"; } >>"$OUT/runs.log"
  printf '%s\t%s\t%s\n' "$label" "$rc" "$(python3 -c "print(round($end - $start, 3))")" >>"$OUT/runs.tsv"
  echo "$label rc=$rc"
}
rdf=(run rdf --input uniform:$(n 5000000) --input uniform:$(n 5000000) --param box=0 --param r_max=0.5 --backend "$BACKEND")
sdh=(run sdh --input uniform:$(n 10000000) --param bins=500 --backend "$BACKEND")
for case in rdf sdh; do
  if [[ $case == sdh ]]; then args=("${sdh[@]}"); else args=("${rdf[@]}"); fi
  # Kernels into the cache first, so that no run below pays NVRTC.
  twobs "${args[@]:0:2}" --input uniform:2000 $([[ $case == rdf ]] && echo --input uniform:2000 --param box=0) --backend "$BACKEND" --quiet --out "$work/warm.csv" >/dev/null 2>&1
  run "$case-1rank-1gpu" twobs "${args[@]}" --gpus 0
  run "$case-2ranks-1gpu" mpiexec -n 2 on-rank-gpu "${args[@]}"
  run "$case-1rank-2gpus" twobs "${args[@]}" --gpus 0,1
done
# The CPU: rows of A with the pieces against one broadcast of both sets.
half=$(( cores / 2 > 0 ? cores / 2 : 1 ))
cpu=(run sdh --input uniform:$(n 2000000) --input clustered:$(n 10000) --param bins=50 --index none --backend cpu)
twobs run sdh --input uniform:2000 --input uniform:100 --index none --backend cpu --quiet --out "$work/warm.csv" >/dev/null 2>&1
run cpu-1rank twobs "${cpu[@]}" --threads "$(( half * 2 ))"
run cpu-2ranks-rows mpiexec -n 2 twobs "${cpu[@]}" --threads "$half" --rank-inputs auto
run cpu-2ranks-whole mpiexec -n 2 twobs "${cpu[@]}" --threads "$half" --rank-inputs whole
python3 - "$OUT" "$work" <<'PY'
import hashlib, json, os, sys
out, work = sys.argv[1], sys.argv[2]
runs = {l.split("\t")[0]: (int(l.split("\t")[1]), float(l.split("\t")[2])) for l in open(os.path.join(out, "runs.tsv"))}
rows = ["| run | rc | process (s) | compute (s), slowest rank | per rank: holding, input held, received, share of pairs, compute (s) | result digest |",
        "| --- | ---: | ---: | ---: | --- | --- |"]
digests = {}
for label, (rc, process) in runs.items():
    try:
        r = json.load(open(os.path.join(work, label + ".json")))
        digest = hashlib.sha256(open(os.path.join(work, label + ".csv"), "rb").read()).hexdigest()[:16]
    except Exception as e:
        rows.append(f"| {label} | {rc} | {process} | failed: {e} | | |"); continue
    digests.setdefault(label.split("-")[0], set()).add(digest)
    ranks = r.get("ranks") or []
    compute = max([x["compute_s"] for x in ranks] or [r["timings"]["compute_s"]])
    pairs = sum(x["pairs"] for x in ranks) or 1
    mb = lambda b: f"{b / 1e6:.1f} MB"
    per = "; ".join(f"rank {x['rank']}: {x['holding']}, {mb(x['input_bytes'])}, {mb(x['received_bytes'])}, {100 * x['pairs'] / pairs:.1f}%, {x['compute_s']:.3f}" for x in ranks) or "one process"
    rows.append(f"| {label} | {rc} | {process:.3f} | {compute:.3f} | {per} | {digest} |")
rows.append("")
for case, d in digests.items():
    rows.append(f"{case}: {'digests equal' if len(d) == 1 else 'DIGESTS DIFFER: ' + ', '.join(sorted(d))}")
text = "\n".join(rows) + "\n"
print(text)
open(os.path.join(out, "summary.md"), "w").write(text)
PY
