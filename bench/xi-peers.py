#!/usr/bin/env python3
"""twobs xi beside Corrfunc and TreeCorr on the same fresh random points.

Cases, each on points made here with numpy default_rng(seed) (the seed is printed):
  catalogue  data against randoms in the unit cube, linear buckets [1/16, 1/4):
             DD, DR, RR against Corrfunc.theory.DD (periodic=False; autocorr
             counts halved) and xi by `twobs xi --norm squared` against
             Corrfunc.utils.convert_3d_counts_to_cf and TreeCorr's
             NNCorrelation.calculateXi (bin_slop=0: every pair exact);
  jackknife  the catalogue in 4 patches (quadrants in x, y): xi's jackknife
             covariance of `twobs xi --norm squared --patches --cov` against
             TreeCorr's var_method="jackknife" (its cross_patch_weight "simple");
  sky        RA and Dec in degrees on a patch of sky, angular buckets
             [1/2, 8 1/2) degrees: DD, DR, RR of `twobs xi --radec` against
             Corrfunc.mocks.DDtheta_mocks, w(theta) by --norm squared against
             convert_3d_counts_to_cf and TreeCorr (sep_units="deg"). Both sides
             in f64; pairs within 1e-9 degrees of an edge are counted;
  box        data in a periodic box of side 2, buckets [1/8, 3/4):
             DD of `twobs xi --box 2` against Corrfunc.theory.DD (periodic=True),
             and xi by `--norm pairs` against Corrfunc.theory.xi;
  rppi       data against randoms in a cube of side 64, rp buckets [2, 10) of 1,
             pi buckets of 1 to pimax 8: DD, DR, RR of `twobs xi --rp-pi 8`
             against Corrfunc.theory.DDrppi (periodic=False; autocorr counts
             halved) and wp by --norm squared against
             Corrfunc.utils.convert_rp_pi_counts_to_wp; then the data in a
             periodic cube of side 64: DD(rp, pi) against DDrppi (periodic=True)
             and wp of `twobs xi --box 64 --rp-pi 8` against Corrfunc.theory.wp;
  smu        the periodic cube's data, s buckets [2, 10) of 1, mu buckets of 1/4
             over [0, 1): DD(s, mu) of `twobs xi --box 64 --s-mu 4` against
             Corrfunc.theory.DDsmu (periodic=True), and of the open cube's data
             and randoms (DD, DR) against DDsmu (periodic=False).

For the 2-D cases a pair is near an edge where its rp, pi, s or mu (in f64)
lies within 2^-14 of one of its axis's edges: twobs's f32 separations of
coordinates up to 64 differ from f64's by a few 2^-18.

Bucket edges are dyadic (exact in f32 and f64), so both sides test the same
edges. twobs compares f32 distances with exact key edges, the peers compare
f64 squared distances: a pair whose distance lies within 2^-20 of an edge may
fall on either side. Each case prints the pairs that differ and the pairs that
near an edge; it passes when the first is at most the second, and xi agrees to
1e-12 in every bucket whose counts agree.

--record DIR writes the points (.npy) and the peers' numbers (peers.json for
catalogue, box and sky; peers-2d.json for rppi and smu) for tests/xi.rs and
tests/hist2d.rs, which check the library against them where Corrfunc (it
needs libgsl-dev) cannot be installed. --cases picks the cases (all by default).

Peers live in a venv under target/peers-venv (numpy, scipy, treecorr, Corrfunc);
the script runs itself again inside it.

Usage: bench/xi-peers.py [--seed S] [--n N] [--record DIR] [--cases catalogue,box,sky,rppi,smu]   (TWOBS=binary, default target/debug/twobs)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, "target", "peers-venv")
PEERS = ["numpy", "scipy", "treecorr", "Corrfunc"]
EDGE = 2.0 ** -20


def ensure_venv():
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
import treecorr  # noqa: E402
from Corrfunc.theory import DD as corrfunc_dd  # noqa: E402
from Corrfunc.theory import xi as corrfunc_xi  # noqa: E402
from Corrfunc.theory import DDrppi, DDsmu  # noqa: E402
from Corrfunc.theory import wp as corrfunc_wp  # noqa: E402
from Corrfunc.utils import convert_rp_pi_counts_to_wp  # noqa: E402
from Corrfunc.mocks import DDtheta_mocks  # noqa: E402
from Corrfunc.utils import convert_3d_counts_to_cf  # noqa: E402
from scipy.spatial import cKDTree  # noqa: E402

TWOBS = os.environ.get("TWOBS", os.path.join(ROOT, "target", "debug", "twobs"))
WORK = tempfile.mkdtemp(prefix="xi-peers-", dir=os.path.join(ROOT, "target"))


def near_edges(a, edges, box=None, b=None):
    """Pairs (each once within one set) whose f64 distance lies within EDGE of an edge."""
    ta = cKDTree(a.astype(np.float64), boxsize=box)
    tb = ta if b is None else cKDTree(b.astype(np.float64), boxsize=box)
    radii = np.sort(np.concatenate([edges * (1 - EDGE), edges * (1 + EDGE)]))
    c = ta.count_neighbors(tb, radii, cumulative=True).astype(np.int64)
    near = int(sum(c[2 * k + 1] - c[2 * k] for k in range(len(edges))))
    return near // 2 if b is None else near


def moved(ours, theirs):
    """Pairs in another bucket: one moved changes two buckets by one, one leaving the range one."""
    return int(-(-np.abs(np.asarray(ours) - np.asarray(theirs)).sum() // 2))


def twobs_xi(*args):
    out = os.path.join(WORK, "xi.csv")
    subprocess.run([TWOBS, "xi", *args, "--backend", "cpu", "--out", out, "--quiet"], check=True)
    rows = np.genfromtxt(out, delimiter=",", names=True)
    return {name: rows[name] for name in rows.dtype.names}


def save(name, pts):
    path = os.path.join(WORK, name + ".npy")
    np.save(path, pts)
    return path


def corrfunc_counts(autocorr, edges, a, b=None, box=None):
    """Corrfunc's counts in f64, each unordered pair once (autocorr counts both orders)."""
    a = a.astype(np.float64)
    kw = dict(periodic=box is not None, boxsize=box) if box is not None else dict(periodic=False)
    if b is None:
        n = corrfunc_dd(1, 2, edges, a[:, 0], a[:, 1], a[:, 2], **kw)["npairs"]
        return n // 2
    b = b.astype(np.float64)
    return corrfunc_dd(0, 2, edges, a[:, 0], a[:, 1], a[:, 2], X2=b[:, 0], Y2=b[:, 1], Z2=b[:, 2], **kw)["npairs"]


