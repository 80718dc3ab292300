"""Every function of the package gives the command line's numbers on the same points."""

import csv

import numpy as np
import pytest

import twobs
from conftest import ROOT


def test_a_histogram_equals_twobs_run(cli, rng, cpu):
    points = rng.random((3000, 3), dtype=np.float32)
    report = cli.report("sdh", "--input", cli.npy("p", points), "--param", "bins=37", "--param", "r_max=0.9")
    result = cpu.run("sdh", points, params={"bins": 37, "r_max": 0.9})
    assert result.kind == "histogram"
    assert result.counts.dtype == np.uint64
    np.testing.assert_array_equal(result.counts, report["result"]["counts"])
    np.testing.assert_array_equal(result.edges, report["result"]["edges"])


def test_a_two_set_histogram_with_weights_equals_twobs_run(cli, rng, cpu):
    a, b = rng.random((1500, 3), dtype=np.float32), rng.random((1100, 3), dtype=np.float32)
    wa, wb = rng.random(1500), rng.random(1100)
    report = cli.report("sdh", "--input", cli.npy("a", a), "--input", cli.npy("b", b),
                        "--weights", cli.npy("wa", wa), "--weights", cli.npy("wb", wb), "--param", "bins=20")
    result = cpu.run("sdh", a, b, params={"bins": 20}, weights=[wa, wb])
    np.testing.assert_array_equal(result.sums, report["result"]["sums"])


def test_layouts_and_types_of_numpy_arrays_give_the_same_counts(rng, cpu):
    points = rng.random((2000, 3), dtype=np.float32)
    want = cpu.run("sdh", points, params={"bins": 16}).counts
    fortran = np.asfortranarray(points)
    strided = np.repeat(points, 2, axis=1)[:, ::2]  # a view whose rows are 24 bytes apart
    by_field = {"x": points[:, 0], "y": points[:, 1], "z": points[:, 2]}
    for same in (fortran, strided, points.astype(np.float64), list(points), by_field):
        np.testing.assert_array_equal(cpu.run("sdh", same, params={"bins": 16}).counts, want)


def test_rdf_counts_and_g_of_r_equal_twobs_run(cli, rng, cpu):
    box = (2.0, 2.5, 3.0)
    points = (rng.random((4000, 3)) * box).astype(np.float32)
    report = cli.report("rdf", "--input", cli.npy("p", points), "--param", "box=2,2.5,3",
                        "--param", "r_max=0.9", "--param", "bins=45")
    rdf = twobs.RDF(45, 0.9, normalization_mode="finite_size", session=cpu).compute(box, points)
    # freud counts each pair from both ends; the command line counts it once.
    np.testing.assert_array_equal(rdf.bin_counts, 2 * np.asarray(report["result"]["counts"], dtype=np.uint64))
    np.testing.assert_allclose(rdf.rdf, report["result"]["g_r"], rtol=1e-12)
    exact = twobs.RDF(45, 0.9, session=cpu).compute((box, points))
    n = len(points)
    np.testing.assert_allclose(exact.rdf, rdf.rdf * (n - 1) / n, rtol=1e-12)


def test_rdf_adds_frames_each_with_its_own_box(rng, cpu):
    rdf = twobs.RDF(30, 0.6, session=cpu)
    total = np.zeros(30, dtype=np.uint64)
    density = 0.0
    for frame, side in enumerate((2.0, 2.1, 1.9)):
        points = (rng.random((1500, 3)) * side).astype(np.float32)
        rdf.compute(side, points, reset=frame == 0)
        total += 2 * cpu.run("rdf", points, params={"bins": 30, "r_max": 0.6, "box": side}).counts
        # The box the engine counts in: its lengths in f32, as the kernel reads them.
        density += 1500 * 1500 / float(np.float32(side)) ** 3
    assert rdf.frames == 3
    np.testing.assert_array_equal(rdf.bin_counts, total)
    e = rdf.bin_edges
    np.testing.assert_allclose(rdf.rdf, total / (density * 4 / 3 * np.pi * (e[1:] ** 3 - e[:-1] ** 3)), rtol=1e-12)


