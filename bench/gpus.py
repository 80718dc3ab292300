#!/usr/bin/env python3
"""Scaling over GPUs, in one device call: each case on 1 GPU and on
all of them, with each binary, the planner's own plan, uniform points (seed 7).

The table gives compute time (input in host memory to result in host memory;
the contexts and compilation are timed apart), kernel time, the report's
whole wall time, the speed-up over the same binary on one GPU, each GPU's
share of the pairs and its busy and idle time, and whether every run found
the same result. The first run of each binary compiles (and is not counted).
Writes $OUT/gpus.md and $OUT/gpus.json.

Usage: BINARIES=after=PATH BASELINE=before=PATH GPUS=2 bench/gpus.py
       (BASELINE runs on one GPU only; GPU_COUNTS=1,2,4 runs each case on
       each count instead of 1 and GPUS; BENCH_CASES=0,1 picks cases;
       BENCH_SCALE=0.1 shrinks them for a trial)
"""
import hashlib
import importlib.util
import json
import numpy as np
import os
import subprocess
import sys
import time

_spec = importlib.util.spec_from_file_location("check_big_pairs", os.path.join(os.path.dirname(__file__), "check-big-pairs.py"))
check_big_pairs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_big_pairs)

OUT = os.environ.get("OUT", "/tmp")
GPUS = int(os.environ.get("GPUS", "2"))
SCALE = float(os.environ.get("BENCH_SCALE", "1"))
BINARIES = [b.split("=", 1) for b in os.environ.get("BINARIES", "after=target/release/twobs").split(",")]
BASELINE = [b.split("=", 1) for b in os.environ.get("BASELINE", "").split(",") if b]
os.environ.setdefault("TWOBS_CACHE", "/tmp/twobs-cache")

CASES = [
    # (label, problem, points per set, sets, args)
    ("SDH 10M points, 500 buckets", "sdh", 10_000_000, 1, ["--param", "bins=500"]),
    ("RDF 5M x 5M, 500 shells, open box", "rdf", 5_000_000, 2, ["--param", "box=0", "--param", "r_max=0.5"]),
    # About 32 neighbours a point: pi eps^2 N = 32 in the unit square.
    ("selfjoin 10M 2-D, eps 0.001009", "selfjoin", 10_000_000, 1, ["--param", "eps=0.001009"]),
    ("selfjoin 30M 2-D, eps 0.000583", "selfjoin", 30_000_000, 1, ["--param", "eps=0.000583"]),
    # A cut-off histogram big enough to split: ~670 neighbours an atom within r_max.
    ("RDF 20M atoms, periodic, r_max 0.02", "rdf", 20_000_000, 1, ["--param", "r_max=0.02", "--param", "bins=200"]),
    # ~5,700 neighbours an atom: about a second of one H200's grid kernels.
    ("RDF 50M atoms, periodic, r_max 0.03", "rdf", 50_000_000, 1, ["--param", "r_max=0.03", "--param", "bins=300"]),
]

ONLY = {int(x) for x in os.environ.get("BENCH_CASES", ",".join(str(i) for i in range(len(CASES)))).split(",") if x}


def pair_digest(path):
    """Order-free digest of an N x 2 pair file (bench/check-big-pairs.py's), None for other results."""
    pairs = np.load(path, mmap_mode="r")
    if pairs.ndim != 2 or pairs.shape[1] != 2:
        return None  # a histogram or a count: the report's numbers say it all
    d = check_big_pairs.digest(path)
    return [d["pairs"], d["sum"], d["xor"]]


