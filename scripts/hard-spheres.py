#!/usr/bin/env python3
"""Hard spheres in the periodic unit box by random sequential addition: N
centres, none closer than SIGMA to another (minimum image). A liquid-like
configuration whose g(r) is 0 below SIGMA and peaks just above it: the
README's g(r) example. Standard library only.

Usage: scripts/hard-spheres.py N SIGMA SEED > atoms.csv
"""
import math
import random
import sys

n, sigma, seed = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
cells = max(1, int(1.0 / sigma))  # a cell no smaller than sigma: neighbours are in the 27 around
grid = {}
points = []
tries = 0
while len(points) < n:
    tries += 1
    if tries > 200 * n:
        sys.exit(f"only {len(points)} spheres fit after {tries} tries; lower N or SIGMA")
    p = (rng.random(), rng.random(), rng.random())
    c = tuple(int(x * cells) % cells for x in p)
    ok = True
    for dx in (-1, 0, 1):
        for dy in (-1, 0, 1):
            for dz in (-1, 0, 1):
                for q in grid.get(((c[0] + dx) % cells, (c[1] + dy) % cells, (c[2] + dz) % cells), ()):
                    d2 = 0.0
                    for a, b in zip(p, q):
                        d = a - b
                        d -= round(d)
                        d2 += d * d
                    if d2 < sigma * sigma:
                        ok = False
                        break
                if not ok:
                    break
            if not ok:
                break
        if not ok:
            break
    if ok:
        points.append(p)
        grid.setdefault(c, []).append(p)
print("x,y,z")
for p in points:
    print(f"{p[0]:.7f},{p[1]:.7f},{p[2]:.7f}")
