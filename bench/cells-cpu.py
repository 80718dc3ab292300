#!/usr/bin/env python3
"""Log-binned pair counts on the CPU: twobs's cell hierarchy beside
brute force, Corrfunc's DD and TreeCorr's NNCorrelation (bin_slop=0), on the
same points.

Points (numpy default_rng(SEED)): `uniform` in the unit cube, or `clustered`
(16 Gaussian clusters of sigma 0.02 clamped to the cube, as twobs's
clustered:N). Buckets: BINS log buckets from LO to HI (20 from 0.001 to 0.5
of the box by default). twobs runs sdh --log-bins from the .npy (its driver
compiled by a warm-up run first), with --index auto (what the planner picks:
its report says why), and with --index none unless --no-brute; the two must
be equal bucket for bucket. Corrfunc (f64) counts each pair twice; TreeCorr
(f64) once. Peers compute in f64 and twobs in f32, so pairs within a few f32
roundings of an edge may fall on the other side: the script prints the pairs
that differ.

Peers come from the venv target/peers-venv (bench/cpu-peers.py makes
it); the script runs itself again inside it.

Usage: bench/cells-cpu.py [--n N] [--data uniform|clustered] [--bins B] [--lo LO] [--hi HI]
                                  [--threads T] [--no-brute] [--no-peers] [--json FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, "target", "peers-venv")
SEED = 20261126

python = os.path.join(VENV, "bin", "python")
if os.path.realpath(sys.prefix) != os.path.realpath(VENV) and os.path.exists(python):
    os.execv(python, [python, *sys.argv])

import numpy as np  # noqa: E402

TWOBS = os.environ.get("TWOBS", os.path.join(ROOT, "target", "release", "twobs"))


def points(kind, n):
    rng = np.random.default_rng(SEED)
    if kind == "uniform":
        return rng.random((n, 3), dtype=np.float32)
    centres = rng.random((16, 3))
    which = rng.integers(0, 16, n)
    p = centres[which] + rng.normal(0.0, 0.02, (n, 3))
    return np.clip(p, 0.0, 1.0 - 2.0**-52).astype(np.float32)


def twobs(path, args, threads, index, work):
    out = os.path.join(work, f"counts-{index}.npy")
    report = os.path.join(work, f"report-{index}.json")
    cmd = [TWOBS, "run", "sdh", "--input", path, "--log-bins", *args, "--backend", "cpu", "--threads", str(threads),
           "--index", index, "--quiet", "--out", out, "--report", report]
    t = time.perf_counter()
    subprocess.run(cmd, check=True)
    wall = time.perf_counter() - t
    rep = json.load(open(report))
    return wall, np.load(out)[:, 2].astype(np.int64), rep


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--data", default="clustered", choices=["uniform", "clustered"])
    ap.add_argument("--bins", type=int, default=20)
    ap.add_argument("--lo", type=float, default=0.001)
    ap.add_argument("--hi", type=float, default=0.5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--no-brute", action="store_true")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="bench-cells-", dir=os.path.join(ROOT, "target"))
    pts = points(a.data, a.n)
    path = os.path.join(work, "points.npy")
    np.save(path, pts)
    args = ["--param", f"bins={a.bins}", "--param", f"r_min={a.lo}", "--param", f"r_max={a.hi}"]
    # Warm-up: the driver compiled into the cache.
    np.save(os.path.join(work, "warm.npy"), pts[:1000])
    twobs(os.path.join(work, "warm.npy"), args, a.threads, "auto", work)
    rows = {"n": a.n, "data": a.data, "bins": a.bins, "lo": a.lo, "hi": a.hi, "threads": a.threads}
    wall, cells, rep = twobs(path, args, a.threads, "auto", work)
    rows["twobs_auto_s"] = wall
    rows["twobs_auto_index"] = rep["index"]
    rows["twobs_auto_timings"] = rep["timings"]
    print(f"twobs --index auto: {wall:.2f} s ({rep['index']['why']})", flush=True)
    if not a.no_brute:
        wall, brute, rep = twobs(path, args, a.threads, "none", work)
        rows["twobs_brute_s"] = wall
        rows["identical_to_brute"] = bool(np.array_equal(cells, brute))
        print(f"twobs --index none: {wall:.2f} s; identical: {rows['identical_to_brute']}", flush=True)
        assert rows["identical_to_brute"], "the hierarchy's counts differ from brute force's"
    edges = [np.float32(a.lo * (a.hi / a.lo) ** (k / a.bins)) for k in range(a.bins + 1)]
    edges[0], edges[-1] = np.float32(a.lo), np.float32(a.hi)
    edges = np.array(edges, dtype=np.float64)
    if not a.no_peers:
        from Corrfunc.theory.DD import DD
        x, y, z = (pts[:, k].astype(np.float64) for k in range(3))
        t = time.perf_counter()
        dd = DD(1, a.threads, edges, x, y, z, periodic=False)["npairs"].astype(np.int64) // 2
        rows["corrfunc_s"] = time.perf_counter() - t
        rows["corrfunc_pairs_differ"] = int(np.abs(dd - cells).sum())
        print(f"Corrfunc DD: {rows['corrfunc_s']:.2f} s; |difference| {rows['corrfunc_pairs_differ']} pairs", flush=True)
        import treecorr
        cat = treecorr.Catalog(x=x, y=y, z=z)
        nn = treecorr.NNCorrelation(min_sep=a.lo, max_sep=a.hi, nbins=a.bins, bin_slop=0, num_threads=a.threads)
        t = time.perf_counter()
        nn.process(cat)
        rows["treecorr_s"] = time.perf_counter() - t
        tc = np.rint(nn.npairs).astype(np.int64)
        rows["treecorr_pairs_differ"] = int(np.abs(tc - cells).sum())
        print(f"TreeCorr NN (bin_slop=0): {rows['treecorr_s']:.2f} s; |difference| {rows['treecorr_pairs_differ']} pairs",
              flush=True)
        # twobs again after the peers: a shared host's load moves between runs, so its times bracket theirs.
        wall, again, _ = twobs(path, args, a.threads, "auto", work)
        rows["twobs_auto_again_s"] = wall
        assert np.array_equal(again, cells), "twobs's second run differs from its first"
        print(f"twobs --index auto, again: {wall:.2f} s", flush=True)
    rows["counts"] = cells.tolist()
    print(json.dumps(rows, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