def report(name, ours, theirs, near):
    differ = moved(ours, theirs)
    print(f"  {name}: {int(np.sum(ours))} pairs; {differ} in another bucket than the peer's, {near} near an edge")
    return differ <= near


def close(name, ours, theirs, same):
    """xi equal to 1e-12 in every bucket whose counts agree."""
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    worst = np.max(np.abs(ours - theirs)[same] / np.maximum(np.abs(theirs[same]), 1.0), initial=0.0)
    print(f"  xi against {name}: largest relative difference {worst:.2e} over {int(same.sum())} buckets")
    return worst <= 1e-12


def catalogue(rng, n, record):
    data = rng.random((n, 3), dtype=np.float32)
    randoms = rng.random((2 * n, 3), dtype=np.float32)
    lo, hi, bins = 0.0625, 0.25, 12
    edges = np.linspace(lo, hi, bins + 1)
    print(f"catalogue: {n} data, {2 * n} randoms, {bins} buckets over [{lo}, {hi})")
    got = twobs_xi("--data", save("data", data), "--randoms", save("randoms", randoms), "--norm", "squared",
                   "--param", f"bins={bins}", "--param", f"r_min={lo}", "--param", f"r_max={hi}")
    assert np.array_equal(np.append(got["r_lo"], got["r_hi"][-1]), edges), "twobs's edges are the dyadic ones"
    dd, rr = corrfunc_counts(1, edges, data), corrfunc_counts(1, edges, randoms)
    dr = corrfunc_counts(0, edges, data, randoms)
    ok = all([
        report("DD", got["dd"], dd, near_edges(data, edges)),
        report("DR", got["dr"], dr, near_edges(data, edges, b=randoms)),
        report("RR", got["rr"], rr, near_edges(randoms, edges)),
    ])
    nd, nr = len(data), len(randoms)
    cf = convert_3d_counts_to_cf(nd, nd, nr, nr, 2 * dd, dr, dr, 2 * rr)
    same = (got["dd"] == dd) & (got["dr"] == dr) & (got["rr"] == rr)
    ok &= close("Corrfunc convert_3d_counts_to_cf", got["xi"], cf, same)
    cat = lambda p: treecorr.Catalog(x=p[:, 0].astype(np.float64), y=p[:, 1].astype(np.float64),  # noqa: E731
                                     z=p[:, 2].astype(np.float64))
    cfg = dict(min_sep=lo, max_sep=hi, nbins=bins, bin_type="Linear", bin_slop=0)
    tdd, tdr, trr = (treecorr.NNCorrelation(**cfg) for _ in range(3))
    tdd.process(cat(data))
    trr.process(cat(randoms))
    tdr.process(cat(data), cat(randoms))
    txi, _ = tdd.calculateXi(rr=trr, dr=tdr)
    same_tc = (got["dd"] == tdd.npairs) & (got["dr"] == tdr.npairs) & (got["rr"] == trr.npairs)
    print(f"  TreeCorr's pair counts equal Corrfunc's: {np.array_equal(tdd.npairs, dd) and np.array_equal(trr.npairs, rr)}")
    ok &= close("TreeCorr NNCorrelation.calculateXi", got["xi"], txi, same_tc)
    ok_j, cov = jackknife(data, randoms, edges, cfg, cat)
    ok &= ok_j
    if record:
        np.save(os.path.join(record, "catalogue-data.npy"), data)
        np.save(os.path.join(record, "catalogue-randoms.npy"), randoms)
        np.save(os.path.join(record, "catalogue-data-patches.npy"), quadrant(data))
        np.save(os.path.join(record, "catalogue-random-patches.npy"), quadrant(randoms))
        return ok, {"edges": edges.tolist(), "dd": dd.tolist(), "dr": dr.tolist(), "rr": rr.tolist(),
                    "xi_corrfunc": cf.tolist(), "xi_treecorr": txi.tolist(),
                    "near_edges": {"dd": near_edges(data, edges), "dr": near_edges(data, edges, b=randoms),
                                   "rr": near_edges(randoms, edges)},
                    "cov_treecorr": cov.tolist()}
    return ok, None


