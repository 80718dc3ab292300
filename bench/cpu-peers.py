#!/usr/bin/env python3
"""The CPU backend beside the CPU libraries its users know: the table of
docs/benchmarks.md, "The CPU backend beside its peers".

Each row of the table: twobs (target/release/twobs, --backend cpu, every
core) and its peer (freud, scipy's cKDTree, Corrfunc) on the same data, made
here with numpy default_rng(SEED): uniform points in the unit cube. Times are
wall clock: twobs's whole process (read, grid, pairs, write; its driver
compiled by a warm-up run on a few points first), the peer's call from its
arrays in memory (tree or grid built inside). Best of --reps.

Results are compared: twobs computes in f32 with exact key edges, Corrfunc and
cKDTree in f64 (freud in f32 with its own arithmetic), so a pair whose
distance lies within a few f32 roundings of a bucket edge or cutoff may fall
on the other side. For every row the script counts the pairs that differ
(half the sum of |count difference| for histograms, the count difference for
joins, rows with another neighbour set for KNN) and the pairs whose f64
distance lies within 2^-20 of an edge (scipy's count_neighbors at each edge
times 1 -/+ 2^-20): a row is `exact up to edges` when the first is at most the
second.

Peers are installed in a venv under target/peers-venv (Corrfunc builds
against libgsl-dev: `apt-get install -y libgsl-dev`); the script runs itself
again inside it.

Usage: bench/cpu-peers.py [--quick] [--rows a,b,...] [--reps N] [--threads T] [--huge [--huge-peer]] [--cells]
                                  [--reuse-peers] [--json FILE]
  rows: gr100k gr1m join1m knn1m dd200k dd200kp dd1m dd1mp xi gr1m025 cells1mc cells1mu
  --rows   just these rows, in this order (any row, those --huge and --cells add too)
  --threads  twobs's --threads and every peer's threads (default: every core)
  TWOBS=binary (default target/release/twobs), TWOBS_BEFORE=binary (a second build timed beside it)
  --quick  every row but g(r) of 1M atoms and DD(r) of 1M points (minutes each)
  --cells  also the cell hierarchy's CPU line: log-binned counts of 1M points (clustered, uniform) to half the box, twobs's
           pick (--index auto) beside Corrfunc and TreeCorr (bin_slop=0), one twobs run, a row for each peer
  --huge   also g(r) of 1M atoms at r_max 0.25 (hours for a grid-less build: every pair); its peer (freud,
           ~6,000 s) only with --huge-peer
  --reuse-peers  take peers' times and results kept in target/peers-cache by an earlier run
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
PEERS = ["numpy", "scipy", "freud-analysis", "treecorr", "Corrfunc"]
SEED = 20261126
EDGE = 2.0 ** -20  # a pair within this share of an edge may fall either side in f32


def ensure_venv():
    """Re-runs this script in the venv, making it first where it is missing."""
    python = os.path.join(VENV, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    if not os.path.exists(python):
        if subprocess.run(["dpkg", "-s", "libgsl-dev"], capture_output=True).returncode != 0:
            subprocess.run(["apt-get", "install", "-y", "libgsl-dev"], check=True)
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", *PEERS], check=True)
    os.execv(python, [python, *sys.argv])


ensure_venv()
import numpy as np  # noqa: E402
from scipy.spatial import cKDTree  # noqa: E402

TWOBS = os.environ.get("TWOBS", os.path.join(ROOT, "target", "release", "twobs"))
# Another build of twobs timed on each row beside this one (the same data, the
# same minute of the machine), its result checked equal: a before and after.
BEFORE = os.environ.get("TWOBS_BEFORE")
REUSE_PEERS = HUGE_PEER = False
WORK = tempfile.mkdtemp(prefix="bench-cpu-peers-", dir=os.path.join(ROOT, "target"))
THREADS = os.cpu_count()


def points(n, salt):
    return np.random.default_rng([SEED, salt]).random((n, 3), dtype=np.float32)


def save(name, pts):
    path = os.path.join(WORK, name)
    np.save(path, pts)
    return path


def twobs(args, out, reps):
    """Runs twobs (after a warm-up on 1000 points that compiles its driver); returns (best wall s, report).
    With TWOBS_BEFORE, runs that build too and records its time and whether its result file is the same."""
    warm = [a if not a.endswith(".npy") or "out" in a else save("warm.npy", points(1000, 99)) for a in args]
    ext = os.path.splitext(out)[1]
    binaries = [(TWOBS, out)] + ([(BEFORE, out + ".before" + ext)] if BEFORE else [])
    times = {}
    for binary, dest in binaries:
        if binary == BEFORE:
            args, warm = ([before_spec(a) for a in x] for x in (args, warm))
        subprocess.run([binary, *warm, "--backend", "cpu", "--threads", str(THREADS), "--quiet", "--out",
                        os.path.join(WORK, "warm-out" + ext)],
                       check=True, capture_output=True)
        best, report = None, os.path.join(WORK, "report.json")
        for _ in range(reps):
            t = time.perf_counter()
            # `xi` writes no report.
            reporting = ["--report", report] if args[0] == "run" else []
            subprocess.run([binary, *args, "--backend", "cpu", "--threads", str(THREADS), "--quiet", "--out", dest,
                            *reporting], check=True)
            wall = time.perf_counter() - t
            best = wall if best is None else min(best, wall)
        times[binary] = (best, json.load(open(report)) if args[0] == "run" else {})
    best, rep = times[TWOBS]
    if BEFORE:
        rep["before_s"] = times[BEFORE][0]
        rep["same_as_before"] = same_result(out, binaries[1][1])
    return best, rep


def before_spec(arg):
    """DD_SPEC for a build older than <cutoff metric> (which refuses the attribute): a copy without it."""
    if arg != DD_SPEC:
        return arg
    text = open(DD_SPEC).read().replace(' metric="euclidean"', "")
    text = text.replace("../../problems/", os.path.join(ROOT, "problems") + "/")
    path = os.path.join(WORK, "dd-periodic-before.xml")
    open(path, "w").write(text)
    return path


def same_result(ours, before):
    """Whether two result files hold the same result (pairs in any order)."""
    if ours.endswith(".npy"):
        a, b = np.load(ours), np.load(before)
        if a.ndim == 2 and a.shape[1] == 2 and a.dtype.kind in "iu":  # pairs
            a, b = np.unique(a, axis=0), np.unique(b, axis=0)
        return bool(a.shape == b.shape and np.array_equal(a, b, equal_nan=True))
    return open(ours, "rb").read() == open(before, "rb").read()


PEER_CACHE = os.path.join(ROOT, "target", "peers-cache")


def peer(call, reps, key=None):
    """The peer's best wall time of `reps` calls and its result. With --reuse-peers, a result and time kept
    under target/peers-cache/KEY.pkl from an earlier run on the same data (same seed and size) is taken
    instead: freud's g(r) of 1M atoms takes minutes, and does not change with twobs."""
    import pickle
    path = os.path.join(PEER_CACHE, f"{key}-t{THREADS}.pkl") if key else None
    if path and REUSE_PEERS and os.path.exists(path):
        with open(path, "rb") as f:
            return pickle.load(f)
    best, result = None, None
    for _ in range(reps):
        t = time.perf_counter()
        result = call()
        wall = time.perf_counter() - t
        best = wall if best is None else min(best, wall)
    if path:
        os.makedirs(PEER_CACHE, exist_ok=True)
        with open(path, "wb") as f:
            pickle.dump((best, result), f)
    return best, result