def run(binary, problem, n, sets, args, gpus):
    inputs = ["--input", f"uniform:{n}"] * sets
    out = os.path.join(OUT, "gpus.npy")
    if os.path.exists(out):
        os.remove(out)
    cmd = [binary, "run", problem, *inputs, *args, "--backend", "cuda", "--gpus", ",".join(map(str, range(gpus))),
           "--quiet", "--seed", "7", "--report", "-", "--out", out]
    start = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=500)
    process_s = time.monotonic() - start
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:300]}
    r = json.loads(p.stdout)
    t = r["timings"]
    g = t["gpu"]
    result = r["result"]
    summary = {k: result.get(k) for k in ("count", "counts", "sum")}
    if os.path.exists(out):  # pairs: the set, whatever order the GPUs wrote it in
        summary["pairs"] = pair_digest(out)
        os.remove(out)
    digest = hashlib.sha256(json.dumps(summary, sort_keys=True).encode()).hexdigest()[:16]
    return {
        "variant": r["plans"][0]["variant"],
        "compute_s": t["compute_s"],
        "index_s": t.get("index_s"),
        "combine_s": g.get("combine_s"),
        "download_s": g.get("download_s"),
        "kernel_s": g["kernel_s"],
        "setup_s": g["setup_s"],
        "context_s": g["context_s"],
        "compile_s": t["compile_s"],
        "total_s": t["total_s"],
        "process_s": process_s,
        "pieces": g.get("pieces"),
        "per_gpu": g.get("per_gpu", []),
        "pairs": int(r["pairs"]),
        "digest": digest,
    }


def main():
    rows = []
    for index, (label, problem, n, sets, args) in enumerate(CASES):
        if index not in ONLY:
            continue
        n = int(n * SCALE)
        counts = sorted({int(g) for g in os.environ.get("GPU_COUNTS", f"1,{GPUS}").split(",")})
        for name, binary, gpu_counts in [(n, b, (1,)) for n, b in BASELINE] + [(n, b, counts) for n, b in BINARIES]:
            # Compiles into the cache, outside the timings: a grid's kernels at the full size.
            grid = problem == "selfjoin" or "r_max=0.0" in " ".join(args)
            run(binary, problem, n if grid else 1000, sets, args, 1)
            base = None
            for gpus in gpu_counts:
                r = run(binary, problem, n, sets, args, gpus)
                r.update({"case": label, "points": n, "binary": name, "gpus": gpus})
                if gpus == 1:
                    base = r
                if "error" not in r and base and "error" not in base:
                    r["speedup"] = base["compute_s"] / r["compute_s"]
                    r["speedup_total"] = base["total_s"] / r["total_s"]
                rows.append(r)
                print(json.dumps(r), flush=True)
                with open(os.path.join(OUT, "gpus.json"), "w") as f:
                    json.dump(rows, f, indent=1)
    digests = {}
    for r in rows:
        digests.setdefault(r["case"], set()).add(r.get("digest"))
    table = ["| case | binary | GPUs | compute (s) | index (s) | kernel (s, summed over GPUs) | download, combine (s) | whole run (s) | speed-up (compute) | speed-up (whole) | per GPU: share, busy / idle (s) | same result |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for r in rows:
        if "error" in r:
            table.append(f"| {r['case']} | {r['binary']} | {r['gpus']} | {r['error']} | | | | | | | | |")
            continue
        per = "; ".join(f"GPU {g['ordinal']}: {100 * g['share']:.1f}%, {g['busy_s']:.2f} / {g['idle_s']:.2f}" for g in r["per_gpu"] if "busy_s" in g)
        same = "yes" if len(digests[r["case"]]) == 1 else "NO"
        table.append(
            f"| {r['case']} | {r['binary']} | {r['gpus']} | {r['compute_s']:.3f} | {r['index_s'] or 0:.3f} | {r['kernel_s']:.3f} | "
            f"{r['download_s'] or 0:.3f}, {r['combine_s'] or 0:.3f} | {r['total_s']:.3f} | "
            f"{r.get('speedup', 1):.3f}x | {r.get('speedup_total', 1):.3f}x | {per} | {same} |")
    text = "\n".join(table) + "\n"
    open(os.path.join(OUT, "gpus.md"), "w").write(text)
    print(text)
    return 0 if all(len(d) == 1 for d in digests.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
