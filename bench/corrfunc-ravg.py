#!/usr/bin/env python3
"""Corrfunc's DD(r) with output_ravg=True on seeded points, recorded for
python/tests/test_peers.py (twobs's ravg to 1e-5 relative, its counts equal),
or compared with twobs's directly where both are importable.

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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--record")
    args = parser.parse_args()
    rows = [corrfunc(c) for c in CASES]
    if args.record:
        with open(args.record, "w") as f:
            json.dump({"made_by": "bench/corrfunc-ravg.py --record", "cases": rows}, f, indent=1)
    for r in rows:
        print(r["name"], "npairs", sum(r["npairs"]), "ravg", [round(v, 6) for v in r["ravg"]])


if __name__ == "__main__":
    main()
