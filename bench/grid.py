#!/usr/bin/env python3
"""The GPU's grid against its brute force, on the datasets of docs/benchmarks.md, in one call.

Each case runs `twobs run --backend cuda` with `--index grid` four times:
the first warms NVRTC's cache (a cold run uploads the inputs while NVRTC
compiles, which hides the upload), and the best of the other three is
reported; then once with `--index none`, the baseline, on the same data.
Context creation and compilation are reported apart from compute_s. Both results must be equal: counts and histograms as reported,
pairs as the sorted set (sha256). compute_s is the report's: input in host
memory to result in host memory, the grid's making included.

Datasets (numpy default_rng(12345)): the 2M 2-D points in [0, 100)^2, then
the next 1M 3-D points in [0, 100)^3; 1M 3-D points in the unit cube for
2PCF; int32 keys over the whole range for the band join. Beside each, a
clustered set: exponential coordinates (lambda = 40) with the cutoff scaled
so that a point has about as many neighbours on average. KNN, K = 16: the
first 1M of the 2-D points, the 3-D points, their exponential sets, and 10M
3-D points in [0, 100)^3 (default_rng(2468)); lists are compared whole.

With BENCH_HYBRID=1 each case also runs its grid with `--hybrid on` (the
CPU's threads take units from the back of the queue beside the GPU) three
times after a warm-up: the best compute_s, the CPU's share and busy time,
and whether its result equals brute force's. The GPU-alone runs report the
model's own call (`--hybrid auto`) and why.

Usage: bench/grid.py [OUT_DIR]   (TWOBS: the binary; BENCH_CASES: 0,2,...)
"""
import hashlib
import json
import os
import subprocess
import sys

import numpy as np

out = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "/tmp")
os.makedirs(out, exist_ok=True)
twobs = os.environ.get("TWOBS", "target/release/twobs")
os.environ.setdefault("TWOBS_CACHE", "/tmp/twobs-cache")

rng = np.random.default_rng(12345)
two_d = rng.random((2_000_000, 2), dtype=np.float32) * 100
three_d = rng.random((1_000_000, 3), dtype=np.float32) * 100
unit_cube = np.random.default_rng(12345).random((1_000_000, 3), dtype=np.float32)
expo = np.random.default_rng(54321)
expo_2d = (expo.exponential(1 / 40, (2_000_000, 2))).astype(np.float32)
expo_3d = (expo.exponential(1 / 40, (1_000_000, 3))).astype(np.float32)
keys = np.random.default_rng(12345)
band_a = keys.integers(-2**31, 2**31, size=1_000_000, dtype=np.int64).astype(np.int32)
knn_10m = np.random.default_rng(2468).random((10_000_000, 3), dtype=np.float32) * 100
band_b = keys.integers(-2**31, 2**31, size=1_000_000, dtype=np.int64).astype(np.int32)
expo_keys = np.random.default_rng(777)
expo_band_a = np.minimum(expo_keys.exponential(2**31 / 40, 1_000_000), 2**31 - 1).astype(np.int32)
expo_band_b = np.minimum(expo_keys.exponential(2**31 / 40, 1_000_000), 2**31 - 1).astype(np.int32)

# (label, problem, sets, params). Exponential cutoffs: the mean density of
# N lambda^d / 2^d points per unit volume gives the uniform set's neighbours.
CASES = [
    ("selfjoin 2M 2-D uniform, eps 0.2257", "selfjoin", [two_d], ["eps=0.2257"]),
    ("selfjoin 2M 2-D exponential, eps 0.000113", "selfjoin", [expo_2d], ["eps=0.000113"]),
    ("selfjoin 1M 3-D uniform, eps 1.9695", "selfjoin", [three_d], ["eps=1.9695"]),
    ("selfjoin 1M 3-D exponential, eps 0.000985", "selfjoin", [expo_3d], ["eps=0.000985"]),
    ("2PCF 1M 3-D unit cube, r 0.1", "2pcf", [unit_cube], ["r=0.1"]),
    ("2PCF 1M 3-D exponential, r 0.005", "2pcf", [expo_3d], ["r=0.005"]),
    ("band join 1M x 1M int32 uniform, d 1073", "nlj", [band_a, band_b], ["d=1073"]),
    ("band join 1M x 1M int32 exponential, d 1073", "nlj", [expo_band_a, expo_band_b], ["d=1073"]),
    ("KNN 1M 2-D uniform, K 16", "knn", [two_d[:1_000_000]], ["k=16"]),
    ("KNN 1M 2-D exponential, K 16", "knn", [expo_2d[:1_000_000]], ["k=16"]),
    ("KNN 1M 3-D uniform, K 16", "knn", [three_d], ["k=16"]),
    ("KNN 1M 3-D exponential, K 16", "knn", [expo_3d], ["k=16"]),
    ("KNN 10M 3-D uniform, K 16", "knn", [knn_10m], ["k=16"]),
]
only = os.environ.get("BENCH_CASES")
chosen = [c for i, c in enumerate(CASES) if only is None or str(i) in only.split(",")]