def quadrant(p):
    return (np.floor(p[:, 0] * 2) + 2 * np.floor(p[:, 1] * 2)).astype(np.int64)


def jackknife(data, randoms, edges, cfg, cat):
    """The covariance of xi over 4 patches, twobs's against TreeCorr's."""
    pd, pr = quadrant(data), quadrant(randoms)
    cov_out = os.path.join(WORK, "cov.csv")
    got = twobs_xi("--data", save("data", data), "--randoms", save("randoms", randoms), "--norm", "squared",
                   "--patches", save("pd", pd), "--random-patches", save("pr", pr), "--cov", cov_out,
                   "--param", f"bins={len(edges) - 1}", "--param", f"r_min={edges[0]}", "--param", f"r_max={edges[-1]}")
    rows = np.genfromtxt(cov_out, delimiter=",", names=True)
    ours = np.array([rows[f"cov_{j}"] for j in range(len(edges) - 1)]).T
    pcat = lambda p, k: treecorr.Catalog(x=p[:, 0].astype(np.float64), y=p[:, 1].astype(np.float64),  # noqa: E731
                                         z=p[:, 2].astype(np.float64), patch=k)
    tdd, tdr, trr = (treecorr.NNCorrelation(**cfg, var_method="jackknife", cross_patch_weight="simple") for _ in range(3))
    tdd.process(pcat(data, pd))
    trr.process(pcat(randoms, pr))
    tdr.process(pcat(data, pd), pcat(randoms, pr))
    tdd.calculateXi(rr=trr, dr=tdr)
    theirs = tdd.cov
    worst = np.max(np.abs(ours - theirs) / np.max(np.abs(theirs)))
    print(f"jackknife, 4 patches: covariance against TreeCorr's, largest difference {worst:.2e} of its largest entry;"
          f" xi_err {np.round(got['xi_err'], 5).tolist()}")
    return worst <= 1e-10, theirs


