#!/usr/bin/env python3
"""Kernel time of forced plan variants against the planner's own, in one call on one GPU.

For each case (the issue-10 benchmark's SDH, RDF and 2PCF at 1,000,000
uniform points), runs the planner's plan and every variant of a small grid
(input cache, block size B, own points per thread R, shared copies) once
after a warm-up of the planner's plan, and checks that every variant found
the planner's result. Writes $OUT/sweep.md and $OUT/sweep.json.

Usage: scripts/sweep-variants.py   (TWOBS=path, SWEEP_CASES=0,2 to pick cases,
       BASELINE=path: another binary whose planner's result must be the same)
"""
import importlib.util
import itertools
import json
import os

OUT = os.environ.get("OUT", "/tmp")
TWOBS = os.environ.get("TWOBS", "target/release/twobs")
BASELINE = os.environ.get("BASELINE")
os.environ.setdefault("BENCH_N", os.environ.get("SWEEP_N", "1000000"))

# One run of a binary, its report read back: bench-ab.py's.
_spec = importlib.util.spec_from_file_location("bench_ab", os.path.join(os.path.dirname(__file__), "bench-ab.py"))
bench_ab = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_ab)

HIST_GRID = {
    "--input-cache": ["register_shm"],
    "--block-size": ["256", "512", "1024"],
    "--points-per-thread": ["2", "4", "8"],
    "--copies": ["16", "32"],
}
COUNT_GRID = {"--block-size": ["256", "512", "1024"], "--points-per-thread": ["1", "2", "4", "8"]}
CASES = [
    ("SDH, 50 buckets", "sdh", 1, ["--param", "bins=50"], HIST_GRID),
    ("SDH, 500 buckets", "sdh", 1, ["--param", "bins=500"], HIST_GRID),
    ("RDF open box", "rdf", 2, ["--param", "box=0", "--param", "r_max=0.5"], HIST_GRID),
    ("RDF periodic box", "rdf", 2, ["--param", "box=1", "--param", "r_max=0.5"], HIST_GRID),
    ("2PCF, r = 0.1", "2pcf", 1, ["--param", "r=0.1"], COUNT_GRID),
    # Issue 10's 2PCF target is for every pair; the planner's own plan walks a grid.
    ("2PCF, r = 0.1, every pair", "2pcf", 1, ["--param", "r=0.1", "--index", "none"], COUNT_GRID),
]
ONLY = {int(x) for x in os.environ.get("SWEEP_CASES", ",".join(str(i) for i in range(len(CASES)))).split(",") if x}


def run(problem, sets, args, forced, binary=TWOBS):
    return bench_ab.run(binary, problem, sets == 2, [*args, *forced])


def main():
    rows, md = [], ["| case | variant | kernel (s) | / planner | same result |", "| --- | --- | ---: | ---: | --- |"]
    for i, (label, problem, sets, args, grid) in enumerate(CASES):
        if i not in ONLY:
            continue
        run(problem, sets, args, [])  # warm-up: compiles and clocks up
        planned = run(problem, sets, args, [])
        if "error" in planned:
            md.append(f"| {label} | planner | error: {planned['error']} | | |")
            continue
        results = [("planner", planned)]
        if BASELINE:
            results.append(("baseline's planner", run(problem, sets, args, [], BASELINE)))
        keys = list(grid)
        for values in itertools.product(*(grid[k] for k in keys)):
            forced = [x for kv in zip(keys, values) for x in kv]
            results.append((" ".join(forced), run(problem, sets, args, forced)))
        best = min((r["kernel_s"] for _, r in results if "kernel_s" in r), default=None)
        for name, r in results:
            rows.append({"case": label, "forced": name, **r})
            if "error" in r:
                md.append(f"| {label} | {name} | error: {r['error']} | | |")
                continue
            mark = " (best)" if r["kernel_s"] == best else ""
            same = "yes" if r["digest"] == planned["digest"] else "**NO**"
            who = "baseline: " if name.startswith("baseline") else ""
            md.append(f"| {label} | {who}{r['variant']}{mark} | {r['kernel_s']:.4f} | {r['kernel_s'] / planned['kernel_s']:.2f} | {same} |")
        print("\n".join(md[-len(results):]), flush=True)
    with open(os.path.join(OUT, "sweep.json"), "w") as f:
        json.dump(rows, f, indent=1)
    with open(os.path.join(OUT, "sweep.md"), "w") as f:
        f.write("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