def test_xi_equals_twobs_xi(cli, rng, cpu):
    data = np.clip(rng.normal(0.5, 0.15, (2500, 3)), 0, 1).astype(np.float32)
    randoms = rng.random((4000, 3), dtype=np.float32)
    out = cli.folder / "xi.csv"
    cli.run("xi", "--data", cli.npy("d", data), "--randoms", cli.npy("r", randoms), "--backend", "cpu",
            "--param", "bins=12", "--param", "r_min=0.01", "--param", "r_max=0.3", "--log-bins", "--out", str(out))
    rows = list(csv.DictReader(out.open()))
    edges = np.geomspace(0.01, 0.3, 13)
    got = twobs.xi(data, randoms, edges, session=cpu)
    for column in ("dd", "dr", "rr"):
        np.testing.assert_array_equal(got[column], [float(r[column]) for r in rows])
    np.testing.assert_allclose(got["xi"], [float(r["xi"]) for r in rows], rtol=1e-12, equal_nan=True)


def test_query_pairs_equals_twobs_run_selfjoin(cli, rng, cpu):
    points = rng.random((5000, 3), dtype=np.float32)
    out = cli.folder / "pairs.npy"
    cli.run("run", "selfjoin", "--input", cli.npy("p", points), "--param", "eps=0.03", "--backend", "cpu",
            "--quiet", "--sorted", "--out", str(out))
    pairs = twobs.query_pairs(points, 0.03, session=cpu)
    assert pairs.dtype == np.int32 and pairs.shape[1] == 2
    assert (pairs[:, 0] < pairs[:, 1]).all()
    np.testing.assert_array_equal(pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))], np.load(out))


def test_knn_equals_twobs_run_knn(cli, rng, cpu):
    points = rng.random((3000, 3), dtype=np.float32)
    queries = rng.random((700, 3), dtype=np.float32)
    out = cli.folder / "knn.npy"
    cli.run("run", "knn", "--input", cli.npy("q", queries), "--input", cli.npy("p", points), "--param", "k=6",
            "--backend", "cpu", "--quiet", "--out", str(out))
    dist, idx = twobs.knn(points, 6, query=queries, session=cpu)
    np.testing.assert_array_equal(idx, np.load(out))
    np.testing.assert_array_equal(dist, np.load(cli.folder / "knn_values.npy"))
    assert dist.dtype == np.float32 and (np.diff(dist, axis=1) >= 0).all()


def test_short_knn_lists_are_counted_over_every_chunk_and_filled(rng, cpu):
    # 9000 queries (three of the count's chunks of 4096 lists) among 5 points: every list of 8 is short.
    points = rng.random((5, 3), dtype=np.float32)
    queries = rng.random((9000, 3), dtype=np.float32)
    result = cpu.run("knn", queries, points, params={"k": 8})
    assert result.missing == 9000
    dist, idx = twobs.knn(points, 8, query=queries, session=cpu)
    assert (idx[:, 5:] == 5).all() and np.isinf(dist[:, 5:]).all()
    assert np.isfinite(dist[:, :5]).all() and (np.sort(idx[:, :5], axis=1) == np.arange(5)).all()
    assert cpu.run("knn", queries, points, params={"k": 5}).missing == 0


def test_a_spec_given_as_text_runs_as_its_file_does(cli, rng, cpu):
    folder = ROOT / "examples" / "manhattan"
    spec, snippet = (folder / "manhattan.xml").read_text(), (folder / "manhattan.cu").read_text()
    points = rng.random((2000, 4), dtype=np.float32)
    report = cli.report(str(folder / "manhattan.xml"), "--input", cli.npy("p", points))
    from_text = twobs.Problem(spec, snippet=snippet)
    from_file = twobs.Problem(str(folder / "manhattan.xml"))
    assert from_text.name == from_file.name == "manhattan"
    np.testing.assert_array_equal(from_text.run(points, session=cpu).counts, report["result"]["counts"])
    np.testing.assert_array_equal(from_file.run(points, session=cpu).counts, report["result"]["counts"])


@pytest.mark.parametrize("name", twobs.BUILT_IN)
def test_every_built_in_loads_and_names_its_parameters(name):
    problem = twobs.Problem(name)
    assert problem.name == name
    assert all(len(p) == 4 for p in problem.params)


