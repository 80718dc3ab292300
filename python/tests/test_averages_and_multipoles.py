"""Corrfunc's averages of 2-D cells (savg, rpavg) and the multipoles of
xi(s, mu), each against a brute-force numpy computation on fresh points."""

import numpy as np
import pytest

import twobs


def _separations(points):
    """Each unordered pair's (dx, dy, dz) in f64."""
    i, j = np.triu_indices(len(points), k=1)
    return points[i] - points[j]


def _cells_of(first, second, first_edges, second_edges):
    """Each pair's cell (first outer) or -1 outside, as half-open buckets."""
    a = np.searchsorted(first_edges, first, side="right") - 1
    b = np.searchsorted(second_edges, second, side="right") - 1
    inside = (a >= 0) & (a < len(first_edges) - 1) & (b >= 0) & (b < len(second_edges) - 1)
    return np.where(inside, a * (len(second_edges) - 1) + b, -1)


@pytest.mark.parametrize("kind", ["ddsmu", "ddrppi"])
def test_savg_and_rpavg_are_each_cells_mean_separation(rng, cpu, kind):
    points = rng.random((700, 3))
    d = _separations(points)
    edges = np.geomspace(0.01, 0.3, 9)
    if kind == "ddsmu":
        s = np.sqrt((d * d).sum(axis=1))
        first, second = s, np.abs(d[:, 2]) / s
        second_edges = np.linspace(0.0, 1.0, 6)
        got = twobs.DDsmu(1, 1, edges, 1.0, 5, *points.T, periodic=False, output_savg=True, f64=True, session=cpu)
        average = "savg"
    else:
        first, second = np.sqrt(d[:, 0] ** 2 + d[:, 1] ** 2), np.abs(d[:, 2])
        second_edges = np.linspace(0.0, 0.25, 6)
        got = twobs.DDrppi(1, 1, 0.25, edges, *points.T, periodic=False, output_rpavg=True, npibins=5, f64=True,
                           session=cpu)
        average = "rpavg"
    cell = _cells_of(first, second, edges, second_edges)
    cells = (len(edges) - 1) * (len(second_edges) - 1)
    counts = np.bincount(cell[cell >= 0], minlength=cells)
    sums = np.bincount(cell[cell >= 0], weights=first[cell >= 0], minlength=cells)
    np.testing.assert_array_equal(got["npairs"], 2 * counts, err_msg="autocorr: each pair in both orders")
    expected = np.divide(sums, counts, out=np.zeros(cells), where=counts > 0)
    np.testing.assert_allclose(got[average], expected, rtol=1e-12, atol=0)
    assert (got[average] > 0).sum() > cells // 2
    plain = (twobs.DDsmu(1, 1, edges, 1.0, 5, *points.T, periodic=False, f64=True, session=cpu) if kind == "ddsmu"
             else twobs.DDrppi(1, 1, 0.25, edges, *points.T, periodic=False, npibins=5, f64=True, session=cpu))
    assert not plain[average].any(), "without output_*avg the column stays 0, as Corrfunc's"


def test_savg_counts_each_point_with_itself_at_zero_from_s_zero(rng, cpu):
    points = rng.random((300, 3))
    got = twobs.DDsmu(1, 1, np.linspace(0.0, 0.2, 5), 1.0, 4, *points.T, periodic=False, output_savg=True,
                      f64=True, session=cpu)
    d = _separations(points)
    s = np.sqrt((d * d).sum(axis=1))
    first_cell = (s < 0.05) & (np.abs(d[:, 2]) / s < 0.25)
    assert got["npairs"][0] == 2 * first_cell.sum() + len(points)
    np.testing.assert_allclose(got["savg"][0], 2 * s[first_cell].sum() / got["npairs"][0], rtol=1e-12)


def test_a_pair_weight_the_histogram_cannot_take_is_refused(cpu):
    points = np.random.default_rng(5).random((50, 3)).astype(np.float32)
    with pytest.raises(twobs.Error, match="axes are `s` and `mu`, not `r`"):
        cpu.run("ddsmu", points, pair_weight="r")
    with pytest.raises(twobs.Error, match="knn"):
        cpu.run("knn", points, pair_weight="distance")


def _legendre_integral(ell, lo, hi):
    antiderivative = np.polynomial.legendre.Legendre.basis(ell).integ()
    return antiderivative(hi) - antiderivative(lo)


def test_multipoles_are_the_legendre_sums_of_xi_s_mu_and_dd_is_the_brute_force_count(rng, cpu):
    data, randoms = rng.random((800, 3)), rng.random((1600, 3))
    s_edges = np.linspace(0.02, 0.2, 7)
    out = twobs.xi_smu(data, randoms, s_edges, 8, f64=True, session=cpu)
    assert out["xi"].shape == (6, 8) and out["multipoles"].shape == (3, 6)
    assert list(out["ells"]) == [0, 2, 4]
    mu = out["mu_edges"]
    np.testing.assert_allclose(mu, np.linspace(0, 1, 9), rtol=1e-15)
    for row, ell in enumerate(out["ells"]):
        weights = np.array([_legendre_integral(ell, a, b) for a, b in zip(mu[:-1], mu[1:])])
        expected = (2 * ell + 1) * out["xi"] @ weights
        np.testing.assert_allclose(out["multipoles"][row], expected, rtol=1e-12, atol=1e-14)
    d = _separations(data)
    s = np.sqrt((d * d).sum(axis=1))
    cell = _cells_of(s, np.abs(d[:, 2]) / s, s_edges, mu)
    dd = np.bincount(cell[cell >= 0], minlength=48).reshape(6, 8)
    np.testing.assert_array_equal(out["dd"], dd)


def test_multipoles_with_patches_have_jackknife_errors(rng, cpu):
    data, randoms = rng.random((600, 3)), rng.random((1200, 3))
    patches = ((data[:, 0] * 4).astype(np.uint32), (randoms[:, 0] * 4).astype(np.uint32))
    out = twobs.xi_smu(data, randoms, np.linspace(0.02, 0.2, 5), 4, ells=(0, 2), patches=patches, session=cpu)
    assert out["multipoles_cov"].shape == (8, 8)
    np.testing.assert_allclose(out["multipoles_err"].ravel(), np.sqrt(np.diag(out["multipoles_cov"])), rtol=1e-15)
    assert (out["multipoles_err"] > 0).all()


def test_multipoles_need_s_mu_cells(rng, cpu):
    with pytest.raises(twobs.InputError, match="multipoles are of xi"):
        twobs._twobs.xi(cpu._native, rng.random((10, 3)), rng.random((10, 3)), [0.1, 0.2], ells=[0])
