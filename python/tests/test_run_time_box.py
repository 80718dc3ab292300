"""A trajectory whose box changes every frame compiles one kernel more, not one a frame:
a session's problem asked with a second box reads its box at run time, with the same counts."""

import numpy as np

import twobs


def _in_box(rng, box, n):
    """n points spread over a box (Lx, Ly, Lz[, xy, xz, yz]), inside it in f32 too."""
    lx, ly, lz, xy, xz, yz = (list(box) + [0.0, 0.0, 0.0])[:6]
    s = rng.uniform(0.001, 0.999, (n, 3))
    x = s[:, 0] * lx + s[:, 1] * xy * ly + s[:, 2] * xz * lz
    y = s[:, 1] * ly + s[:, 2] * yz * lz
    return np.stack([x, y, s[:, 2] * lz], axis=1).astype(np.float32)


def test_frames_with_changing_boxes_compile_once_more_and_count_as_each_frame_alone(rng):
    # Bins and r_max no other test uses, so that no driver of these was loaded before.
    bins, r_max = 37, 1.37
    boxes = [(4.0, 4.2, 4.1), (4.05, 4.15, 4.0), (3.95, 4.1, 4.2, 0.05, -0.03, 0.02), (4.1, 4.0, 4.05)]
    frames = [_in_box(rng, b, 1200) for b in boxes]
    session = twobs.Session(backend="cpu", threads=2)
    rdf = twobs.RDF(bins, r_max, session=session)
    made = []
    for k, (b, points) in enumerate(zip(boxes, frames)):
        before = twobs.programs()
        rdf.compute(b, points, reset=k == 0)
        made.append(twobs.programs() - before)
        assert rdf.report["box_time"] == ("compile" if k == 0 else "run"), rdf.report
    # The first frame's folded driver, one run-time driver at the second, none after.
    assert made[1:] == [1, 0, 0], made
    assert made[0] <= 1, made
    # Each frame alone in a session of its own: the box folded, the same counts.
    total = np.zeros(bins, dtype=np.uint64)
    for b, points in zip(boxes, frames):
        alone = twobs.RDF(bins, r_max, session=twobs.Session(backend="cpu", threads=2)).compute(b, points)
        assert alone.report["box_time"] == "compile"
        total += alone.bin_counts
    assert total.sum() > 10_000
    np.testing.assert_array_equal(rdf.bin_counts, total)


def test_one_box_keeps_the_folded_kernel(rng):
    session = twobs.Session(backend="cpu", threads=2)
    rdf = twobs.RDF(20, 0.8, session=session)
    for k in range(3):
        rdf.compute(3.0, _in_box(rng, (3.0, 3.0, 3.0), 400), reset=k == 0)
        assert rdf.report["box_time"] == "compile"
