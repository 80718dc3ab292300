#!/usr/bin/env python3
"""The CPU backend's grid against scipy's cKDTree on the same machine and data.

Self-joins (every pair within eps) on the issue's datasets, generated here
with numpy default_rng(12345): 200k 3-D points in [0, 1)^3 with eps = 0.01,
the 2M 2-D points in [0, 100)^2 with eps = 0.2257, and the next 1M 3-D points
in [0, 100)^3 with eps = 1.9695. twobs runs with
--backend cpu on every core; its time is the report's compute_s (grid made
and pairs found, input and result in host memory). cKDTree's time is the
tree's build plus query_pairs (output_type="ndarray"), on every core where
the query takes workers. Both pair counts must be equal.

Then KNN with k = 8 on the 200k 3-D points (cKDTree's query, k + 1 with the
point itself, on every core).

Usage: scripts/bench-cpu-kdtree.py [OUT_DIR]   (TWOBS: the binary)
"""
import json
import os
import subprocess
import sys
import time

import numpy as np

out = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "/tmp")
twobs = os.environ.get("TWOBS", "target/release/twobs")
rng = np.random.default_rng(12345)
two_d = rng.random((2_000_000, 2), dtype=np.float32) * 100
three_d = rng.random((1_000_000, 3), dtype=np.float32) * 100
cases = [
    ("selfjoin 200k 3-D eps 0.01", np.random.default_rng(12345).random((200_000, 3), dtype=np.float32), 0.01),
    ("selfjoin 2M 2-D eps 0.2257", two_d, 0.2257),
    ("selfjoin 1M 3-D eps 1.9695", three_d, 1.9695),
]
try:
    from scipy.spatial import cKDTree
except ImportError:
    cKDTree = None
rows = []
for name, pts, eps in cases:
    path = os.path.join(out, "points.npy")
    np.save(path, pts)
    report = os.path.join(out, "report.json")
    best = None
    for _ in range(3):
        subprocess.run([twobs, "run", "selfjoin", "--input", path, "--param", f"eps={eps}", "--backend", "cpu",
                        "--out", os.path.join(out, "pairs.npy"), "--report", report, "--quiet"], check=True)
        r = json.load(open(report))
        if best is None or r["timings"]["compute_s"] < best["timings"]["compute_s"]:
            best = r
    ours = best["timings"]["compute_s"]
    our_pairs = best["result"]["pairs"]
    row = {"case": name, "twobs_cpu_s": ours, "twobs_index_s": best["timings"].get("index_s"),
           "pairs": our_pairs, "device": best["device"], "index": best["index"]["why"]}
    if cKDTree is not None:
        times = []
        for _ in range(3):
            t = time.perf_counter()
            tree = cKDTree(pts.astype(np.float64))
            found = tree.query_pairs(eps, output_type="ndarray")
            times.append(time.perf_counter() - t)
        row["ckdtree_s"] = min(times)
        row["ckdtree_pairs"] = int(len(found))
        row["ratio"] = ours / min(times)
    else:
        row["ckdtree_s"] = None
    rows.append(row)
    print(json.dumps(row), flush=True)
    os.remove(path)
    os.remove(os.path.join(out, "pairs.npy"))
# KNN, k = 8, on the 200k 3-D points: twobs's search of rings against
# cKDTree's query of k + 1 (the point itself comes first there). The lists
# agree where the neighbour sets are equal (a tie at the K-th may go either
# way in cKDTree, always to the smaller index in twobs).
pts = np.random.default_rng(12345).random((200_000, 3), dtype=np.float32)
path = os.path.join(out, "points.npy")
np.save(path, pts)
report = os.path.join(out, "report.json")
best = None
for _ in range(3):
    subprocess.run([twobs, "run", "knn", "--input", path, "--param", "k=8", "--backend", "cpu",
                    "--out", os.path.join(out, "knn.npy"), "--report", report, "--quiet"], check=True)
    r = json.load(open(report))
    if best is None or r["timings"]["compute_s"] < best["timings"]["compute_s"]:
        best = r
ids = np.load(os.path.join(out, "knn.npy"))
row = {"case": "knn 200k 3-D k 8", "twobs_cpu_s": best["timings"]["compute_s"],
       "twobs_index_s": best["timings"].get("index_s"), "device": best["device"], "index": best["index"]["why"]}
if cKDTree is not None:
    times = []
    for _ in range(3):
        t = time.perf_counter()
        tree = cKDTree(pts.astype(np.float64))
        _, theirs = tree.query(pts.astype(np.float64), k=9, workers=-1)
        times.append(time.perf_counter() - t)
    row["ckdtree_s"] = min(times)
    row["ratio"] = row["twobs_cpu_s"] / min(times)
    same = [set(a) == set(b[b != i]) for i, (a, b) in enumerate(zip(ids, theirs))]
    row["rows_with_equal_neighbour_sets"] = float(np.mean(same))
rows.append(row)
print(json.dumps(row), flush=True)
for f in ("points.npy", "knn.npy", "knn_values.npy"):
    os.remove(os.path.join(out, f))
json.dump(rows, open(os.path.join(out, "bench-cpu-kdtree.json"), "w"), indent=1)
