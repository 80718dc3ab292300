"""A box read at run time on the GPU (BoxTime::Run), through the Python package:
parity with the folded box, bit for bit (orthorhombic and triclinic, one and
two sets, every pair and the grid, and the CPU backend as the oracle); a
50-frame NPT trajectory of 100k atoms through RDF.compute (compiles, wall);
and what the run-time box costs against the folded one on 1M points.

Run by scripts/gpu-rtbox.sh (which installs the wheel); prints one line a
case, PASS/FAIL/TIME, and exits 1 on any FAIL.
"""

import json
import sys
import time

import numpy as np

import twobs

FAILED = 0
# A smoke run of this script without a GPU: RTBOX_BACKEND=cpu RTBOX_SCALE=0.01.
import os

BACKEND = os.environ.get("RTBOX_BACKEND", "cuda")
SCALE = float(os.environ.get("RTBOX_SCALE", "1"))


def say(line):
    print(line, flush=True)


def fail(line):
    global FAILED
    FAILED += 1
    say("FAIL " + line)


def in_box(rng, box, n, s=None):
    """n points of a box (Lx, Ly, Lz[, xy, xz, yz]) from fractional coordinates s (fresh if None)."""
    lx, ly, lz, xy, xz, yz = (list(box) + [0.0, 0.0, 0.0])[:6]
    if s is None:
        s = rng.uniform(0.0005, 0.9995, (n, 3))
    x = s[:, 0] * lx + s[:, 1] * xy * ly + s[:, 2] * xz * lz
    y = s[:, 1] * ly + s[:, 2] * yz * lz
    return np.stack([x, y, s[:, 2] * lz], axis=1).astype(np.float32)


def counts(session, points, query, box, r_max, bins):
    r = session.run("rdf", points, query, params={"bins": bins, "r_max": r_max, "box": box})
    return np.asarray(r.counts), r.report


