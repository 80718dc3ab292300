"""twobs.mda.InterRDF beside MDAnalysis's own InterRDF on MDAnalysis's test
trajectories (issue 50): bins, counts and g(r), with and without an
exclusion block, boxless (adenylate kinase's PSF/DCD) and periodic (its
solvated TPR/XTC). MDAnalysis and MDAnalysisTests are test dependencies
(scripts/test-python.sh installs them)."""

import warnings

import numpy as np
import pytest

import twobs
import twobs.mda

mda = pytest.importorskip("MDAnalysis")
datafiles = pytest.importorskip("MDAnalysisTests.datafiles")
from MDAnalysis.analysis.rdf import InterRDF  # noqa: E402


@pytest.fixture(autouse=True)
def quiet_mdanalysis():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def compare(theirs, mine, what):
    np.testing.assert_allclose(mine.results.bins, theirs.results.bins, rtol=1e-12, err_msg=what)
    np.testing.assert_allclose(mine.results.edges, theirs.results.edges, rtol=1e-12, err_msg=what)
    np.testing.assert_array_equal(mine.results.count, theirs.results.count, err_msg=what)
    np.testing.assert_allclose(mine.results.rdf, theirs.results.rdf, rtol=1e-12, err_msg=what)
    assert theirs.results.count.sum() > 100, what


def test_interrdf_equals_mdanalysis_on_adenylate_kinase_without_a_box(cpu):
    u = mda.Universe(datafiles.PSF, datafiles.DCD)
    ca = u.select_atoms("name CA")
    other = u.select_atoms("resname LYS and name NZ")
    for g1, g2, kw in [(ca, ca, dict(norm="density")), (ca, other, dict(norm="none", range=(2.0, 20.0), nbins=36)),
                       (ca, ca, dict(norm="density", exclusion_block=(1, 1)))]:
        what = f"{len(g1)} x {len(g2)} {kw}"
        theirs = InterRDF(g1, g2, **kw).run(step=7)
        mine = twobs.mda.InterRDF(g1, g2, f64=True, session=cpu, **kw).run(step=7)
        assert mine.n_frames == theirs.n_frames
        compare(theirs, mine, what)


def test_interrdf_equals_mdanalysis_in_a_periodic_box_up_to_pairs_on_an_edge(cpu):
    """A solvated adenylate kinase in a triclinic box (60, 60, 90 degrees):
    MDAnalysis's minimum images are its own arithmetic, twobs's are exact in
    f64 from the wrapped points; the pairs they count apart lie within
    rounding of a bucket's edge, a few in 10^5."""
    u = mda.Universe(datafiles.TPR, datafiles.XTC)
    water = u.select_atoms("resname SOL and resid 1000:1600")
    oxygens = water.select_atoms("name OW")
    for g1, g2, kw in [(oxygens, oxygens, dict(nbins=60, range=(0.0, 9.0))),
                       (oxygens, oxygens, dict(nbins=60, range=(0.0, 9.0), exclusion_block=(1, 1))),
                       (water, water, dict(nbins=50, range=(0.0, 6.0), exclusion_block=(3, 3)))]:
        what = f"{len(g1)} x {len(g2)} {kw}"
        theirs = InterRDF(g1, g2, **kw).run(frames=[0, 7])
        for f64 in (True, False):
            mine = twobs.mda.InterRDF(g1, g2, f64=f64, session=cpu, **kw).run(frames=[0, 7])
            np.testing.assert_allclose(mine.results.bins, theirs.results.bins, rtol=1e-12, err_msg=what)
            moved = np.abs(mine.results.count - theirs.results.count).sum()
            total = theirs.results.count.sum()
            print(what, "f64" if f64 else "f32", "pairs apart", moved, "of", total)
            assert total > 1000 and moved <= 2e-5 * total, (what, f64, moved, total)
            np.testing.assert_allclose(mine.results.rdf, theirs.results.rdf, rtol=2e-3, atol=1e-9, err_msg=what)


def test_interrdf_s_equals_mdanalysis_per_atom_pair(cpu):
    """Site-specific g(r), each atom pair's own row: equal to MDAnalysis's
    InterRDF_s (count, rdf, cdf) without a box, pair for pair; in the
    solvated triclinic box up to pairs within rounding of an edge."""
    from MDAnalysis.analysis.rdf import InterRDF_s

    u = mda.Universe(datafiles.PSF, datafiles.DCD)
    ags = [[u.select_atoms("resname LYS and name NZ"), u.select_atoms("resname GLU and name OE1")],
           [u.atoms[:6], u.atoms[:6]]]
    # From r = 0: MDAnalysis (2.8 on) truncates a bucket index toward zero, so that its first bucket also takes
    # the pairs just below a range that starts above 0; twobs counts [r_min, r_max) as InterRDF does.
    for kw in [dict(norm="none"), dict(norm="density", nbins=40, range=(0.0, 25.0))]:
        theirs = InterRDF_s(u, ags, **kw).run(step=9)
        mine = twobs.mda.InterRDF_s(u, ags, session=cpu, **kw).run(step=9)
        np.testing.assert_allclose(mine.results.edges, theirs.results.edges, rtol=1e-12)
        for i, (c_mine, c_theirs) in enumerate(zip(mine.results.count, theirs.results.count)):
            assert c_mine.shape == c_theirs.shape and c_theirs.sum() > 50, (kw, i)
            np.testing.assert_array_equal(c_mine, c_theirs, err_msg=f"{kw} group pair {i}")
            np.testing.assert_allclose(mine.results.rdf[i], theirs.results.rdf[i], rtol=1e-12, err_msg=f"{kw} {i}")
        for a, b in zip(mine.get_cdf(), theirs.get_cdf()):
            np.testing.assert_allclose(a, b, rtol=1e-12)
    periodic = mda.Universe(datafiles.TPR, datafiles.XTC)
    oxygens = periodic.select_atoms("resname SOL and name OW and resid 1000:1600")
    ags = [[oxygens[:30], oxygens]]
    theirs = InterRDF_s(periodic, ags, nbins=40, range=(0.0, 12.0)).run(frames=[0, 5])
    mine = twobs.mda.InterRDF_s(periodic, ags, nbins=40, range=(0.0, 12.0), session=cpu).run(frames=[0, 5])
    moved = np.abs(mine.results.count[0] - theirs.results.count[0]).sum()
    total = theirs.results.count[0].sum()
    print("InterRDF_s in the triclinic box: pairs apart", moved, "of", total)
    assert total > 500 and moved <= 2e-4 * total, (moved, total)
    np.testing.assert_allclose(mine.results.rdf[0], theirs.results.rdf[0], rtol=1e-3, atol=1e-6)
    with pytest.raises(twobs.InputError, match="at most 2"):
        twobs.mda.InterRDF_s(periodic, [[periodic.atoms[:5000], periodic.atoms[:5000]]], session=cpu)