def sky_points(rng, n):
    """RA in [0, 60), Dec in [-30, 30) degrees, uniform on the sphere."""
    ra = rng.uniform(0.0, 60.0, n)
    dec = np.degrees(np.arcsin(rng.uniform(-0.5, 0.5, n)))
    return np.column_stack([ra, dec])


def angles_near_edges(a, edges, b=None, tol=1e-9):
    """Pairs whose f64 angle (degrees) lies within tol of an edge."""
    def unit(p):
        ra, dec = np.radians(p[:, 0]), np.radians(p[:, 1])
        return np.column_stack([np.cos(dec) * np.cos(ra), np.cos(dec) * np.sin(ra), np.sin(dec)])
    ua = unit(a)
    ub = ua if b is None else unit(b)
    near = 0
    for i in range(0, len(ua), 500):
        c = np.linalg.norm(ua[i:i + 500, None, :] - ub[None, :, :], axis=2)
        t = np.degrees(2 * np.arcsin(np.minimum(c / 2, 1.0)))
        if b is None:
            rows = np.arange(i, min(i + 500, len(ua)))[:, None]
            t = np.where(np.arange(len(ub))[None, :] > rows, t, np.inf)
        near += int(sum(np.count_nonzero(np.abs(t - e) < tol) for e in edges))
    return near


def sky(rng, n, record):
    data, randoms = sky_points(rng, n), sky_points(rng, 2 * n)
    lo, hi, bins = 0.5, 8.5, 16
    edges = np.linspace(lo, hi, bins + 1)
    print(f"sky: {n} data, {2 * n} randoms (RA, Dec in degrees), {bins} buckets over [{lo}, {hi}) degrees")
    got = twobs_xi("--radec", "--data", save("sky", data), "--randoms", save("sky-r", randoms), "--norm", "squared",
                   "--param", f"bins={bins}", "--param", f"theta_min={lo}", "--param", f"theta_max={hi}")
    def counts(autocorr, a, b=None):
        if b is None:
            return DDtheta_mocks(1, 2, edges, a[:, 0], a[:, 1])["npairs"] // 2
        return DDtheta_mocks(0, 2, edges, a[:, 0], a[:, 1], RA2=b[:, 0], DEC2=b[:, 1])["npairs"]
    dd, rr, dr = counts(1, data), counts(1, randoms), counts(0, data, randoms)
    near = {"dd": angles_near_edges(data, edges), "dr": angles_near_edges(data, edges, randoms),
            "rr": angles_near_edges(randoms, edges)}
    ok = all([report("DD(theta)", got["dd"], dd, near["dd"]), report("DR(theta)", got["dr"], dr, near["dr"]),
              report("RR(theta)", got["rr"], rr, near["rr"])])
    nd, nr = len(data), len(randoms)
    cf = convert_3d_counts_to_cf(nd, nd, nr, nr, 2 * dd, dr, dr, 2 * rr)
    same = (got["dd"] == dd) & (got["dr"] == dr) & (got["rr"] == rr)
    ok &= close("Corrfunc convert_3d_counts_to_cf of DDtheta_mocks", got["xi"], cf, same)
    cat = lambda p: treecorr.Catalog(ra=p[:, 0], dec=p[:, 1], ra_units="deg", dec_units="deg")  # noqa: E731
    cfg = dict(min_sep=lo, max_sep=hi, nbins=bins, bin_type="Linear", bin_slop=0, sep_units="deg", metric="Arc")
    tdd, tdr, trr = (treecorr.NNCorrelation(**cfg) for _ in range(3))
    tdd.process(cat(data))
    trr.process(cat(randoms))
    tdr.process(cat(data), cat(randoms))
    txi, _ = tdd.calculateXi(rr=trr, dr=tdr)
    same_tc = (got["dd"] == tdd.npairs) & (got["dr"] == tdr.npairs) & (got["rr"] == trr.npairs)
    ok &= close("TreeCorr (metric=Arc, sep_units=deg)", got["xi"], txi, same_tc)
    if record:
        np.save(os.path.join(record, "sky-data.npy"), data)
        np.save(os.path.join(record, "sky-randoms.npy"), randoms)
        return ok, {"edges": edges.tolist(), "dd": dd.tolist(), "dr": dr.tolist(), "rr": rr.tolist(),
                    "xi_corrfunc": cf.tolist(), "xi_treecorr": txi.tolist(), "near_edges": near}
    return ok, None


