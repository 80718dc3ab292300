#!/usr/bin/env bash
# Points already on the GPU, and the Python package's call overhead (issue 32),
# in one device call. Here first:
#   scripts/build-device.sh && scripts/fetch-peer-wheels.sh
# then (one GPU; the issue's figures are an H200's):
#   run (kind nvidia-h200, carry ["target/wheels", "target/peer-wheels"]): scripts/gpu-pydev.sh
# It installs the twobs wheel and jz-tree into /tmp/site (the image's CuPy,
# PyTorch, JAX, numpy and pytest are used as they are), then:
#   1. pytest on the GPU: python/tests/test_gpu.py (every function against the
#      CPU backend; points read on the GPU against the host path, plans
#      compared, CuPy / PyTorch / JAX, streams, NaN, lifetimes) and
#      test_gpu_arrays.py;
#   2. scripts/bench-python.py session numpy knn-gpu: a session's second call
#      on 100k points, numpy-to-numpy KNN 1M and g(r) 1M, KNN K=16 on CuPy
#      1M and 10M beside jz-tree on the same points (neighbour sets compared,
#      and every list equal to the numpy path's);
#   3. the engine's own account of each KNN call (take, schedule, grid, kernel).
# Logs in $OUT: pytest.txt, bench.txt, bench-python.jsonl, summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-pydev}; mkdir -p "$OUT"
export TWOBS_CACHE=/tmp/twobs-cache
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import sys, numpy, cupy, torch, jax; print(sys.version.split()[0], "numpy", numpy.__version__, "cupy", cupy.__version__, "torch", torch.__version__, "jax", jax.__version__, jax.devices())'
} 2>&1 | tee "$OUT/summary.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  target/wheels/twobs-*.whl target/peer-wheels/*.whl 2>&1 | tail -3
export PYTHONPATH=/tmp/site
python3 -c 'import twobs; print("twobs", twobs.__file__, twobs.default_session().backend)' 2>&1 | tee -a "$OUT/summary.txt"
# The tests import the installed package, not the checkout's python/twobs (which has no extension there).
timeout 900 python3 -m pytest -q -p no:cacheprovider \
  python/tests/test_gpu.py python/tests/test_gpu_arrays.py 2>&1 | tee "$OUT/pytest.txt" | tail -25
echo "pytest: $(tail -1 "$OUT/pytest.txt")" >> "$OUT/summary.txt"
OUT="$OUT" timeout 900 python3 scripts/bench-python.py session numpy knn-gpu 2>&1 | tee "$OUT/bench.txt"
python3 - "$OUT/bench-python.jsonl" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1])]
def best(case, key, **match):
    vals = [r[key] for r in rows if r.get("case") == case and key in r and all(r.get(k) == v for k, v in match.items())]
    return (min(vals), statistics.median(vals)) if vals else None
print("session 2nd+ call, g(r) 100k: wall (best, median)", best("session", "wall_s"), "outside kernels", best("session", "outside_kernels_s"))
print("numpy knn 1M:", best("numpy", "wall_s", job="knn 1M K=16"))
print("numpy g(r) 1M:", best("numpy", "wall_s", job="g(r) 1M atoms box 100 r_max 5"))
for n in (1_000_000, 10_000_000):
    print(f"cupy knn {n}: twobs", best("knn-gpu", "twobs_s", n=n), "jz-tree", best("knn-gpu", "jztree_s", n=n))
keys = ("wall_s", "gpu_take_s", "index_s", "grid_s", "kernel_s", "download_s", "setup_s", "teardown_s", "prepare_s", "gpu_wall_s", "take_s", "run_s", "give_s")
for r in rows:
    if r.get("job") in ("session.run", "knn 1M K=16 (session.run)"):
        print(r["case"], r.get("n", ""), r["job"], {k: round(r[k] * 1e3, 3) for k in keys if k in r}, "ms")
    if r.get("case") == "knn-gpu" and ("same_sets" in r or "equal_to_numpy" in r or "error" in r):
        print(r)
    if "error" in r:
        print("ERROR", r)
PY
