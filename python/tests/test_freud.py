"""freud's own coordinates, centred on the origin, through twobs's RDF (issue
50): counts equal freud's up to the pairs within float32 rounding of a
shell's edge (each counted and bounded), cube and triclinic."""

import numpy as np
import pytest

import twobs

freud = pytest.importorskip("freud")


def near_an_edge(box, points, edges):
    """Pairs (each once) whose distance lies within float32 rounding of an edge."""
    nq = freud.locality.AABBQuery(box, points).query(points, {"r_max": float(edges[-1]) * 1.0001,
                                                               "exclude_ii": True})
    nlist = nq.toNeighborList()
    i, j = nlist.query_point_indices, nlist.point_indices
    once = i < j
    d = box.compute_distances(points[i[once]], points[j[once]]).astype(np.float64)
    gap = np.min(np.abs(d[:, None] - np.asarray(edges)[None, :]), axis=1)
    return int(np.sum(gap <= 4e-7 * edges[-1]))


@pytest.mark.parametrize("box", [freud.box.Box.cube(10.0), freud.box.Box(10.0, 11.0, 12.0, 0.2, 0.1, 0.3)],
                         ids=["cube", "triclinic"])
def test_rdf_of_freuds_centred_points_equals_freuds_counts(rng, cpu, box):
    points = box.wrap((rng.random((3000, 3)) - 0.5) * [box.Lx, box.Ly, box.Lz]).astype(np.float32)
    assert (points < 0).any(), "freud's points are centred on the origin"
    theirs = freud.density.RDF(bins=40, r_max=3.0).compute((box, points))
    mine = twobs.RDF(40, 3.0, session=cpu).compute(box, points)
    moved = np.abs(theirs.bin_counts.astype(np.int64) - mine.bin_counts.astype(np.int64)).sum()
    # Each pair is counted from both ends: a pair across an edge moves two counts out and two in.
    assert moved <= 4 * near_an_edge(box, points, mine.bin_edges), moved
    assert theirs.bin_counts.sum() > 10_000
    np.testing.assert_allclose(mine.rdf, theirs.rdf, rtol=1e-3, atol=1e-12)
    np.testing.assert_allclose(mine.bin_centers, theirs.bin_centers, rtol=1e-6)
