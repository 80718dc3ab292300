#!/usr/bin/env python3
"""The Python package on a GPU host, beside the peers users would call instead
(docs/benchmarks.md, "Python calls"). Every case runs in this one process, so the session's second call
is what a notebook's second call costs. Prints a table and writes JSON lines
to $OUT/python-calls.jsonl.

Cases (all data drawn here with numpy default_rng(2026)):
  session   g(r) of 100k atoms (box 46.4, r_max 5, 100 bins): first call and
            the next ten, each call's wall time and the report's kernel,
            upload and download seconds
  frames    g(r) over 50 frames of 100k atoms, one RDF.compute(reset=False)
            per frame, beside freud.density.RDF on every host core
  knn-gpu   KNN K = 16 of 1M (and 10M) 3-D points held by CuPy on the GPU, read
            there and the lists left there, beside jz-tree on the same points as
            a JAX array; neighbour sets compared, and every list with the numpy path's
  numpy     numpy to numpy: KNN K = 16 of 1M points, g(r) of 1M atoms (box 100, r_max 5)

Each timed case makes its first call apart (compilation, the context:
`first_s`), then times REPEATS calls rotating among SETS sets of points
drawn alike (a set of 1M points fits the H200's 50 MB L2, so calls on one
buffer would time the cache), and the tables take their medians.

Usage: bench/python-calls.py [CASE ...]    (default: every case)
"""
import json
import os
import sys
import time

import numpy as np

import twobs

OUT = os.environ.get("OUT", ".")
CASES = sys.argv[1:] or ["session", "frames", "numpy", "knn-gpu"]
rng = np.random.default_rng(2026)
REPEATS = 20
SETS = 3
log = open(os.path.join(OUT, "python-calls.jsonl"), "a")


def record(case, **fields):
    fields["case"] = case
    log.write(json.dumps(fields) + "\n")
    log.flush()
    print(case, " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in fields.items()
                         if k != "case"), flush=True)


def gpu_parts(result):
    return gpu_parts_of_report(result.report)


def gpu_parts_of_report(report):
    """The engine's own account of a call: the GPU stages, the run's total, and the Python layer's steps."""
    g = report["timings"].get("gpu") or {}
    parts = {k: g.get(k, 0.0) for k in ("kernel_s", "upload_s", "download_s", "setup_s", "teardown_s",
                                         "prepare_s", "index_s", "grid_s", "compile_s", "context_s")}
    parts["gpu_wall_s"] = g.get("wall_s", 0.0)
    parts["total_s"] = report["timings"]["total_s"]
    parts.update(report.get("steps", {}))
    return parts


def timed(f, *args, **kw):
    t = time.perf_counter()
    out = f(*args, **kw)
    return out, time.perf_counter() - t


def case_session():
    sets = [(rng.random((100_000, 3)) * 46.4).astype(np.float32) for _ in range(SETS)]
    session = twobs.Session()
    params = {"bins": 100, "r_max": 5.0, "box": 46.4}
    for call in range(1 + REPEATS):
        result, wall = timed(session.run, "rdf", sets[call % SETS], params=params)
        parts = gpu_parts(result)
        record("session", call=call, wall_s=wall, compute_s=result.timings["compute_s"],
               outside_kernels_s=wall - parts["kernel_s"], **parts)


def case_frames():
    frames = [(rng.random((100_000, 3)) * 46.4).astype(np.float32) for _ in range(50)]
    rdf = twobs.RDF(100, 5.0)
    rdf.compute(46.4, frames[0])  # the session's first call: context and kernel
    for repeat in range(3):
        t = time.perf_counter()
        for f, x in enumerate(frames):
            rdf.compute(46.4, x, reset=f == 0)
        wall = time.perf_counter() - t
        record("frames", repeat=repeat, frames=50, twobs_s=wall, per_frame_ms=1e3 * wall / 50)
    counts = rdf.bin_counts
    try:
        import freud
    except ImportError as e:
        record("frames", freud=f"not installed: {e}")
        return
    box = freud.box.Box.cube(46.4)
    # freud wants points in [-L/2, L/2).
    shifted = [x - np.float32(23.2) for x in frames]
    f_rdf = freud.density.RDF(bins=100, r_max=5.0)
    t = time.perf_counter()
    for f, x in enumerate(shifted):
        f_rdf.compute((box, x), reset=f == 0)
    wall = time.perf_counter() - t
    differ = int(np.sum(np.asarray(f_rdf.bin_counts, dtype=np.int64) != counts.astype(np.int64)))
    record("frames", freud_s=wall, freud_threads=freud.parallel.get_num_threads(), bins_differing=differ,
           pairs_twobs=int(counts.sum()), pairs_freud=int(np.sum(f_rdf.bin_counts)))