def near_edges(pts, edges, box, other=None):
    """Pairs (each once for one set) whose f64 distance lies within EDGE of one of `edges`."""
    p = pts.astype(np.float64)
    tree = cKDTree(p, boxsize=box)
    o = tree if other is None else cKDTree(other.astype(np.float64), boxsize=box)
    radii = np.sort(np.concatenate([np.asarray(edges) * (1 - EDGE), np.asarray(edges) * (1 + EDGE)]))
    counts = tree.count_neighbors(o, radii, cumulative=True).astype(np.int64)
    near = int(sum(counts[2 * k + 1] - counts[2 * k] for k in range(len(edges))))
    return near // 2 if other is None else near


def histogram_counts(path):
    """The counts of a histogram twobs wrote as .npy: rows of (lo, hi, count[, g])."""
    return np.load(path)[:, 2].astype(np.int64)


def moved(ours, theirs, twice):
    """Pairs in other buckets: a pair moved changes two buckets by one, a pair leaving the range one."""
    d = np.abs(twice * np.asarray(ours, dtype=np.int64).reshape(-1) - np.asarray(theirs, dtype=np.int64)).sum()
    return int(-(-d // (2 * twice)))


def row(name, ours, theirs, peer_name, differ, near):
    if theirs is None:  # the peer was not run (--huge without --huge-peer)
        return {"job": name, "twobs_s": ours, "peer": peer_name + " (not run)", "peer_s": None, "ratio": None,
                "pairs_differ": None, "pairs_near_edges": None, "exact_up_to_edges": None}
    return {"job": name, "twobs_s": ours, "peer": peer_name, "peer_s": theirs, "ratio": ours / theirs,
            "pairs_differ": int(differ), "pairs_near_edges": int(near), "exact_up_to_edges": bool(differ <= near)}


def gr(name, n, r_max, bins, reps, peer_too=True):
    """g(r) of n atoms in the periodic unit box against freud's RDF (each pair twice there)."""
    import freud
    pts = points(n, 1) - np.float32(0.5)  # freud's box is centred on the origin
    path = save("atoms.npy", pts + np.float32(0.5))
    out = os.path.join(WORK, "gr.npy")
    ours, rep = twobs(["run", "rdf", "--input", path, "--param", f"r_max={r_max}", "--param", f"bins={bins}",
                       "--param", "box=1"], out, reps)
    counts = histogram_counts(out)
    box = freud.box.Box.cube(1.0)

    def call():
        rdf = freud.density.RDF(bins=bins, r_max=r_max)
        rdf.compute(system=(box, pts), reset=True)
        return rdf.bin_counts

    if not peer_too:
        return row(name, ours, None, "freud", None, None), rep
    theirs, fc = peer(call, reps, f"gr-{n}-{r_max}-{bins}")
    differ = moved(counts, fc, 2)
    edges = np.arange(1, bins + 1) * (r_max / bins)
    return row(name, ours, theirs, "freud", differ, near_edges(pts + 0.5, edges, 1.0)), rep


def selfjoin(name, n, neighbours, reps):
    pts = points(n, 2)
    eps = float((neighbours / (4 / 3 * np.pi * n)) ** (1 / 3))
    path = save("points.npy", pts)
    out = os.path.join(WORK, "pairs.npy")
    ours, rep = twobs(["run", "selfjoin", "--input", path, "--param", f"eps={eps}"], out, reps)
    ours_pairs = len(np.load(out))
    p64 = pts.astype(np.float64)
    theirs, found = peer(lambda: cKDTree(p64).query_pairs(eps, output_type="ndarray"), reps, f"join-{n}-{neighbours}")
    return row(name, ours, theirs, "cKDTree", abs(ours_pairs - len(found)), near_edges(pts, [eps], None)), rep


def knn(name, n, k, reps):
    pts = points(n, 3)
    path = save("points.npy", pts)
    out = os.path.join(WORK, "knn.npy")
    ours, rep = twobs(["run", "knn", "--input", path, "--param", f"k={k}"], out, reps)
    ids = np.load(out)
    p64 = pts.astype(np.float64)

    def call():
        return cKDTree(p64).query(p64, k=k + 1, workers=THREADS)

    theirs, (dist, idx) = peer(call, reps, f"knn-{n}-{k}")
    differ = sum(set(a) != set(b[b != i][:k]) for i, (a, b) in enumerate(zip(ids, idx)))
    # A row may differ where its K-th and (K+1)-th f64 distances are within EDGE.
    extra = cKDTree(p64).query(p64, k=k + 2)[0]
    near = int(np.sum(extra[:, k + 1] - extra[:, k] <= EDGE * extra[:, k]))
    return row(name, ours, theirs, "cKDTree", differ, near), rep


def log_edges(lo, hi, bins):
    """twobs's log edges: lo (hi / lo)^(k / bins) in f64, rounded to f32."""
    e = lo * (hi / lo) ** (np.arange(bins + 1) / bins)
    return e.astype(np.float32).astype(np.float64)


DD_SPEC = os.path.join(ROOT, "bench", "cpu-peers", "dd-periodic.xml")


def dd(name, n, periodic, reps, lo=0.001, hi=0.1, bins=20):
    """DD(r) in log buckets against Corrfunc's DD (f64, each pair twice there)."""
    from Corrfunc.theory.DD import DD
    pts = points(n, 4)
    path = save("points.npy", pts)
    out = os.path.join(WORK, "dd.npy")
    problem = DD_SPEC if periodic else "sdh"
    extra = ["--param", "box=1"] if periodic else []
    ours, rep = twobs(["run", problem, "--input", path, "--log-bins", "--param", f"r_min={lo}",
                       "--param", f"r_max={hi}", "--param", f"bins={bins}", *extra], out, reps)
    counts = histogram_counts(out)
    edges = log_edges(lo, hi, bins)
    x, y, z = (pts[:, c].astype(np.float64) for c in range(3))

    def call():
        return DD(1, THREADS, edges, x, y, z, periodic=periodic, boxsize=1.0 if periodic else 0.0)["npairs"]

    theirs, npairs = peer(call, reps, f"dd-{n}-{periodic}-{lo}-{hi}-{bins}")
    differ = moved(counts, npairs, 2)
    return row(name, ours, theirs, "Corrfunc", differ, near_edges(pts, edges, 1.0 if periodic else None)), rep


def xi(name, nd, nr, reps, lo=0.001, hi=0.1, bins=20):
    """Landy-Szalay xi against Corrfunc's DD, DR and RR (f64)."""
    from Corrfunc.theory.DD import DD
    from Corrfunc.utils import convert_3d_counts_to_cf
    data, rand = points(nd, 5), points(nr, 6)
    dpath, rpath = save("data.npy", data), save("randoms.npy", rand)
    out = os.path.join(WORK, "xi.csv")
    ours, rep = twobs(["xi", "--data", dpath, "--randoms", rpath, "--log-bins", "--param", f"r_min={lo}",
                       "--param", f"r_max={hi}", "--param", f"bins={bins}"], out, reps)
    edges = log_edges(lo, hi, bins)
    d = [data[:, c].astype(np.float64) for c in range(3)]
    r = [rand[:, c].astype(np.float64) for c in range(3)]

    def call():
        dd_ = DD(1, THREADS, edges, *d, periodic=False)
        dr = DD(0, THREADS, edges, *d, X2=r[0], Y2=r[1], Z2=r[2], periodic=False)
        rr = DD(1, THREADS, edges, *r, periodic=False)
        return dd_, dr, rr, convert_3d_counts_to_cf(nd, nd, nr, nr, dd_, dr, dr, rr)

    theirs, (dd_, dr, rr, cf) = peer(call, reps, f"xi-{nd}-{nr}-{lo}-{hi}-{bins}")
    mine = np.genfromtxt(out, delimiter=",", names=True)
    cols = mine.dtype.names
    differ = sum(moved(mine[col], c["npairs"], twice) for col, c, twice in (("dd", dd_, 2), ("dr", dr, 1), ("rr", rr, 2)))
    near = near_edges(data, edges, None) + near_edges(data, edges, None, rand) + near_edges(rand, edges, None)
    return row(name, ours, theirs, "Corrfunc", differ, near), rep


def cell_points(kind, n):
    """bench/cells-cpu.py's points: uniform in the unit cube, or 16 Gaussian clusters of sigma 0.02."""
    rng = np.random.default_rng(SEED)
    if kind == "uniform":
        return rng.random((n, 3), dtype=np.float32)
    centres = rng.random((16, 3))
    which = rng.integers(0, 16, n)
    p = centres[which] + rng.normal(0.0, 0.02, (n, 3))
    return np.clip(p, 0.0, 1.0 - 2.0**-52).astype(np.float32)


def cells(name, n, kind, reps, lo=0.001, hi=0.5, bins=20):
    """The cell hierarchy's CPU line: log-binned counts to half the box (twobs's pick, --index auto: the grid, the cell
    hierarchy or every pair) against Corrfunc's DD (f64, open, each pair twice) and TreeCorr's NNCorrelation
    (f64, bin_slop=0). Two rows, one a peer, from one twobs run."""
    from Corrfunc.theory.DD import DD
    import treecorr
    pts = cell_points(kind, n)
    path = save("cells.npy", pts)
    out = os.path.join(WORK, "cells.npy.out.npy")
    ours, rep = twobs(["run", "sdh", "--input", path, "--log-bins", "--param", f"r_min={lo}", "--param",
                       f"r_max={hi}", "--param", f"bins={bins}"], out, reps)
    counts = histogram_counts(out)
    edges = log_edges(lo, hi, bins)
    x, y, z = (pts[:, c].astype(np.float64) for c in range(3))
    near = near_edges(pts, edges, None)

    def corrfunc():
        return DD(1, THREADS, edges, x, y, z, periodic=False)["npairs"]

    def tree():
        cat = treecorr.Catalog(x=x, y=y, z=z)
        nn = treecorr.NNCorrelation(min_sep=lo, max_sep=hi, nbins=bins, bin_slop=0, num_threads=THREADS)
        nn.process(cat)
        return np.rint(nn.npairs).astype(np.int64)

    cf_s, cf = peer(corrfunc, reps, f"cells-dd-{kind}-{n}-{lo}-{hi}-{bins}")
    tc_s, tc = peer(tree, reps, f"cells-tc-{kind}-{n}-{lo}-{hi}-{bins}")
    return [row(name, ours, cf_s, "Corrfunc", moved(counts, cf, 2), near),
            row(name, ours, tc_s, "TreeCorr (bin_slop=0)", moved(counts, tc, 1), near)], rep


ROWS = {
    "gr100k": (False, lambda reps: gr("g(r) 100k atoms, r_max 0.1, periodic", 100_000, 0.1, 100, reps)),
    "gr1m": (True, lambda reps: gr("g(r) 1M atoms, r_max 0.1, periodic", 1_000_000, 0.1, 100, reps)),
    "join1m": (False, lambda reps: selfjoin("self-join 1M 3-D, ~30 neighbours", 1_000_000, 30, reps)),
    "knn1m": (False, lambda reps: knn("KNN K=16, 1M 3-D", 1_000_000, 16, reps)),
    "dd200k": (False, lambda reps: dd("DD(r) 20 log buckets 0.001-0.1, 200k open", 200_000, False, reps)),
    "dd200kp": (False, lambda reps: dd("DD(r) 20 log buckets 0.001-0.1, 200k periodic", 200_000, True, reps)),
    "dd1m": (True, lambda reps: dd("DD(r) 20 log buckets 0.001-0.1, 1M open", 1_000_000, False, reps)),
    "dd1mp": (True, lambda reps: dd("DD(r) 20 log buckets 0.001-0.1, 1M periodic", 1_000_000, True, reps)),
    "xi": (False, lambda reps: xi("Landy-Szalay xi, 100k data, 200k randoms", 100_000, 200_000, reps)),
    "gr1m025": (True, lambda reps: gr("g(r) 1M atoms, r_max 0.25, periodic", 1_000_000, 0.25, 100, reps, HUGE_PEER)),
    "cells1mc": (True, lambda reps: cells("counts, 20 log buckets 0.001-0.5, 1M clustered", 1_000_000, "clustered", reps)),
    "cells1mu": (True, lambda reps: cells("counts, 20 log buckets 0.001-0.5, 1M uniform", 1_000_000, "uniform", reps)),
}
# Rows that run only when --rows names them (--cells adds both cells rows).
BY_NAME = {"gr1m025", "cells1mc", "cells1mu"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--huge", action="store_true")
    ap.add_argument("--rows", default="")
    ap.add_argument("--reps", type=int, default=0)
    ap.add_argument("--huge-peer", action="store_true", help="with --huge, run freud on that row too (hours)")
    ap.add_argument("--cells", action="store_true", help="also the cell hierarchy's CPU rows (cells1mc, cells1mu: an hour or more)")
    ap.add_argument("--threads", type=int, default=0, help="threads for twobs and every peer (default: every core)")
    ap.add_argument("--json")
    ap.add_argument("--reuse-peers", action="store_true",
                    help="take each peer's time and result from target/peers-cache where an earlier run left them")
    args = ap.parse_args()
    global REUSE_PEERS, HUGE_PEER, THREADS
    REUSE_PEERS, HUGE_PEER = args.reuse_peers, args.huge_peer
    names = [n for n in ROWS if n not in BY_NAME or (n == "gr1m025" and args.huge) or (n.startswith("cells") and args.cells)]
    if args.quick:
        names = [n for n in names if not ROWS[n][0]]
    if args.rows:
        names = args.rows.split(",")
    unknown = [n for n in names if n not in ROWS]
    if unknown:
        ap.error(f"--rows: no row {', '.join(unknown)}; rows are {', '.join(ROWS)}")
    if args.threads:
        THREADS = args.threads
    git = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    print(f"# twobs {git.stdout.strip()} ({TWOBS}), {THREADS} threads of {os.cpu_count()} cores, {os.uname().nodename}, seed {SEED}",
          flush=True)
    before = " twobs before (s) | same as before |" if BEFORE else ""
    print(f"| job |{before} twobs wall (s) | peer | peer (s) | twobs / peer | pairs that differ | "
          "pairs within 2^-20 of an edge | index |")
    print("| --- |" + (" ---: | --- |" if BEFORE else "") + " ---: | --- | ---: | ---: | ---: | ---: | --- |", flush=True)
    rows = []
    for n in names:
        big, run = ROWS[n]
        out, rep = run(args.reps or (1 if big else 3))
        for r in out if isinstance(out, list) else [out]:
            r["index"] = rep.get("index", {}).get("why", "") if isinstance(rep.get("index"), dict) else ""
            r["report"] = rep
            rows.append(r)
            ok = "" if r["exact_up_to_edges"] in (True, None) else " (MORE than the edges)"
            was = f" {rep['before_s']:.3f} | {'yes' if rep['same_as_before'] else 'NO'} |" if BEFORE else ""
            num = lambda x, f: "-" if x is None else format(x, f)  # noqa: E731
            print(f"| {r['job']} |{was} {r['twobs_s']:.3f} | {r['peer']} | {num(r['peer_s'], '.3f')} | "
                  f"{num(r['ratio'], '.2f')} | {num(r['pairs_differ'], 'd')}{ok} | {num(r['pairs_near_edges'], 'd')} | "
                  f"{r['index'][:110]} |", flush=True)
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1, default=str)


if __name__ == "__main__":
    main()
