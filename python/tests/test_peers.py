"""The shapes users know: scipy's neighbours, freud's g(r) normalisation, Corrfunc's pair counts."""

import numpy as np
import pytest

import twobs
from conftest import ROOT

scipy_spatial = pytest.importorskip("scipy.spatial")


def test_knn_is_what_ckdtree_query_returns_without_the_point_itself(rng, cpu):
    points = rng.random((4000, 3), dtype=np.float32)
    dist, idx = twobs.knn(points, 8, session=cpu)
    tree = scipy_spatial.cKDTree(points.astype(np.float64))
    d_ref, i_ref = tree.query(points.astype(np.float64), 9)
    # scipy finds the point itself first, at 0; twobs never pairs a point with itself.
    assert (i_ref[:, 0] == np.arange(len(points))).all()
    np.testing.assert_allclose(dist, d_ref[:, 1:], rtol=2e-6, atol=1e-7)
    # Ties and float32 rounding may swap neighbours at equal distance; no other difference.
    differ = idx != i_ref[:, 1:]
    assert np.all(np.isclose(dist[differ], d_ref[:, 1:][differ], rtol=2e-6)), "only near-ties may differ"


def test_knn_pads_as_scipy_does_where_too_few_points(cpu):
    points = np.array([[0, 0, 0], [1, 0, 0], [0, 2, 0]], dtype=np.float32)
    dist, idx = twobs.knn(points, 4, session=cpu)
    assert idx.shape == (3, 4)
    np.testing.assert_array_equal(idx[:, 2:], 3)
    assert np.isinf(dist[:, 2:]).all()
    np.testing.assert_array_equal(idx[0, :2], [1, 2])


def test_query_pairs_equals_ckdtree_up_to_pairs_on_float32_edges(rng, cpu):
    points = rng.random((6000, 3), dtype=np.float32)
    eps = 0.02
    got = {tuple(p) for p in twobs.query_pairs(points, eps, session=cpu)}
    want = scipy_spatial.cKDTree(points.astype(np.float64)).query_pairs(eps)
    differ = got ^ want
    d = np.array([np.linalg.norm(points[i].astype(np.float64) - points[j]) for i, j in differ]).reshape(-1)
    print(f"{len(got)} pairs; {len(differ)} differ, all within 1e-6 of eps")
    assert np.all(np.abs(d - eps) < 1e-6)


def test_dd_counts_as_corrfunc_counts_them(rng, cpu):
    points = rng.random((2000, 3), dtype=np.float32)
    edges = np.linspace(0.0, 0.2, 9)
    x, y, z = points.T
    dd = twobs.DD(1, 2, edges, x, y, z, periodic=False, session=cpu)
    assert dd.dtype.names == ("rmin", "rmax", "ravg", "npairs", "weightavg")
    once = cpu.run("sdh", points, params={"bins": 8, "r_min": 0.0, "r_max": 0.2}).counts
    want = 2 * once
    want[0] += len(points)  # each point with itself, in the bucket from 0
    np.testing.assert_array_equal(dd["npairs"], want)
    np.testing.assert_array_equal(dd["rmin"], edges[:-1])


def test_periodic_dd_from_zero_counts_the_minimum_image_pairs_as_rdf_does(rng, cpu):
    points = (rng.random((2500, 3)) * 3.0).astype(np.float32)
    edges = np.linspace(0.0, 1.2, 13)
    dd = twobs.DD(0, 2, edges, *points[:1200].T, X2=points[1200:, 0], Y2=points[1200:, 1], Z2=points[1200:, 2],
                  periodic=True, boxsize=3.0, session=cpu)
    rdf = cpu.run("rdf", points[:1200], points[1200:], params={"bins": 12, "r_max": 1.2, "box": 3.0}).counts
    np.testing.assert_array_equal(dd["npairs"], rdf)


