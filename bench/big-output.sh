#!/usr/bin/env bash
# A big pair output on one GPU: 200k 2-D points in [0,1)^2 (numpy
# default_rng(12345), float32), eps 0.2: 2,101,396,758 pairs, 16.8 GB. Runs
# the GPU twice (the first also warms NVRTC's cache) and the CPU backend once
# under /usr/bin/time -v, prints compute/download seconds, the download's
# GB/s and peak host memory against the output's size, and checks that the
# GPU's pairs are the CPU's (bench/check-big-pairs.py).
#
# Usage: bench/big-output.sh [OUT_DIR]   (TWOBS: the binary; SKIP_CPU=1 skips the check)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-/tmp}}
TWOBS=${TWOBS:-target/release/twobs}
WORK=${WORK:-/tmp/big-output}
mkdir -p "$OUT" "$WORK"
export TWOBS_CACHE=${TWOBS_CACHE:-/tmp/twobs-cache}
python3 -c 'import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(12345).random((200_000, 2), dtype=np.float32))' "$WORK/p200k.npy"

summary() {  # report.json time.txt label
  python3 - "$1" "$2" "$3" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1]))
t = r["timings"]
rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(sys.argv[2]).read()).group(1))
wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", open(sys.argv[2]).read()).group(1)
pairs = int(r["result"]["pairs"])
size = pairs * 8
gpu = t.get("gpu", {})
down = gpu.get("download_s")
line = {"run": sys.argv[3], "pairs": pairs, "output_gb": size / 1e9, "compute_s": t["compute_s"],
        "kernel_s": gpu.get("kernel_s"), "download_s": down,
        "download_gb_s": size / 1e9 / down if down else None,
        "peak_rss_gb": rss_kb * 1024 / 1e9, "peak_over_output": rss_kb * 1024 / size, "wall": wall}
print(json.dumps(line))
PY
}

for i in 1 2; do
  /usr/bin/time -v "$TWOBS" run selfjoin --input "$WORK/p200k.npy" --param eps=0.2 --backend cuda --quiet \
    --out "$WORK/gpu.npy" --report "$OUT/big-gpu-$i.json" 2>"$OUT/big-gpu-time-$i.txt"
  summary "$OUT/big-gpu-$i.json" "$OUT/big-gpu-time-$i.txt" "gpu $i" | tee -a "$OUT/big-output.jsonl"
  [[ $i == 2 ]] || rm -f "$WORK/gpu.npy"
done
if [[ -z "${SKIP_CPU:-}" ]]; then
  /usr/bin/time -v "$TWOBS" run selfjoin --input "$WORK/p200k.npy" --param eps=0.2 --backend cpu --quiet \
    --out "$WORK/cpu.npy" --report "$OUT/big-cpu.json" 2>"$OUT/big-cpu-time.txt"
  summary "$OUT/big-cpu.json" "$OUT/big-cpu-time.txt" "cpu" | tee -a "$OUT/big-output.jsonl"
  python3 bench/check-big-pairs.py "$WORK/gpu.npy" "$WORK/cpu.npy" | tee "$OUT/big-check.txt"
fi
rm -rf "$WORK"