def box(rng, n, record):
    side = 2.0
    data = (rng.random((n, 3)) * side).astype(np.float32) % np.float32(side)
    lo, hi, bins = 0.125, 0.75, 10
    edges = np.linspace(lo, hi, bins + 1)
    print(f"box: {n} points in a periodic cube of side {side}, {bins} buckets over [{lo}, {hi})")
    got = twobs_xi("--data", save("box", data), "--box", str(side), "--norm", "pairs",
                   "--param", f"bins={bins}", "--param", f"r_min={lo}", "--param", f"r_max={hi}")
    dd = corrfunc_counts(1, edges, data, box=side)
    ok = report("DD (periodic)", got["dd"], dd, near_edges(data, edges, box=side))
    x = data.astype(np.float64)
    theory = corrfunc_xi(side, 2, edges, x[:, 0], x[:, 1], x[:, 2])
    same = got["dd"] == dd
    ok &= close("Corrfunc theory.xi", got["xi"], theory["xi"], same)
    if record:
        np.save(os.path.join(record, "box-data.npy"), data)
        return ok, {"side": side, "edges": edges.tolist(), "dd": dd.tolist(), "xi_corrfunc": theory["xi"].tolist(),
                    "near_edges": near_edges(data, edges, box=side)}
    return ok, None


EDGE_2D = 2.0 ** -14


def cells_of(a, b, rp_edges, second_edges, los, box=None):
    """Every pair's cell as twobs's reference sees it in f64, and the pairs
    near an edge: (counts per cell, near). los "pi": (rp, |dz|); "mu": (s, |dz|/s)."""
    a = a.astype(np.float64)
    bb = a if b is None else b.astype(np.float64)
    n1, n2 = len(rp_edges) - 1, len(second_edges) - 1
    # pi = |dz| and mu = |dz| / s are 0 only at dz = 0, exactly, on both sides: an edge at 0 is no edge to be near.
    near_second = second_edges[1:] if second_edges[0] == 0 else second_edges
    counts = np.zeros(n1 * n2, dtype=np.int64)
    near = 0
    for i in range(0, len(a), 256):
        d = a[i:i + 256, None, :] - bb[None, :, :]
        if box is not None:
            d -= box * np.round(d / box)
        across = np.hypot(d[..., 0], d[..., 1])
        z = np.abs(d[..., 2])
        if los == "pi":
            x, y = across, z
        else:
            x = np.sqrt(across ** 2 + z ** 2)
            with np.errstate(invalid="ignore", divide="ignore"):
                y = np.where(x > 0, z / x, 0.0)
        keep = np.ones(x.shape, dtype=bool)
        if b is None:
            rows = np.arange(i, min(i + 256, len(a)))[:, None]
            keep = np.arange(len(bb))[None, :] < rows
        near += int(np.count_nonzero(keep & ((np.min(np.abs(x[..., None] - rp_edges), axis=-1) < EDGE_2D)
                                             | (np.min(np.abs(y[..., None] - near_second), axis=-1) < EDGE_2D))))
        u = np.searchsorted(rp_edges, x, side="right") - 1
        v = np.searchsorted(second_edges, y, side="right") - 1
        ok = keep & (u >= 0) & (u < n1) & (v >= 0) & (v < n2)
        np.add.at(counts, u[ok] * n2 + v[ok], 1)
    return counts, near


def corrfunc_cells(los, a, b=None, box=None, rp_edges=None, pimax=None, mu_max=1.0, nmu=None):
    """Corrfunc's 2-D counts in f64, each unordered pair once (autocorr counts both orders)."""
    x = a.astype(np.float64)
    kw = dict(periodic=box is not None, boxsize=box) if box is not None else dict(periodic=False)
    two = {} if b is None else dict(X2=b[:, 0].astype(np.float64), Y2=b[:, 1].astype(np.float64),
                                    Z2=b[:, 2].astype(np.float64))
    auto = 1 if b is None else 0
    if los == "pi":
        n = DDrppi(auto, 2, pimax, rp_edges, x[:, 0], x[:, 1], x[:, 2], **kw, **two)["npairs"]
    else:
        n = DDsmu(auto, 2, rp_edges, mu_max, nmu, x[:, 0], x[:, 1], x[:, 2], **kw, **two)["npairs"]
    return n // 2 if b is None else n


