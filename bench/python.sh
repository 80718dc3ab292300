#!/usr/bin/env bash
# The Python package on one GPU beside the peers a user would call instead,
# in one device call: the table of docs/benchmarks.md, "Python calls". A
# session's second g(r) call on 100k atoms against its first call's compute
# + 1 ms, g(r) over 50 frames of 100k atoms beside freud, numpy KNN 1M and
# g(r) 1M, and KNN K=16 of 1M and 10M points held by CuPy beside jz-tree;
# each with the engine's own account of the call. Here first:
#   scripts/build-device.sh && scripts/fetch-peer-wheels.sh
# and, for a baseline in the same call (optional), another build's wheel in
# target/wheels-base (build-device.sh on that code, copy its
# target/wheels/twobs-*.whl there, rebuild on this code). Then on the GPU
# machine, carrying target/wheels, target/peer-wheels (and target/wheels-base):
#   bench/python.sh
# It installs twobs, jz-tree and freud into /tmp/site (the image's CuPy,
# PyTorch, JAX and numpy as they are), then:
#   1. bench/python-calls.py session frames numpy knn-gpu (every KNN list on the
#      GPU compared with the numpy path's, jz-tree's neighbour sets with twobs's);
#   2. the same with the baseline wheel, where target/wheels-base holds one;
#   3. the table: each job, best / median, and the engine's account;
#   4. the second call over fresh processes (bench/second-call.sh,
#      SECOND_ROUNDS rounds, 5 by default, each wheel in turn), medians.
# The GPU tests of the package are scripts/gpu-suite.sh python.
# Logs in $OUT: summary.txt (the table), bench.txt, python-calls.jsonl, base/.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/bench-python}; mkdir -p "$OUT"
export TWOBS_CACHE=/tmp/twobs-cache
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import sys, numpy, cupy, torch, jax; print(sys.version.split()[0], "numpy", numpy.__version__, "cupy", cupy.__version__, "torch", torch.__version__, "jax", jax.__version__, jax.devices())'
} 2>&1 | tee "$OUT/summary.txt"
install_wheels() {  # wheel dir, site dir
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$2" \
    "$1"/twobs-*.whl target/peer-wheels/*.whl 2>&1 | tail -3
}
install_wheels target/wheels /tmp/site
export PYTHONPATH=/tmp/site
python3 -c 'import twobs; print("twobs", twobs.__file__, twobs.default_session().backend)' 2>&1 | tee -a "$OUT/summary.txt"
failed=0
OUT="$OUT" timeout 900 python3 bench/python-calls.py session frames numpy knn-gpu 2>&1 | tee "$OUT/bench.txt"
rc=${PIPESTATUS[0]}
((rc == 0)) || failed=$rc
if ls target/wheels-base/twobs-*.whl >/dev/null 2>&1; then
  mkdir -p "$OUT/base"
  install_wheels target/wheels-base /tmp/site-base
  PYTHONPATH=/tmp/site-base OUT="$OUT/base" timeout 900 python3 bench/python-calls.py session numpy knn-gpu \
    > "$OUT/base/bench.txt" 2>&1
fi
python3 - "$OUT" <<'PY' | tee -a "$OUT/summary.txt"
import json, os, statistics, sys
out = sys.argv[1]

def rows_of(path):
    return [json.loads(l) for l in open(path)] if os.path.exists(path) else []

def ms(vals):
    return f"{1e3 * min(vals):.2f} / {1e3 * statistics.median(vals):.2f}" if vals else "-"

