#!/usr/bin/env python3
"""Corrfunc's averages on seeded points: DD(r) with output_ravg=True, and
DDsmu's savg and DDrppi's rpavg (points in a box of 100, pi buckets 1 wide
as Corrfunc's), recorded for python/tests/test_peers.py (twobs's averages to
1e-5 relative, its counts equal up to pairs within f32 rounding of an edge).

Usage: bench/corrfunc-ravg.py [--record tests/peers/ravg.json]
Needs Corrfunc (pip install Corrfunc; it builds against libgsl-dev).
"""
import argparse
import json

import numpy as np

CASES = [
    # (name, points, seed, edges, periodic box or None)
    ("open-uniform", 20_000, 11, np.geomspace(0.002, 0.1, 13).tolist(), None),
    ("periodic-clustered", 20_000, 12, np.linspace(0.0, 0.08, 9).tolist(), 1.0),
]


# (name, kind, points, seed, first axis's edges, periodic box or None, (mu_max, mu buckets) or pimax), in a box of 100.
CELL_CASES = [
    ("smu-open-uniform", "smu", 20_000, 21, np.geomspace(0.2, 10.0, 9).tolist(), None, (1.0, 5)),
    ("rppi-periodic-clustered", "rppi", 20_000, 22, np.linspace(0.0, 8.0, 9).tolist(), 100.0, 10),
]


def points(n: int, seed: int, clustered: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if not clustered:
        return rng.random((n, 3))
    centres = rng.random((16, 3))
    p = centres[rng.integers(0, 16, n)] + rng.normal(0, 0.02, (n, 3))
    return np.mod(p, 1.0)


def corrfunc(case):
    from Corrfunc.theory import DD
    name, n, seed, edges, box = case
    x, y, z = points(n, seed, "clustered" in name).T
    kw = dict(periodic=box is not None, boxsize=box if box is not None else 0.0)
    out = DD(1, 2, np.asarray(edges), x, y, z, output_ravg=True, **kw)
    return {"name": name, "n": n, "seed": seed, "edges": edges, "box": box,
            "npairs": out["npairs"].tolist(), "ravg": out["ravg"].tolist()}


def corrfunc_cells(case):
    from Corrfunc.theory import DDrppi, DDsmu
    name, kind, n, seed, edges, box, second = case
    x, y, z = (100.0 * points(n, seed, "clustered" in name)).T
    kw = dict(periodic=box is not None, boxsize=box if box is not None else 0.0)
    if kind == "smu":
        out = DDsmu(1, 2, np.asarray(edges), second[0], second[1], x, y, z, output_savg=True, **kw)
        average = out["savg"]
    else:
        out = DDrppi(1, 2, float(second), np.asarray(edges), x, y, z, output_rpavg=True, **kw)
        average = out["rpavg"]
    return {"name": name, "kind": kind, "n": n, "seed": seed, "edges": edges, "box": box, "second": second,
            "npairs": out["npairs"].tolist(), "average": average.tolist()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--record")
    args = parser.parse_args()
    rows = [corrfunc(c) for c in CASES]
    cells = [corrfunc_cells(c) for c in CELL_CASES]
    if args.record:
        with open(args.record, "w") as f:
            json.dump({"made_by": "bench/corrfunc-ravg.py --record", "cases": rows, "cells": cells}, f, indent=1)
    for c in cells:
        print(c["name"], "npairs", sum(c["npairs"]), "average", [round(v, 4) for v in c["average"][:6]], "...")
    for r in rows:
        print(r["name"], "npairs", sum(r["npairs"]), "ravg", [round(v, 6) for v in r["ravg"]])


if __name__ == "__main__":
    main()