def parity(rng):
    """Session A runs box 1 (folded), box 2 (run time), box 1 again (run time);
    session B box 2 (folded); the CPU backend box 2 (run time) and box 1 (folded)."""
    say("--- parity: the run-time box against the folded one (GPU), and the CPU backend")
    boxes = {
        "orthorhombic": ((20.0, 21.0, 22.0), (20.3, 20.8, 22.1)),
        "triclinic": ((20.0, 21.0, 22.0, 0.3, -0.2, 0.1), (20.2, 20.9, 21.9, 0.25, -0.15, 0.12)),
        "cube": ((20.0,) * 3, (20.5,) * 3),
    }
    # (shape, sets, index, r_max, with the CPU backend too): each NVRTC compile is 1-2.5 s.
    cases = [(shape, sets, index, 4.5, (shape, sets, index) in (("orthorhombic", 1, "none"), ("triclinic", 2, "grid")))
             for shape in ("orthorhombic", "triclinic") for sets in (1, 2) for index in ("none", "grid")]
    cases += [("triclinic", 1, "grid", 8.5, True), ("cube", 1, "grid", 4.5, True), ("cube", 2, "none", 8.5, False)]
    for shape, sets, index, r_max, on_cpu in cases:
        b1, b2 = boxes[shape]
        n = int(60000 * SCALE)
        p1, p2 = in_box(rng, b1, n), in_box(rng, b2, n)
        q1 = in_box(rng, b1, n * 3 // 4) if sets == 2 else None
        q2 = in_box(rng, b2, n * 3 // 4) if sets == 2 else None
        what = f"{shape} sets={sets} index={index} r_max={r_max}"
        a = twobs.Session(backend=BACKEND, index=index)
        f1, r1 = counts(a, p1, q1, b1, r_max, 200)
        t2, rt2 = counts(a, p2, q2, b2, r_max, 200)
        t1, rt1 = counts(a, p1, q1, b1, r_max, 200)
        f2, rf2 = counts(twobs.Session(backend=BACKEND, index=index), p2, q2, b2, r_max, 200)
        times = [r["box_time"] for r in (r1, rt2, rt1, rf2)]
        if times != ["compile", "run", "run", "compile"]:
            fail(f"{what}: box_time {times}")
            continue
        idx = [r["index"]["index"] for r in (r1, rt2)]
        ok = np.array_equal(f1, t1) and np.array_equal(f2, t2) and f1.sum() > 0
        line = f"{what}: index {idx}, {int(f1.sum())} + {int(f2.sum())} pairs"
        if ok:
            say("PASS " + line)
        else:
            fail(line + f": box 1 differs in {int((f1 != t1).sum())} slots, box 2 in {int((f2 != t2).sum())}")
        if on_cpu:
            # The CPU backend: its run-time box (box 2) and folded one (box 1).
            c = twobs.Session(backend="cpu", index=index)
            c1, _ = counts(c, p1, q1, b1, r_max, 200)
            c2, cr2 = counts(c, p2, q2, b2, r_max, 200)
            if cr2["box_time"] != "run" or not (np.array_equal(c1, f1) and np.array_equal(c2, t2)):
                fail(f"{what}: the CPU backend differs ({cr2['box_time']})")
            else:
                say(f"PASS {what}: the CPU backend's counts, folded and at run time")


def trajectory(rng, frames=50, n=100_000):
    n = int(n * SCALE)
    """RDF over an NPT-like trajectory: box ~46.4, each frame's within 1%."""
    say(f"--- trajectory through Python: {frames} frames of {n} atoms, box ~46.4 +-1%, r_max 5, 100 bins")
    boxes = [tuple(46.4 * (1 + rng.uniform(-0.01, 0.01, 3))) for _ in range(frames)]
    s = rng.uniform(0.0005, 0.9995, (n, 3))
    points = [in_box(rng, b, n, np.clip(s + rng.normal(0, 1e-3, s.shape), 0.0005, 0.9995)) for b in boxes]
    session = twobs.Session(backend=BACKEND)
    for attempt in ("first (compiles)", "second (warm)"):
        rdf = twobs.RDF(100, 5.0, session=session)
        before = twobs.programs()
        start = time.perf_counter()
        compute, compile_ = 0.0, 0.0
        for k, (b, p) in enumerate(zip(boxes, points)):
            rdf.compute(b, p, reset=k == 0)
            compute += rdf.report["timings"]["compute_s"]
            compile_ += rdf.report["timings"]["compile_s"]
        wall = time.perf_counter() - start
        made = twobs.programs() - before
        say(f"TIME python trajectory {attempt}: wall {wall:.3f} s, compute_s {compute:.4f}, compile_s {compile_:.3f}, "
            f"programs made {made}, last box_time {rdf.report['box_time']}, pairs {int(rdf.bin_counts.sum()) // 2}")
    # The same frames, each alone in a session of its own (folded): the same counts.
    total = np.zeros(100, dtype=np.uint64)
    for b, p in zip(boxes[:3], points[:3]):
        total += twobs.RDF(100, 5.0, session=twobs.Session(backend=BACKEND)).compute(b, p).bin_counts
    first3 = twobs.RDF(100, 5.0, session=twobs.Session(backend=BACKEND))
    for k, (b, p) in enumerate(zip(boxes[:3], points[:3])):
        first3.compute(b, p, reset=k == 0)
    if np.array_equal(first3.bin_counts, total):
        say("PASS python trajectory: 3 frames at run time equal each frame folded alone")
    else:
        fail("python trajectory: 3 frames at run time differ from each frame folded alone")
    return boxes, points


def cost(rng):
    """compute_s of the folded box against the run-time box, 1M points."""
    say("--- cost of the run-time box: 1M points, compute_s (min of 3), folded against run time")
    n = int(1_000_000 * SCALE)
    for box, r_max in (((10.0,) * 3, 2.49), ((10.0, 10.0, 10.0, 0.3, 0.2, 0.1), 2.49), ((100.0,) * 3, 5.0)):
        p = in_box(rng, box, n)
        for index in ("none", "grid"):
            if index == "none" and box[0] == 100.0:
                continue  # every pair of 1M in a box of 100 is the grid's case, not this one's
            session = twobs.Session(backend=BACKEND, index=index)
            params = {"bins": 500, "r_max": r_max, "box": box}
            times = {}
            results = {}
            for mode in ("compile", "run"):
                if mode == "run":
                    # A second box makes the session read its box at run time from then on.
                    session.run("rdf", p[:1000], params={**params, "box": tuple(x * 1.01 for x in box[:3]) + tuple(box[3:])})
                best = None
                for _ in range(3):
                    r = session.run("rdf", p, params=params)
                    assert r.report["box_time"] == mode, r.report["box_time"]
                    c = r.report["timings"]["compute_s"]
                    best = c if best is None else min(best, c)
                times[mode] = best
                results[mode] = np.asarray(r.counts)
            same = np.array_equal(results["compile"], results["run"])
            line = (f"box={','.join(str(x) for x in box)} r_max={r_max} index={index}: folded {times['compile']:.4f} s, "
                    f"run time {times['run']:.4f} s ({100 * (times['run'] / times['compile'] - 1):+.1f}%), "
                    f"{'same counts' if same else 'COUNTS DIFFER'}")
            say("TIME " + line)
            if not same:
                fail(line)


def main():
    rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 2026)
    parity(rng)
    trajectory(rng)
    cost(rng)
    say(f"--- python: {FAILED} failure(s)")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
