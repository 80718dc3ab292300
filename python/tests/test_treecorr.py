"""The jackknife from Python beside TreeCorr's (var_method="jackknife") on the
same patches: xi and its covariance to 1e-10."""

import numpy as np
import treecorr

import twobs


def _catalogue(points, patches):
    return treecorr.Catalog(x=points[:, 0], y=points[:, 1], z=points[:, 2], patch=patches)


def test_jackknife_covariance_equals_treecorrs_on_twobs_kmeans_patches(rng, cpu):
    data, randoms = rng.random((1200, 3)), rng.random((2400, 3))
    lo, hi, nbins = 0.02, 0.25, 6
    out = twobs.xi(data, randoms, np.geomspace(lo, hi, nbins + 1), norm="squared", patches=5, f64=True,
                   session=cpu)
    data_patches, random_patches = out["patches"]
    assert sorted(set(data_patches)) == list(range(5)) and sorted(set(random_patches)) == list(range(5))
    # Every pair in its exact bucket (brute force, bin_slop 0), leaving out whole patches ("simple").
    config = dict(min_sep=lo, max_sep=hi, nbins=nbins, bin_slop=0, brute=True, var_method="jackknife")
    if "cross_patch_weight" in treecorr.NNCorrelation._valid_params:
        config["cross_patch_weight"] = "simple"
    d, r = _catalogue(data, data_patches), _catalogue(randoms, random_patches)
    dd, rr, dr = (treecorr.NNCorrelation(**config) for _ in range(3))
    dd.process(d)
    rr.process(r)
    dr.process(d, r)
    xi, _ = dd.calculateXi(rr=rr, dr=dr)
    np.testing.assert_array_equal(out["dd"], dd.npairs)
    np.testing.assert_array_equal(out["dr"], dr.npairs)
    np.testing.assert_allclose(out["xi"], xi, rtol=1e-10)
    np.testing.assert_allclose(out["cov"], dd.cov, rtol=1e-10, atol=1e-10 * np.abs(dd.cov).max())
    np.testing.assert_allclose(out["xi_err"], np.sqrt(np.diag(dd.cov)), rtol=1e-10)


def test_patches_as_a_number_need_three_values_a_point(rng, cpu):
    import pytest

    with pytest.raises(twobs.InputError, match="k-means patches need data and randoms of 3 values"):
        twobs.xi(rng.random((50, 2)) * 10, rng.random((50, 2)) * 10, [1.0, 2.0, 3.0], radec=True, patches=4,
                 session=cpu)