def test_log_binned_weighted_dd_averages_the_weight_products(rng, cpu):
    points = rng.random((1500, 3), dtype=np.float32)
    w = rng.random(1500)
    edges = np.geomspace(0.01, 0.3, 7)
    dd = twobs.DD(1, 2, edges, *points.T, weights1=w, periodic=False, weight_type="pair_product", session=cpu)
    sums = cpu.run("sdh", points, params={"bins": 6, "r_min": 0.01, "r_max": 0.3}, weights=[w], log_bins=True).sums
    np.testing.assert_allclose(dd["weightavg"] * dd["npairs"], 2 * sums, rtol=1e-12)
    np.testing.assert_allclose(dd["rmax"], edges[1:], rtol=1e-12)


def test_bins_twobs_cannot_hold_are_refused_with_the_reason(cpu):
    with pytest.raises(twobs.InputError, match="evenly spaced or log-evenly"):
        twobs.DD(1, 1, [0.0, 0.1, 0.15, 0.4], *np.ones((3, 10), dtype=np.float32), periodic=False, session=cpu)


def test_dd_output_ravg_equals_corrfuncs_recorded_ravg(cpu):
    """Corrfunc's ravg (bench/corrfunc-ravg.py --record tests/peers/ravg.json):
    the mean separation of each bucket's pairs, each point with itself at 0
    in a bucket that starts at 0, to 1e-5 relative; the counts equal up to
    pairs within f32 rounding of an edge."""
    import importlib.util
    import json

    recorded = json.loads((ROOT / "tests" / "peers" / "ravg.json").read_text())
    spec = importlib.util.spec_from_file_location("corrfunc_ravg", ROOT / "bench" / "corrfunc-ravg.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    for case in recorded["cases"]:
        x, y, z = bench.points(case["n"], case["seed"], "clustered" in case["name"]).T
        box = case["box"]
        got = twobs.DD(1, 2, np.asarray(case["edges"]), x, y, z, periodic=box is not None, boxsize=box,
                       output_ravg=True, session=cpu)
        npairs = np.asarray(case["npairs"])
        moved = np.abs(got["npairs"].astype(np.int64) - npairs).sum()
        assert moved <= 1e-5 * npairs.sum(), (case["name"], moved)
        np.testing.assert_allclose(got["ravg"], case["ravg"], rtol=1e-5, err_msg=case["name"])
        assert got["ravg"].max() > 0


def test_savg_and_rpavg_equal_corrfuncs_recorded_averages(cpu):
    """Corrfunc's DDsmu savg and DDrppi rpavg (bench/corrfunc-ravg.py --record
    tests/peers/ravg.json, its "cells"): each cell's mean separation to 1e-5
    relative, in f64 as Corrfunc counts these points (in f32 a pair within
    rounding of an edge moves, and a cell of a thousand pairs moves its mean
    by 1e-4), the counts equal up to pairs at an edge."""
    import importlib.util
    import json

    recorded = json.loads((ROOT / "tests" / "peers" / "ravg.json").read_text())
    spec = importlib.util.spec_from_file_location("corrfunc_ravg", ROOT / "bench" / "corrfunc-ravg.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    for case in recorded["cells"]:
        x, y, z = (100.0 * bench.points(case["n"], case["seed"], "clustered" in case["name"])).T
        box, edges = case["box"], np.asarray(case["edges"])
        kw = dict(periodic=box is not None, boxsize=box, f64=True, session=cpu)
        if case["kind"] == "smu":
            mu_max, mu_bins = case["second"]
            got = twobs.DDsmu(1, 2, edges, mu_max, mu_bins, x, y, z, output_savg=True, **kw)
            average = got["savg"]
        else:
            got = twobs.DDrppi(1, 2, float(case["second"]), edges, x, y, z, output_rpavg=True, **kw)
            average = got["rpavg"]
        npairs = np.asarray(case["npairs"])
        moved = np.abs(got["npairs"].astype(np.int64) - npairs).sum()
        print(case["name"], "pairs apart", moved, "of", npairs.sum())
        assert moved <= 1e-6 * npairs.sum(), (case["name"], moved)
        np.testing.assert_allclose(average, case["average"], rtol=1e-5, err_msg=case["name"])
        assert average.max() > 0
