#!/usr/bin/env python3
"""Partial g(r) counts of MDAnalysis's InterRDF, recorded for tests/md.rs.

Writes a small water-like system (molecules of one O and two H) as a LAMMPS
dump of three frames, each with its own box, and as a one-frame .gro file;
runs MDAnalysis.analysis.rdf.InterRDF on them (O-H, O-O and H-H, with and
without exclusion_block, one molecule being the block) and records every
count in tests/data/md-peer/mdanalysis.json beside the files. tests/md.rs
runs `twobs run rdf --types ... --exclude-same molecule` on the same files
and asks for the same counts, bucket by bucket.

MDAnalysis is not installed in CI (it needs a compiler and minutes), so the
test reads this recording; run this script again (with any seed) to renew
it against the MDAnalysis you have:

    python bench/peer-mdanalysis.py [--seed N]

Exactness: coordinates are multiples of 1/16 (LAMMPS, Angstrom) or 1/8 (.gro,
nm, which MDAnalysis turns into Angstrom by 10), so that every separation,
minimum image and squared distance is exact in float32 and float64; the
bucket count is chosen so that no bucket edge lies within 1e-5 (relative) of
any distance the grid allows. Both libraries then put every pair in the same
bucket, and the counts must be equal.
"""
import argparse
import json
import math
import os
import random
import warnings

import numpy as np
import MDAnalysis as mda
from MDAnalysis.analysis.rdf import InterRDF

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "md-peer")


def safe_bins(near, r_max, grid):
    """A bucket count near `near` and an r_max (a float32) near `r_max` whose
    edges keep 1e-5 (relative) off every grid distance sqrt(k) / grid."""
    for step in range(50):
        r = float(np.float32(r_max * (1 + 0.0013 * step)))
        ks = np.arange(1, int((r * grid) ** 2) + 4 * grid)
        d = np.sqrt(ks) / grid
        for bins in range(near, near + 40):
            w = r / bins
            t = d / w
            gap = np.abs(t - np.round(t)) * w / d
            if gap.min() > 1e-5:
                return bins, r
    raise SystemExit(f"no bucket count near {near} keeps its edges off the grid")


def molecules(rng, n_mol, box_cells, grid):
    """(type, molecule, position in grid units) of n_mol molecules: O, then two H within 8 grid steps."""
    atoms = []
    for m in range(n_mol):
        o = [rng.randrange(box_cells) for _ in range(3)]
        atoms.append(("O", m, o))
        for _ in range(2):
            atoms.append(("H", m, [(x + rng.randint(-8, 8)) % box_cells for x in o]))
    return atoms


def write_lammps(path, rng, n_mol, boxes, grid):
    with open(path, "w") as f:
        for step, box in enumerate(boxes):
            cells = int(box * grid)
            atoms = molecules(rng, n_mol, cells, grid)
            order = list(range(len(atoms)))
            rng.shuffle(order)  # dumps list atoms in any order; both readers sort them by id
            f.write(f"ITEM: TIMESTEP\n{step * 100}\nITEM: NUMBER OF ATOMS\n{len(atoms)}\n")
            f.write(f"ITEM: BOX BOUNDS pp pp pp\n0 {box}\n0 {box}\n0 {box}\n")
            f.write("ITEM: ATOMS id type mol x y z\n")
            for k in order:
                t, m, r = atoms[k]
                f.write(f"{k + 1} {1 if t == 'O' else 2} {m + 1} " + " ".join(f"{x / grid:.4f}" for x in r) + "\n")


def write_gro(path, rng, n_mol, box, grid):
    cells = int(box * grid)
    atoms = molecules(rng, n_mol, cells, grid)
    names = {"O": ["OW"], "H": ["HW1", "HW2"]}
    with open(path, "w") as f:
        f.write(f"water-like molecules on a grid of 1/{grid} nm\n{len(atoms)}\n")
        h = 0
        for k, (t, m, r) in enumerate(atoms):
            name = names[t][0] if t == "O" else names[t][h % 2]
            h += t == "H"
            f.write(f"{(m + 1) % 100000:5d}{'SOL':<5}{name:>5}{(k + 1) % 100000:5d}" + "".join(f"{x / grid:8.3f}" for x in r) + "\n")
        f.write(f"{box:10.5f}{box:10.5f}{box:10.5f}\n")