def case_numpy():
    sets = [rng.random((1_000_000, 3), dtype=np.float32) for _ in range(SETS)]
    session = twobs.Session()
    _, first = timed(twobs.knn, sets[0], 16, session=session)
    record("numpy", job="knn 1M K=16", first_s=first)
    for call in range(REPEATS):
        (dist, idx), wall = timed(twobs.knn, sets[call % SETS], 16, session=session)
        record("numpy", job="knn 1M K=16", call=call, wall_s=wall)
    for call in range(SETS):
        result, wall = timed(session.run, "knn", sets[call % SETS], params={"k": 16})
        record("numpy", job="knn 1M K=16 (session.run)", call=call, wall_s=wall, **gpu_parts(result))
    atoms = [(rng.random((1_000_000, 3)) * 100).astype(np.float32) for _ in range(SETS)]
    rdf = twobs.RDF(100, 5.0, session=session)
    _, first = timed(rdf.compute, 100.0, atoms[0])
    record("numpy", job="g(r) 1M atoms box 100 r_max 5", first_s=first)
    for call in range(REPEATS):
        _, wall = timed(rdf.compute, 100.0, atoms[call % SETS])
        record("numpy", job="g(r) 1M atoms box 100 r_max 5", call=call, wall_s=wall,
               **gpu_parts_of_report(rdf.report))


def case_knn_gpu():
    try:
        import cupy
    except ImportError as e:
        record("knn-gpu", cupy=f"not installed: {e}")
        return
    for n in (1_000_000, 10_000_000):
        hosts = [rng.random((n, 3), dtype=np.float32) for _ in range(SETS)]
        sets = [cupy.asarray(h) for h in hosts]
        host, points = hosts[0], sets[0]
        session = twobs.Session()
        cupy.cuda.Device().synchronize()
        (dist, idx), first = timed(twobs.knn, points, 16, session=session)
        cupy.cuda.Device().synchronize()
        record("knn-gpu", n=n, first_s=first)
        for call in range(REPEATS):
            cupy.cuda.Device().synchronize()
            _, wall = timed(twobs.knn, sets[call % SETS], 16, session=session)
            cupy.cuda.Device().synchronize()
            record("knn-gpu", n=n, call=call, twobs_s=wall)
        (dist, idx) = twobs.knn(points, 16, session=session)
        record("knn-gpu", n=n, on_gpu=type(idx).__module__)
        ids = cupy.asnumpy(idx)
        # The engine's account of a call on points read on the GPU (take, schedule, grid, kernel).
        for call in range(SETS):
            cupy.cuda.Device().synchronize()
            result, wall = timed(session.run, "knn", sets[call % SETS], params={"k": 16})
            cupy.cuda.Device().synchronize()
            parts = gpu_parts(result)
            parts["gpu_take_s"] = result.report["timings"]["gpu"].get("take_s", 0.0)
            record("knn-gpu", n=n, job="session.run", call=call, wall_s=wall, lists=type(result.ids).__name__, **parts)
        # Every list equal to the numpy path's (points copied to the host, lists copied back).
        dn, in_ = twobs.knn(host, 16, session=session)
        record("knn-gpu", n=n, equal_to_numpy=bool(np.array_equal(ids, in_) and np.array_equal(cupy.asnumpy(dist), dn)))
        try:
            import jax
            import jax.numpy as jnp
            import jztree.knn
        except ImportError as e:
            record("knn-gpu", n=n, jztree=f"not installed: {e}")
            continue
        xjs = [jnp.asarray(h) for h in hosts]
        xj = xjs[0]
        fn = jax.jit(lambda x: jztree.knn.knn(x, 17))
        r, i = fn(xj)
        i.block_until_ready()
        for call in range(REPEATS):
            t = time.perf_counter()
            r, i = fn(xjs[call % SETS])
            i.block_until_ready()
            record("knn-gpu", n=n, call=call, jztree_s=time.perf_counter() - t)
        r, i = fn(xj)
        i.block_until_ready()
        theirs = np.asarray(i)
        # jz-tree lists the point itself among its neighbours; twobs never does.
        same = 0
        for q in range(0, n, max(1, n // 20000)):
            mine = set(ids[q].tolist())
            other = set(theirs[q].tolist()) - {q}
            same += mine == set(list(other)[:16]) or mine <= other
        record("knn-gpu", n=n, sampled_queries=len(range(0, n, max(1, n // 20000))), same_sets=same)


for name in CASES:
    try:
        globals()["case_" + name.replace("-", "_")]()
    except Exception as e:  # one case's failure does not lose the others
        record(name, error=f"{type(e).__name__}: {e}")