def table(rows, title):
    def vals(case, key, **match):
        return [r[key] for r in rows if r.get("case") == case and key in r
                and all(r.get(k) == v for k, v in match.items())]
    def account(case, **match):
        runs = [r for r in rows if r.get("case") == case and "kernel_s" in r
                and all(r.get(k) == v for k, v in match.items())]
        if not runs:
            return ""
        med = lambda k: 1e3 * statistics.median([r.get(k, 0.0) for r in runs])
        schedule = med("index_s") - med("grid_s")
        return (f"take {med('gpu_take_s') or med('take_s'):.2f}, schedule {schedule:.2f}, grid {med('grid_s'):.2f}, "
                f"kernel {med('kernel_s'):.2f}, setup {med('setup_s'):.2f}, upload {med('upload_s'):.2f}, "
                f"download {med('download_s'):.2f}, prepare {med('prepare_s'):.2f}, give {med('give_s'):.2f} "
                f"(engine wall {med('gpu_wall_s'):.2f}, call {med('wall_s'):.2f})")
    first = [r for r in rows if r.get("case") == "session" and r.get("call") == 0]
    bound = f"{1e3 * first[0]['compute_s'] + 1:.2f} ms" if first else "?"
    later = [r["wall_s"] for r in rows if r.get("case") == "session" and r.get("call", 0) > 0]
    print(f"\n{title}: best / median ms; the engine's account, medians (ms)")
    print("| job | target | twobs | jz-tree | account |")
    print("| --- | ---: | ---: | ---: | --- |")
    second = [r["wall_s"] for r in rows if r.get("case") == "session" and r.get("call") == 1]
    print(f"| session's 2nd call, g(r) 100k | first's compute + 1 = {bound} | {ms(second)} | | |")
    print(f"| session's 2nd+ calls, g(r) 100k | first's compute + 1 = {bound} | {ms(later)} | | {account('session')} |")
    frames = vals("frames", "twobs_s")
    freud = [r for r in rows if r.get("case") == "frames" and "freud_s" in r]
    peer = (f"freud, {freud[0]['freud_threads']} threads: {freud[0]['freud_s']:.2f} s; "
            f"bins differing {freud[0]['bins_differing']}") if freud else "freud: not run"
    if frames:
        print(f"| g(r), 50 frames of 100k atoms (s) | 0.3 | {min(frames):.3f} / {statistics.median(frames):.3f} | | {peer} |")
    print(f"| numpy KNN 1M K=16 | 20 | {ms(vals('numpy', 'wall_s', job='knn 1M K=16'))} | | "
          f"{account('numpy', job='knn 1M K=16 (session.run)')} |")
    print(f"| numpy g(r) 1M | 15 | {ms(vals('numpy', 'wall_s', job='g(r) 1M atoms box 100 r_max 5'))} | | |")
    for n, target in ((1_000_000, 5), (10_000_000, 35)):
        print(f"| CuPy KNN {n // 10**6}M K=16 | {target} | {ms(vals('knn-gpu', 'twobs_s', n=n))} | "
              f"{ms(vals('knn-gpu', 'jztree_s', n=n))} | {account('knn-gpu', n=n, job='session.run')} |")
    firsts = [f"{r['case']} {r.get('job') or r.get('n')}: {1e3 * r['first_s']:.1f} ms" for r in rows if "first_s" in r]
    print("  first calls (apart from the medians):", "; ".join(firsts))
    for r in rows:
        if r.get("case") == "knn-gpu" and ("same_sets" in r or "equal_to_numpy" in r):
            print("  ", {k: v for k, v in r.items() if k != "case"})
        if "error" in r:
            print("ERROR", r)

table(rows_of(f"{out}/python-calls.jsonl"), "this build")
if os.path.exists(f"{out}/base/python-calls.jsonl"):
    table(rows_of(f"{out}/base/python-calls.jsonl"), "baseline (target/wheels-base), same machine")
PY
# The second call again, over fresh processes (one second call each), this build and the baseline's, turn about.
wheels=target/wheels
ls target/wheels-base/twobs-*.whl >/dev/null 2>&1 && wheels="$wheels target/wheels-base"
WHEELS=$wheels ROUNDS=${SECOND_ROUNDS:-5} OUT="$OUT/second" \
  timeout 900 bench/second-call.sh 2>&1 | grep -E "^[a-z-]+: 2nd call median" | tee -a "$OUT/summary.txt"
exit "$failed"