def rppi(rng, n, record):
    side, pimax = 64.0, 8
    rp_edges = np.linspace(2.0, 10.0, 9)
    pi_edges = np.arange(pimax + 1, dtype=np.float64)
    data = (rng.random((n, 3)) * side).astype(np.float32)
    randoms = (rng.random((2 * n, 3)) * side).astype(np.float32)
    print(f"rppi: {n} data, {2 * n} randoms in a cube of side {side}, rp buckets [2, 10) of 1, pimax {pimax}")
    binning = ["--param", "rp_bins=8", "--param", "rp_min=2", "--param", "rp_max=10"]
    wp_out = os.path.join(WORK, "wp.csv")
    got = twobs_xi("--data", save("data", data), "--randoms", save("randoms", randoms), "--rp-pi", str(pimax),
                   "--norm", "squared", "--wp", wp_out, *binning)
    got_wp = np.genfromtxt(wp_out, delimiter=",", names=True)["wp"]
    dd = corrfunc_cells("pi", data, rp_edges=rp_edges, pimax=pimax)
    rr = corrfunc_cells("pi", randoms, rp_edges=rp_edges, pimax=pimax)
    dr = corrfunc_cells("pi", data, randoms, rp_edges=rp_edges, pimax=pimax)
    near = {k: cells_of(*ab, rp_edges, pi_edges, "pi")[1]
            for k, ab in [("dd", (data, None)), ("dr", (data, randoms)), ("rr", (randoms, None))]}
    ok = all([report("DD(rp, pi)", got["dd"], dd, near["dd"]), report("DR(rp, pi)", got["dr"], dr, near["dr"]),
              report("RR(rp, pi)", got["rr"], rr, near["rr"])])
    nd, nr = len(data), len(randoms)
    theirs_wp = convert_rp_pi_counts_to_wp(nd, nd, nr, nr, 2 * dd, dr, dr, 2 * rr, len(rp_edges) - 1, pimax)
    same = (got["dd"] == dd) & (got["dr"] == dr) & (got["rr"] == rr)
    rows_same = same.reshape(len(rp_edges) - 1, pimax).all(axis=1)
    ok &= close("Corrfunc convert_rp_pi_counts_to_wp", got_wp, theirs_wp, rows_same)
    # The periodic cube: DD(rp, pi) with minimum images, and wp with analytic RR.
    box = (rng.random((n, 3)) * side).astype(np.float32) % np.float32(side)
    got_box = twobs_xi("--data", save("box", box), "--box", str(side), "--rp-pi", str(pimax), "--norm", "pairs",
                       "--wp", wp_out, *binning)
    got_box_wp = np.genfromtxt(wp_out, delimiter=",", names=True)["wp"]
    dd_box = corrfunc_cells("pi", box, box=side, rp_edges=rp_edges, pimax=pimax)
    near_box = cells_of(box, None, rp_edges, pi_edges, "pi", box=side)[1]
    ok &= report("DD(rp, pi), periodic", got_box["dd"], dd_box, near_box)
    x = box.astype(np.float64)
    theory = corrfunc_wp(side, pimax, 2, rp_edges, x[:, 0], x[:, 1], x[:, 2])
    rows_same = (got_box["dd"] == dd_box).reshape(len(rp_edges) - 1, pimax).all(axis=1)
    ok &= close("Corrfunc theory.wp", got_box_wp, theory["wp"], rows_same)
    if record:
        np.save(os.path.join(record, "rppi-data.npy"), data)
        np.save(os.path.join(record, "rppi-randoms.npy"), randoms)
        np.save(os.path.join(record, "rppi-box.npy"), box)
        return ok, {"side": side, "pimax": pimax, "rp_edges": rp_edges.tolist(), "dd": dd.tolist(),
                    "dr": dr.tolist(), "rr": rr.tolist(), "wp_corrfunc": theirs_wp.tolist(), "near_edges": near,
                    "box": {"dd": dd_box.tolist(), "near_edges": near_box, "wp_corrfunc": theory["wp"].tolist()}}
    return ok, None


