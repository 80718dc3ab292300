#!/usr/bin/env python3
"""twobs.mda.InterRDF beside MDAnalysis's own serial InterRDF, the same
analysis on the same trajectory: the table of docs/benchmarks.md,
"MDAnalysis's InterRDF".

The system: N atoms uniform in a periodic cube at water's number density of
oxygens (0.0334 per cubic angstrom), each frame drawn afresh (numpy
default_rng(SEED), float32), in MDAnalysis's MemoryReader. The analysis:
InterRDF(g, g, nbins=75, range=(0, 15)) over every frame, g all the atoms
(MDAnalysis's defaults). MDAnalysis runs serially, as `run()` does by
default; twobs runs one Session (the GPU where there is one) over the same
frames, after one warm-up run (its kernels compiled, as a second analysis in
a session finds them). Times are wall clock of `run()`, best of --reps.

The counts are compared: MDAnalysis takes minimum images in double, twobs in
float32 by default, so a pair within rounding of a bucket's edge may fall on
the other side; the table gives the pairs apart beside all pairs counted.

Usage: python3 bench/mdanalysis.py [--atoms 20000,100000] [--frames 10,4] [--reps 2] [--out DIR]
(with MDAnalysis and twobs installed; on the GPU machines both travel as wheels:
scripts/build-wheel.sh, and MDAnalysis with GridDataFormats, mmtf-python,
mda-xdrlib and mrcfile as .whl, see bench/README.md).
"""
import argparse
import json
import os
import time
import warnings

import numpy as np

SEED = 20261202
DENSITY = 0.0334  # oxygens per cubic angstrom in water at 300 K


def universe(n: int, frames: int, seed: int):
    import MDAnalysis as mda
    from MDAnalysis.coordinates.memory import MemoryReader

    side = (n / DENSITY) ** (1.0 / 3.0)
    rng = np.random.default_rng(seed)
    coordinates = (rng.random((frames, n, 3), dtype=np.float32) * np.float32(side)).astype(np.float32)
    u = mda.Universe.empty(n, trajectory=True)
    u.load_new(coordinates, format=MemoryReader, dimensions=[side, side, side, 90.0, 90.0, 90.0])
    return u, side


def best_of(reps: int, run):
    times, result = [], None
    for _ in range(reps):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--atoms", default="20000,100000")
    parser.add_argument("--frames", default="10,4")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import MDAnalysis
    from MDAnalysis.analysis.rdf import InterRDF

    import twobs
    import twobs.mda

    session = twobs.Session()
    rows = []
    for n, frames in zip(map(int, args.atoms.split(",")), map(int, args.frames.split(","))):
        u, side = universe(n, frames, SEED + n)
        g = u.atoms
        twobs.mda.InterRDF(g, g, session=session).run(stop=1)  # compiles the kernels
        mine_s, mine = best_of(args.reps, lambda: twobs.mda.InterRDF(g, g, session=session).run())
        theirs_s, theirs = best_of(1 if n > 50000 else args.reps, lambda: InterRDF(g, g).run())
        moved = float(np.abs(mine.results.count - theirs.results.count).sum())
        total = float(theirs.results.count.sum())
        g_r = float(np.max(np.abs(mine.results.rdf - theirs.results.rdf)))
        row = dict(atoms=n, frames=frames, box=side, mdanalysis_s=theirs_s, twobs_s=mine_s, speedup=theirs_s / mine_s,
                   pairs=total, pairs_apart=moved, max_g_r_difference=g_r, backend=session.backend,
                   mdanalysis=MDAnalysis.__version__, twobs=twobs.__version__)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print("| atoms | frames | MDAnalysis InterRDF (serial) | twobs.mda.InterRDF | speedup | pairs apart / counted |")
    print("| ---: | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        print(f"| {r['atoms']:,} | {r['frames']} | {r['mdanalysis_s']:.2f} s | {r['twobs_s'] * 1e3:.1f} ms "
              f"({r['backend']}) | {r['speedup']:.0f}x | {r['pairs_apart']:.0f} / {r['pairs']:.3g} |")
    with open(os.path.join(args.out, "mdanalysis.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