def test_a_record_element_takes_its_columns_and_joins_as_twobs_run(cli, rng, cpu):
    a = rng.integers(-1000, 1000, 3000, dtype=np.int32)
    b = rng.integers(-1000, 1000, 2000, dtype=np.int32)
    out = cli.folder / "band.npy"
    cli.run("run", "nlj", "--input", cli.npy("a", a.reshape(-1, 1)), "--input", cli.npy("b", b.reshape(-1, 1)),
            "--param", "d=3", "--backend", "cpu", "--quiet", "--sorted", "--out", str(out))
    pairs = cpu.run("nlj", {"key": a}, {"key": b}, params={"d": 3}).pairs
    np.testing.assert_array_equal(pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))], np.load(out))
    # The same keys as a 2-D array of one column.
    same = cpu.run("nlj", a.reshape(-1, 1), b.reshape(-1, 1), params={"d": 3}).pairs
    assert len(same) == len(pairs)


def test_f32_overflowing_points_are_refused_with_the_way_out(cpu):
    points = np.array([[0, 0, 0], [3e19, 0, 0], [1, 1, 1]], dtype=np.float32)
    with pytest.raises(twobs.InputError, match="past f32's largest number"):
        twobs.Session(backend="cpu").run(twobs.Problem(
            '<problem name="own"><summary>s</summary><input sets="1" type="f32" dims="3"/>'
            '<function file="f.cu" name="f" symmetric="true"/><output kind="sum"/></problem>',
            snippet="__device__ float f(const Point& a, const Point& b) { float d = coord(a, 0) - coord(b, 0); return d * d; }"),
            points)
    # A built-in's snippet moves to f64 on the CPU backend, as the command line does, and says so.
    result = cpu.run("sdh", points, params={"bins": 4, "r_max": 1e20})
    assert int(result.counts.sum()) == 3
    assert any("f64" in note for note in result.report["notes"])


def test_squared_and_periodic_xi_equal_twobs_xi(cli, rng, cpu):
    data = rng.random((1500, 3), dtype=np.float32)
    randoms = rng.random((2500, 3), dtype=np.float32)
    edges = np.linspace(0.05, 0.25, 9)
    out = cli.folder / "xi.csv"
    cli.run("xi", "--data", cli.npy("d", data), "--randoms", cli.npy("r", randoms), "--backend", "cpu",
            "--norm", "squared", "--param", "bins=8", "--param", "r_min=0.05", "--param", "r_max=0.25",
            "--out", str(out))
    rows = list(csv.DictReader(out.open()))
    got = twobs.xi(data, randoms, edges, norm="squared", session=cpu)
    np.testing.assert_allclose(got["xi"], [float(r["xi"]) for r in rows], rtol=1e-12)
    pairs = twobs.xi(data, randoms, edges, session=cpu)
    assert np.all(np.abs(pairs["xi"] - got["xi"]) > 1e-6), "the two norms differ"
    side = 2.0
    points = (rng.random((1500, 3)) * side).astype(np.float32) % np.float32(side)
    cli.run("xi", "--data", cli.npy("b", points), "--box", str(side), "--backend", "cpu", "--param", "bins=8",
            "--param", "r_min=0.05", "--param", "r_max=0.25", "--out", str(out))
    rows = list(csv.DictReader(out.open()))
    got = twobs.xi(points, None, edges, boxsize=side, session=cpu)
    assert got["dr"] is None
    np.testing.assert_array_equal(got["dd"], [float(r["dd"]) for r in rows])
    for column in ("rr", "xi"):
        np.testing.assert_allclose(got[column], [float(r[column]) for r in rows], rtol=1e-12)


def test_radec_w_theta_equals_twobs_xi_radec(cli, rng, cpu):
    def sky(n):
        return np.column_stack([rng.uniform(0, 60, n), np.degrees(np.arcsin(rng.uniform(-0.5, 0.5, n)))])
    data, randoms = sky(700), sky(1100)
    out = cli.folder / "w.csv"
    cli.run("xi", "--radec", "--data", cli.npy("d", data), "--randoms", cli.npy("r", randoms), "--backend", "cpu",
            "--param", "bins=8", "--param", "theta_min=0.5", "--param", "theta_max=16", "--log-bins",
            "--out", str(out))
    rows = list(csv.DictReader(out.open()))
    got = twobs.xi(data, randoms, np.geomspace(0.5, 16, 9), radec=True, session=cpu)
    for column in ("dd", "dr", "rr"):
        np.testing.assert_array_equal(got[column], [float(r[column]) for r in rows])
    np.testing.assert_allclose(got["xi"], [float(r["xi"]) for r in rows], rtol=1e-12, equal_nan=True)
    bad = data.copy()
    bad[3, 1] = -91.0
    with pytest.raises(twobs.InputError, match=r"row 4: RA .*, Dec -91(\.0)? is not a point on the sky"):
        twobs.xi(bad, randoms, np.geomspace(0.5, 16, 9), radec=True, session=cpu)