def counts(u, a, b, bins, r_max, exclusion):
    """InterRDF's counts and g(r)."""
    ga, gb = u.select_atoms(a), u.select_atoms(b)
    rdf = InterRDF(ga, gb, nbins=bins, range=(0.0, r_max), exclusion_block=exclusion).run()
    return [int(round(c)) for c in rdf.results.count], [float(g) for g in rdf.results.rdf]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=20261126)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    os.makedirs(OUT, exist_ok=True)
    warnings.simplefilter("ignore")
    cases = []

    # LAMMPS, Angstrom: three frames of 150 molecules, boxes 8, 8.5 and 9.
    bins, r_max = safe_bins(40, 3.45, 16)
    grid = 16
    dump = os.path.join(OUT, "waters.lammpstrj")
    write_lammps(dump, rng, 150, [8.0, 8.5, 9.0], grid)
    u = mda.Universe(dump, format="LAMMPSDUMP", topology_format="LAMMPSDUMP")
    for a, b, excl in [("1", "2", (1, 2)), ("1", "2", None), ("1", "1", (1, 1)), ("2", "2", (2, 2))]:
        cases.append({
            "file": "waters.lammpstrj", "types": f"{a},{b}", "exclude_molecule": excl is not None,
            "bins": bins, "r_max": r_max, "frames": len(u.trajectory),
            "both_orders": a == b,  # InterRDF of a group with itself counts each pair from both ends
        })
        cases[-1]["counts"], cases[-1]["rdf"] = counts(u, f"type {a}", f"type {b}", bins, r_max, excl)

    # .gro, nm (MDAnalysis reads Angstrom): one frame of 200 molecules in a box of 4 nm.
    bins, r_max_nm = safe_bins(30, 1.45, 8)
    grid = 8
    gro = os.path.join(OUT, "waters.gro")
    write_gro(gro, rng, 200, 4.0, grid)
    u = mda.Universe(gro)
    for a, b, sel_a, sel_b, excl in [("OW", "HW*", "name OW", "name HW1 HW2", (1, 2)),
                                     ("OW", "OW", "name OW", "name OW", (1, 1))]:
        cases.append({
            "file": "waters.gro", "types": f"{a},{b}", "exclude_molecule": True,
            "bins": bins, "r_max": r_max_nm, "frames": 1, "both_orders": a == b,
        })
        cases[-1]["counts"], cases[-1]["rdf"] = counts(u, sel_a, sel_b, bins, r_max_nm * 10, excl)

    # .xtc (through the .gro's topology), nm: three frames of the same molecules, boxes of 4, 4.25 and 4.5 nm (whole grid steps).
    from MDAnalysis.coordinates.XTC import XTCWriter
    xtc = os.path.join(OUT, "waters.xtc")
    with XTCWriter(xtc, n_atoms=u.atoms.n_atoms) as w:
        for box in (4.0, 4.25, 4.5):
            cells = int(round(box * grid))
            pos = []
            for m in range(200):
                o = [rng.randrange(cells) for _ in range(3)]
                pos.append(o)
                for _ in range(2):
                    pos.append([(x + rng.randint(-8, 8)) % cells for x in o])
            u.atoms.positions = np.array(pos, dtype=np.float64) / grid * 10  # Angstrom
            u.dimensions = [box * 10] * 3 + [90.0] * 3
            w.write(u.atoms)
    ux = mda.Universe(gro, xtc)
    for a, b, sel_a, sel_b, excl in [("OW", "HW*", "name OW", "name HW1 HW2", (1, 2)),
                                     ("HW*", "HW*", "name HW1 HW2", "name HW1 HW2", (2, 2))]:
        cases.append({
            "file": "waters.xtc", "topology": "waters.gro", "types": f"{a},{b}", "exclude_molecule": True,
            "bins": bins, "r_max": r_max_nm, "frames": len(ux.trajectory), "both_orders": a == b,
        })
        cases[-1]["counts"], cases[-1]["rdf"] = counts(ux, sel_a, sel_b, bins, r_max_nm * 10, excl)

    # MDAnalysis leaves an index of the .xtc's frames beside it: not part of the data.
    for leftover in os.listdir(OUT):
        if leftover.startswith(".waters.xtc_offsets"):
            os.remove(os.path.join(OUT, leftover))

    record = {
        "made_by": "bench/peer-mdanalysis.py --seed %d" % args.seed,
        "mdanalysis": mda.__version__,
        "numpy": np.__version__,
        "cases": cases,
    }
    with open(os.path.join(OUT, "mdanalysis.json"), "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    for c in cases:
        print(f"{c['file']:18} {c['types']:8} exclude={c['exclude_molecule']!s:5} {sum(c['counts']):8d} pairs in {c['bins']} buckets")


if __name__ == "__main__":
    main()
