#!/usr/bin/env bash
# How many pairs the switch to fmaf in the squared distances moved, against a
# float64 reference: 2PCF (r = 0.1) and SDH (500 buckets) on 200,000 uniform
# points, computed by an old binary (plain sums), the current one on the GPU
# (fmaf), and the current one's CPU backend in f64 (the reference).
# Usage: OLD=path/to/old/twobs scripts/fma-check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
NEW=${TWOBS:-target/release/twobs}
OLD=${OLD:?set OLD to a binary from before the fmaf change}
N=${N:-200000}
run() {  # BINARY PROBLEM BACKEND ARGS...
  local bin=$1 problem=$2 backend=$3
  shift 3
  "$bin" run "$problem" --input "uniform:$N" --seed 11 --backend "$backend" --quiet --report - --out /tmp/fma-check.csv "$@" 2>/dev/null
}
python3 - "$OLD" "$NEW" <<'PY'
import json, subprocess, sys
old, new = sys.argv[1], sys.argv[2]
def run(binary, problem, backend, *args):
    cmd = [binary, "run", problem, "--input", "uniform:200000", "--seed", "11", "--backend", backend, "--quiet",
           "--report", "-", "--out", "/tmp/fma-check.csv", *args]
    return json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)["result"]
for problem, args in [("2pcf", ["--param", "r=0.1"]), ("sdh", ["--param", "bins=500"])]:
    ref = run(new, problem, "cpu", *args, "--f64")
    o, n = run(old, problem, "cuda", *args), run(new, problem, "cuda", *args)
    if problem == "2pcf":
        print(f"2pcf r = 0.1, 200000 points: f64 {ref['count']}, plain f32 sum {o['count']} ({o['count'] - ref['count']:+d}), fmaf {n['count']} ({n['count'] - ref['count']:+d})")
    else:
        d = lambda h: sum(abs(a - b) for a, b in zip(h["counts"], ref["counts"]))
        print(f"sdh 500 buckets, 200000 points: pairs in another bucket than f64's: plain f32 sum {d(o) // 2}, fmaf {d(n) // 2} (of {sum(ref['counts'])})")
PY