def test_ddrppi_ddsmu_and_wp_equal_twobs_run_and_xi(cli, rng, cpu):
    """Corrfunc's shapes of the 2-D counts: cells as `twobs run` counts them (both
    orders with autocorr=1), and wp as `twobs xi --rp-pi --wp` gives it."""
    side = 32.0
    points = (rng.random((1500, 3)) * side).astype(np.float32)
    others = (rng.random((900, 3)) * side).astype(np.float32)
    rp = np.linspace(1.0, 6.0, 6)
    out = cli.folder / "cells.csv"
    cli.run("run", "ddrppi", "--input", cli.npy("p", points), "--backend", "cpu", "--quiet", "--param", "rp_bins=5",
            "--param", "rp_min=1", "--param", "rp_max=6", "--param", "pi_max=4", "--param", "pi_bins=4",
            "--out", str(out))
    rows = list(csv.DictReader(out.open()))
    got = twobs.DDrppi(1, 2, 4, rp, points[:, 0], points[:, 1], points[:, 2], periodic=False, session=cpu)
    assert got.dtype.names == ("rmin", "rmax", "rpavg", "pimax", "npairs", "weightavg")
    np.testing.assert_array_equal(got["npairs"], [2 * int(r["count"]) for r in rows])
    np.testing.assert_array_equal(got["pimax"], [float(r["pi_hi"]) for r in rows])
    np.testing.assert_array_equal(got["rmin"], [float(r["rp_lo"]) for r in rows])
    assert got["npairs"].sum() > 1000
    # Two sets in a periodic box, and (s, mu).
    cli.run("run", "ddsmu", "--input", cli.npy("p", points), "--input", cli.npy("q", others), "--backend", "cpu",
            "--quiet", "--param", "s_bins=5", "--param", "s_min=1", "--param", "s_max=6", "--param", "mu_bins=4",
            "--param", f"box={side}", "--out", str(out))
    rows = list(csv.DictReader(out.open()))
    got = twobs.DDsmu(0, 2, rp, 1.0, 4, points[:, 0], points[:, 1], points[:, 2], X2=others[:, 0], Y2=others[:, 1],
                      Z2=others[:, 2], boxsize=side, session=cpu)
    assert got.dtype.names == ("smin", "smax", "savg", "mu_max", "npairs", "weightavg")
    np.testing.assert_array_equal(got["npairs"], [int(r["count"]) for r in rows])
    np.testing.assert_array_equal(got["mu_max"], np.tile([0.25, 0.5, 0.75, 1.0], 5))
    result = twobs.Problem("ddrppi").run(points, params={"rp_bins": 5, "rp_max": 6, "pi_bins": 4, "pi_max": 4},
                                         session=cpu)
    assert result.counts.shape == (5, 4) and result.axes == ["rp", "pi"] and len(result.edges) == 2
    # wp against the command line's, from randoms.
    randoms = (rng.random((2000, 3)) * side).astype(np.float32)
    wp_out = cli.folder / "wp.csv"
    cli.run("xi", "--data", cli.npy("d", points), "--randoms", cli.npy("r", randoms), "--backend", "cpu", "--quiet",
            "--rp-pi", "4", "--param", "rp_bins=5", "--param", "rp_min=1", "--param", "rp_max=6", "--out", str(out),
            "--wp", str(wp_out))
    cells = list(csv.DictReader(out.open()))
    wp = list(csv.DictReader(wp_out.open()))
    got = twobs.wp(points, randoms, rp, 4, session=cpu)
    for column in ("dd", "dr", "rr"):
        np.testing.assert_array_equal(got[column].ravel(), [float(r[column]) for r in cells])
    np.testing.assert_allclose(got["wp"], [float(r["wp"]) for r in wp], rtol=1e-12)