def smu(rng, n, record):
    side, nmu = 64.0, 4
    s_edges = np.linspace(2.0, 10.0, 9)
    mu_edges = np.linspace(0.0, 1.0, nmu + 1)
    box = (rng.random((n, 3)) * side).astype(np.float32) % np.float32(side)
    print(f"smu: {n} points in a periodic cube of side {side}, s buckets [2, 10) of 1, {nmu} mu buckets over [0, 1)")
    binning = ["--param", "s_bins=8", "--param", "s_min=2", "--param", "s_max=10"]
    got = twobs_xi("--data", save("box", box), "--box", str(side), "--s-mu", str(nmu), *binning)
    dd = corrfunc_cells("mu", box, box=side, rp_edges=s_edges, nmu=nmu)
    near = cells_of(box, None, s_edges, mu_edges, "mu", box=side)[1]
    ok = report("DD(s, mu), periodic", got["dd"], dd, near)
    data = (rng.random((n, 3)) * side).astype(np.float32)
    randoms = (rng.random((2 * n, 3)) * side).astype(np.float32)
    got_open = twobs_xi("--data", save("data", data), "--randoms", save("randoms", randoms), "--s-mu", str(nmu),
                        *binning)
    dd_open = corrfunc_cells("mu", data, rp_edges=s_edges, nmu=nmu)
    dr_open = corrfunc_cells("mu", data, randoms, rp_edges=s_edges, nmu=nmu)
    near_open = {"dd": cells_of(data, None, s_edges, mu_edges, "mu")[1],
                 "dr": cells_of(data, randoms, s_edges, mu_edges, "mu")[1]}
    ok &= report("DD(s, mu)", got_open["dd"], dd_open, near_open["dd"])
    ok &= report("DR(s, mu)", got_open["dr"], dr_open, near_open["dr"])
    if record:
        np.save(os.path.join(record, "smu-box.npy"), box)
        np.save(os.path.join(record, "smu-data.npy"), data)
        np.save(os.path.join(record, "smu-randoms.npy"), randoms)
        return ok, {"side": side, "nmu": nmu, "s_edges": s_edges.tolist(), "dd": dd.tolist(), "near_edges": near,
                    "open": {"dd": dd_open.tolist(), "dr": dr_open.tolist(), "near_edges": near_open}}
    return ok, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--record", default=None)
    ap.add_argument("--cases", default="catalogue,box,sky,rppi,smu")
    args = ap.parse_args()
    cases = args.cases.split(",")
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}; twobs {TWOBS}; Corrfunc and TreeCorr {treecorr.__version__} in {VENV}")
    rng = np.random.default_rng(seed)
    if args.record:
        os.makedirs(args.record, exist_ok=True)
    ok_c, rec_c = catalogue(rng, args.n, args.record) if "catalogue" in cases else (True, None)
    ok_b, rec_b = box(rng, args.n, args.record) if "box" in cases else (True, None)
    ok_s, rec_s = sky(rng, args.n, args.record) if "sky" in cases else (True, None)
    ok_b &= ok_s
    ok_r, rec_r = rppi(rng, args.n, args.record) if "rppi" in cases else (True, None)
    ok_m, rec_m = smu(rng, args.n, args.record) if "smu" in cases else (True, None)
    ok_b &= ok_r and ok_m
    if args.record and ("rppi" in cases or "smu" in cases):
        import Corrfunc
        meta = {"made_by": f"bench/xi-peers.py --seed {seed} --n {args.n} --record {args.record} --cases {args.cases}",
                "corrfunc": Corrfunc.__version__, "rppi": rec_r, "smu": rec_m}
        with open(os.path.join(args.record, "peers-2d.json"), "w") as f:
            json.dump(meta, f, indent=1)
    if args.record and {"catalogue", "box", "sky"} <= set(cases):
        import Corrfunc
        meta = {"made_by": f"bench/xi-peers.py --seed {seed} --n {args.n} --record {args.record}",
                "corrfunc": Corrfunc.__version__, "treecorr": treecorr.__version__,
                "catalogue": rec_c, "box": rec_b, "sky": rec_s}
        with open(os.path.join(args.record, "peers.json"), "w") as f:
            json.dump(meta, f, indent=1)
        print(f"recorded in {args.record}")
    print("PASS" if ok_c and ok_b else "FAIL")
    sys.exit(0 if ok_c and ok_b else 1)


if __name__ == "__main__":
    main()
