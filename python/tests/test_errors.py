"""Bad input is a Python exception with the command line's message; Ctrl-C stops a run and frees it."""

import _thread
import threading
import time

import numpy as np
import pytest

import twobs


def test_a_wrong_spec_names_its_line_and_column():
    with pytest.raises(twobs.SpecError, match=r"<spec text>:3:\d+"):
        twobs.Problem('<problem name="x">\n  <summary>s</summary>\n  <input sets="3" type="f32" dims="3"/>\n</problem>')


def test_an_unknown_problem_lists_the_built_ins():
    with pytest.raises(twobs.SpecError, match="built-ins: sdh, rdf"):
        twobs.Problem("nosuch")


def test_an_unknown_parameter_names_the_known_ones(cpu):
    with pytest.raises(twobs.InputError, match="has no parameter `rmax`; its parameters are: bins, r_min, r_max"):
        cpu.run("sdh", np.ones((4, 3), np.float32), params={"rmax": 1.0})


def test_nan_is_refused_with_its_row(cpu):
    points = np.random.default_rng().random((50, 3), dtype=np.float32)
    points[17, 1] = np.nan
    with pytest.raises(twobs.InputError, match=r"row 17 \(counting from 0\) holds NaN"):
        cpu.run("sdh", points)


def test_points_of_the_wrong_shape_are_refused(cpu):
    with pytest.raises(twobs.InputError, match="expected"):
        cpu.run("rdf", np.ones((5, 3, 2), np.float32))
    # A list is rows, as numpy reads it: two points of five values each.
    with pytest.raises(twobs.InputError, match="5"):
        cpu.run("rdf", [np.ones(5), np.ones(5)])
    with pytest.raises(twobs.InputError, match=r"missing \['z'\]"):
        cpu.run("rdf", {"x": np.ones(5), "y": np.ones(5)})


def test_a_list_of_rows_is_rows_as_numpy_reads_it(cpu):
    """Issue 49, item 3: three points on a line are three points, not three coordinates."""
    rows = [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [2.5, 0.0, 0.0]]
    listed = cpu.run("sdh", rows, params={"bins": 6, "r_max": 3.0})
    as_array = cpu.run("sdh", np.asarray(rows, dtype=np.float32), params={"bins": 6, "r_max": 3.0})
    np.testing.assert_array_equal(listed.counts, as_array.counts)
    # Pairs at 1, 1.5 and 2.5: buckets of width 0.5.
    np.testing.assert_array_equal(listed.counts, [0, 0, 1, 1, 0, 1])
    dist, idx = twobs.knn(rows, 1, session=cpu)
    np.testing.assert_array_equal(idx.ravel(), [1, 0, 1])
    by_field = cpu.run("sdh", {"x": [0.0, 1.0, 2.5], "y": [0.0] * 3, "z": [0.0] * 3}, params={"bins": 6, "r_max": 3.0})
    np.testing.assert_array_equal(by_field.counts, listed.counts)


def test_points_far_outside_the_box_are_refused_with_their_extent(cpu):
    points = (np.random.default_rng().random((100, 3)) * 10).astype(np.float32)
    with pytest.raises(twobs.InputError, match="lie outside the periodic box") as refused:
        twobs.RDF(10, 0.4, session=cpu).compute(1.0, points)
    # Python's spelling of the way out, not the command line's flags.
    assert 'outside_box="wrap"' in str(refused.value) and "--" not in str(refused.value)


def test_a_bad_session_option_says_what_it_takes():
    with pytest.raises(ValueError, match='expected "auto"'):
        twobs.Session(backend="tpu")


def test_ctrl_c_stops_a_long_run_and_the_session_runs_again(cpu, ctrl_c):
    points = np.random.default_rng().random((400_000, 3), dtype=np.float32)  # 8e10 pairs: minutes
    # The driver compiled first: the host compiler is not interrupted, and on a
    # loaded machine (two suites at once) its 1.5 s took most of the 10 s below.
    warm = cpu.run("sdh", points[:1000], params={"bins": 10})
    assert int(warm.counts.sum()) == 1000 * 999 // 2
    timer = threading.Timer(1.0, _thread.interrupt_main)
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        cpu.run("sdh", points, params={"bins": 10})
    stopped = time.monotonic() - start
    timer.join()
    assert stopped < 10, f"the run took {stopped:.1f} s to stop"
    small = cpu.run("sdh", points[:1000], params={"bins": 10})
    assert int(small.counts.sum()) == 1000 * 999 // 2


def test_xi_says_what_it_needs_instead_of_randoms(cpu):
    points = np.random.default_rng(1).random((20, 3), dtype=np.float32)
    edges = np.linspace(0.1, 0.4, 4)
    with pytest.raises(twobs.InputError, match="give randoms, or boxsize"):
        twobs.xi(points, None, edges, session=cpu)
    with pytest.raises(twobs.InputError, match="not both"):
        twobs.xi(points, points, edges, boxsize=1.0, session=cpu)
    with pytest.raises(twobs.InputError, match="Landy-Szalay is the natural estimator"):
        twobs.xi(points, None, edges, boxsize=1.0, estimator="landy-szalay", session=cpu)
    with pytest.raises(twobs.InputError, match="above half the smallest width"):
        twobs.xi(points, None, np.linspace(0.1, 0.6, 4), boxsize=1.0, session=cpu)
    with pytest.raises(twobs.InputError, match="norm='n2'"):
        twobs.xi(points, points, edges, norm="n2", session=cpu)


def test_a_session_runs_one_problem_object_in_each_shape_as_a_fresh_session_does(rng):
    # The session keeps a problem's variant per sets, spacing and dims: a call of
    # another shape must not take the last one's (results poisoned in between).
    # (Three shapes: each compiles a CPU driver on a cold cache, about 1.5 s.)
    problem = twobs.Problem("sdh")
    session = twobs.Session(backend="cpu", threads=2)
    shapes = [
        ("3-D, one set", [rng.random((300, 3)).astype(np.float32)]),
        ("2-D, one set", [rng.random((300, 2)).astype(np.float32)]),
        ("3-D, two sets", [rng.random((300, 3)).astype(np.float32), rng.random((200, 3)).astype(np.float32)]),
    ]
    params = {"bins": 13, "r_max": 1.8}
    for _ in range(2):
        for what, sets in shapes:
            got = session.run(problem, *sets, params=params)
            fresh = twobs.Session(backend="cpu", threads=2).run(problem, *sets, params=params)
            np.testing.assert_array_equal(got.counts, fresh.counts, err_msg=what)
            np.testing.assert_array_equal(got.edges, fresh.edges, err_msg=what)
            assert got.counts.sum() > 0, what
            got.counts[:] = 7  # poisoned: the next call's arrays are its own
