"""Pairs of one molecule left out, and partial g(r), the same as the command line's."""

import numpy as np
import pytest

import twobs


def waters(rng, molecules, side):
    """Molecules of one O and two H near it, in a periodic cube; types and molecule ids per atom."""
    o = rng.random((molecules, 3)) * side
    h = (o[:, None, :] + rng.normal(0, 0.1, (molecules, 2, 3))) % side
    points = np.concatenate([o[:, None, :], h], axis=1).reshape(-1, 3).astype(np.float32)
    types = np.tile(np.array(["O", "H", "H"]), molecules)
    mol = np.repeat(np.arange(molecules, dtype=np.int32), 3)
    return points, types, mol


def test_excluded_pairs_equal_twobs_run_exclude_same(cli, rng, cpu):
    side = 3.0
    points, types, mol = waters(rng, 400, side)
    o, h = types == "O", types == "H"
    args = ["--param", "box=3", "--param", "r_max=1.2", "--param", "bins=40", "--exclude-same", "molecule"]
    one = cli.report("rdf", "--input", cli.npy("h", points[h]), "--id", "molecule=" + cli.npy("mh", mol[h]), *args)
    two = cli.report("rdf", "--input", cli.npy("o", points[o]), "--input", cli.npy("h2", points[h]),
                     "--id", "molecule=" + cli.npy("mo", mol[o]), "--id", "molecule=" + cli.npy("mh2", mol[h]), *args)
    params = {"box": side, "r_max": 1.2, "bins": 40}
    hh = cpu.run("rdf", points[h], params=params, ids={"molecule": mol[h]}, exclude_same="molecule")
    oh = cpu.run("rdf", points[o], points[h], params=params, ids={"molecule": [mol[o], mol[h]]}, exclude_same="molecule")
    np.testing.assert_array_equal(hh.counts, one["result"]["counts"])
    np.testing.assert_array_equal(oh.counts, two["result"]["counts"])
    # Excluding takes away exactly the pairs within a molecule that lie within r_max.
    every = cpu.run("rdf", points[o], points[h], params=params).counts
    assert every.sum() - oh.counts.sum() == 2 * 400  # each H is within 1.2 of its own O (0.1 spread)

    # RDF.compute with molecules: freud's counts (both ends) of the same pairs, InterRDF's density.
    rdf = twobs.RDF(40, 1.2, normalization_mode="finite_size", session=cpu)
    rdf.compute(side, points[h], molecules=mol[h])
    np.testing.assert_array_equal(rdf.bin_counts, 2 * np.asarray(one["result"]["counts"], dtype=np.uint64))
    np.testing.assert_allclose(rdf.rdf, one["result"]["g_r"], rtol=1e-12)
    part = twobs.RDF(40, 1.2, normalization_mode="finite_size", session=cpu)
    part.compute(side, points[o], points[h], molecules=mol[o], query_molecules=mol[h])
    np.testing.assert_array_equal(part.bin_counts, np.asarray(two["result"]["counts"], dtype=np.uint64))


def test_molecules_are_checked(rng, cpu):
    points, _, mol = waters(rng, 10, 3.0)
    rdf = twobs.RDF(10, 1.0, session=cpu)
    with pytest.raises(twobs.InputError, match="one integer per point"):
        rdf.compute(3.0, points, molecules=mol[:-1])
    with pytest.raises(twobs.InputError, match="ids are integers"):
        rdf.compute(3.0, points, molecules=mol.astype(float))
    with pytest.raises(twobs.InputError, match="exclusion goes with counts"):
        cpu.run("knn", points, params={"k": 2}, ids={"molecule": mol}, exclude_same="molecule")