def run(problem, paths, params, index, backend="cuda", extra=()):
    report = os.path.join(out, "report.json")
    result = os.path.join(out, "result.npy")
    cmd = [twobs, "run", problem, *[x for p in paths for x in ("--input", p)],
           *[x for p in params for x in ("--param", p)], "--backend", backend, "--index", index,
           "--out", result, "--report", report, "--quiet", *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        return {"error": p.stderr.strip()[-400:]}
    r = json.load(open(report))
    t = r["timings"]
    g = t.get("gpu") or {}
    res = r["result"]
    digest = json.dumps({k: res.get(k) for k in ("count", "counts", "sum", "pairs")}, sort_keys=True)
    if res.get("kind") == "knn":
        # The lists themselves: neighbours and values, row by row.
        digest += hashlib.sha256(np.load(res["file"]).tobytes() + np.load(res["values_file"]).tobytes()).hexdigest()
    if res.get("kind") == "pairs" and res.get("file"):
        pairs = np.load(res["file"])
        pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
        digest += hashlib.sha256(pairs.tobytes()).hexdigest()
    for f in os.listdir(out):
        if f.startswith("result"):
            os.remove(os.path.join(out, f))
    return {"backend": backend, "compute_s": t["compute_s"], "index_s": t.get("index_s"), "grid_s": g.get("grid_s"),
            "kernel_s": g.get("kernel_s"), "upload_s": g.get("upload_s"), "download_s": g.get("download_s"),
            "context_s": g.get("context_s"), "combine_s": g.get("combine_s"), "setup_s": g.get("setup_s"),
            "teardown_s": g.get("teardown_s"), "compile_s": t["compile_s"], "launches": g.get("launches"),
            "pieces": g.get("pieces"),
            "visited": r["index"]["pairs"], "why": r["index"]["why"],
            "variant": r["plans"][0]["variant"] if r["plans"] else backend,
            "hybrid": g.get("hybrid"),
            "result": {k: res.get(k) for k in ("count", "pairs")}, "digest": digest}


rows = []
for label, problem, sets, params in chosen:
    paths = []
    for k, s in enumerate(sets):
        path = os.path.join(out, f"set{k}.npy")
        np.save(path, s)
        paths.append(path)
    runs = [run(problem, paths, params, "grid") for _ in range(4)][1:]
    ok = [r for r in runs if "error" not in r]
    grid = min(ok, key=lambda r: r["compute_s"]) if ok else runs[0]
    # Brute force of 10M points' KNN would take minutes: the CPU backend's
    # grid (equal to brute force in tests/grid.rs) is the reference there.
    if len(sets[0]) <= 2_000_000:
        brute = run(problem, paths, params, "none")
    else:
        brute = run(problem, paths, params, "grid", backend="cpu")
    row = {"case": label, "grid": grid, "grid_compute_all": [r.get("compute_s") for r in runs], "brute": brute,
           "equal": "digest" in grid and grid.get("digest") == brute.get("digest")}
    if os.environ.get("BENCH_HYBRID"):
        both = [run(problem, paths, params, "grid", extra=("--hybrid", "on")) for _ in range(4)][1:]
        ok = [r for r in both if "error" not in r]
        row["hybrid"] = min(ok, key=lambda r: r["compute_s"]) if ok else both[0]
        row["hybrid_compute_all"] = [r.get("compute_s") for r in both]
        row["hybrid_equal"] = "digest" in row["hybrid"] and row["hybrid"]["digest"] == brute.get("digest")
    for r in (row["grid"], row["brute"], row.get("hybrid", {})):
        r.pop("digest", None)
    rows.append(row)
    print(json.dumps(row), flush=True)
    for p in paths:
        os.remove(p)
json.dump(rows, open(os.path.join(out, "grid.json"), "w"), indent=1)
print("\n| case | grid compute_s | of which index_s | grid kernel_s | brute compute_s | brute kernel_s | equal |")
print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
for r in rows:
    g, b = r["grid"], r["brute"]
    print(f"| {r['case']} | {g.get('compute_s', 'err')} | {g.get('index_s')} | {g.get('kernel_s')} | "
          f"{b.get('compute_s', 'err')} | {b.get('kernel_s')} | {r['equal']} |")
if os.environ.get("BENCH_HYBRID"):
    print("\n| case | GPU alone compute_s | with the CPU compute_s | CPU share of pairs | CPU units | CPU busy s | equal | auto's call |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    for r in rows:
        g, h = r["grid"], r.get("hybrid", {})
        split = h.get("hybrid") or {}
        auto = (g.get("hybrid") or {}).get("why", "")
        print(f"| {r['case']} | {g.get('compute_s', 'err')} | {h.get('compute_s', h.get('error', 'err'))} | "
              f"{split.get('cpu_share')} | {split.get('cpu_units')} | {split.get('cpu_busy_s')} | "
              f"{r.get('hybrid_equal')} | {auto} |")
