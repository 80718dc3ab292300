"""The package speaks Python (issue 53): its messages name Python's options and
every option a message suggests exists on the call that raised it; a float64
caller gets float64 exactness where it asks; long runs show their progress
where Python users look; the namespace is clean."""

import numpy as np
import pytest

import twobs


def test_a_nonfinite_row_names_drop_nonfinite_and_the_call_with_it_succeeds(rng, cpu):
    points = rng.random((500, 3)).astype(np.float32)
    points[17, 1] = np.nan
    with pytest.raises(twobs.InputError) as refused:
        twobs.query_pairs(points, 0.1, session=cpu)
    message = str(refused.value)
    assert "drop_nonfinite=True" in message and "--" not in message, message
    pairs = twobs.query_pairs(points, 0.1, drop_nonfinite=True, session=cpu)
    # Indices are the caller's rows: row 17 is in no pair, the others as without it.
    assert 17 not in pairs
    kept = np.delete(points, 17, axis=0)
    alone = twobs.query_pairs(kept, 0.1, session=cpu)
    renumbered = np.where(alone >= 17, alone + 1, alone)
    as_set = lambda p: set(map(tuple, np.sort(p, axis=1)))
    assert as_set(pairs) == as_set(renumbered)
    for call in (lambda: twobs.knn(points, 3, drop_nonfinite=True, session=cpu),
                 lambda: twobs.RDF(10, 0.3, session=cpu).compute(1.0, points, drop_nonfinite=True)):
        call()


def test_points_outside_the_box_name_outside_box_and_rdf_compute_takes_it(rng, cpu):
    points = (rng.random((400, 3)) * 1.6).astype(np.float32)
    with pytest.raises(twobs.InputError) as refused:
        twobs.RDF(10, 0.4, session=cpu).compute(1.0, points)
    message = str(refused.value)
    assert 'outside_box="wrap"' in message and "--" not in message, message
    rdf = twobs.RDF(10, 0.4, session=cpu).compute(1.0, points, outside_box="wrap")
    assert rdf.bin_counts.sum() > 0
    with pytest.raises(twobs.InputError) as refused:
        twobs.RDF(10, 0.4, session=cpu).compute(1.0, points, outside_box="refuse")
    assert 'outside_box="wrap"' in str(refused.value)


def test_query_pairs_in_f64_equals_ckdtree_exactly(rng, cpu):
    spatial = pytest.importorskip("scipy.spatial")
    points = rng.random((4000, 3))
    eps = 0.05
    want = spatial.cKDTree(points).query_pairs(eps, output_type="ndarray")
    got = twobs.query_pairs(points, eps, f64=True, session=cpu)
    key = lambda p: p[np.lexsort((p[:, 1], p[:, 0]))]
    np.testing.assert_array_equal(key(np.sort(got, axis=1)), key(np.sort(want, axis=1)))
    # Pairs a hair inside and outside eps, which float32 could not tell apart.
    a = np.zeros((1, 3))
    near = np.array([[eps * (1 - 1e-12), 0, 0], [eps * (1 + 1e-12), 0, 0]])
    both = np.vstack([a, near])
    mine = sorted(map(tuple, twobs.query_pairs(both, eps, f64=True, session=cpu).tolist()))
    assert mine == sorted(map(tuple, spatial.cKDTree(both).query_pairs(eps, output_type="ndarray").tolist()))
    assert (0, 1) in mine and (0, 2) not in mine


def test_knn_in_f64_gives_float64_distances_equal_to_ckdtree(rng, cpu):
    spatial = pytest.importorskip("scipy.spatial")
    points = rng.random((3000, 3))
    dist, idx = twobs.knn(points, 5, f64=True, session=cpu)
    assert dist.dtype == np.float64
    want_d, want_i = spatial.cKDTree(points).query(points, 6)
    np.testing.assert_array_equal(idx, want_i[:, 1:])
    np.testing.assert_allclose(dist, want_d[:, 1:], rtol=1e-15)
    f32_dist, _ = twobs.knn(points, 5, session=cpu)
    assert f32_dist.dtype == np.float32


def test_a_long_run_shows_its_progress_on_stderr_and_to_a_hook(rng, capsys):
    # 80k points, every pair on one thread: the schedule's rate estimates it at
    # a minute, and it runs for more than the half second before a line is shown.
    n = 80_000
    points = rng.random((n, 3), dtype=np.float32)
    shown = twobs.Session(backend="cpu", threads=1, index="none")
    calls = []
    hooked = twobs.Session(backend="cpu", threads=1, index="none", progress=lambda done, total: calls.append((done, total)))
    want = shown.run("sdh", points, params={"bins": 8}).counts
    err = capsys.readouterr().err
    assert "twobs:" in err and "% of" in err and "pairs" in err, err
    np.testing.assert_array_equal(hooked.run("sdh", points, params={"bins": 8}).counts, want)
    assert "twobs:" not in capsys.readouterr().err, "a hook takes the progress in place of the line"
    assert calls and all(total == n * (n - 1) // 2 for _, total in calls), calls[:3]
    assert all(0 <= done <= total for done, total in calls)


def test_a_short_run_shows_nothing(rng, capsys):
    twobs.Session(backend="cpu").run("sdh", rng.random((300, 3), dtype=np.float32))
    assert "twobs:" not in capsys.readouterr().err


def test_the_namespace_is_the_package_and_its_version():
    # Submodules (twobs.mda, once a test imported it) are the package's own, not leaks.
    public = [n for n in dir(twobs) if not n.startswith("_") and not isinstance(getattr(twobs, n), type(twobs))]
    assert sorted(public) == sorted(n for n in twobs.__all__ if not n.startswith("_"))
    for leaked in ("np", "os", "json", "Any", "math", "Optional"):
        assert leaked not in dir(twobs)
    assert twobs.__version__.count(".") == 2
    import inspect

    undocumented = []
    for name in twobs.__all__:
        obj = getattr(twobs, name)
        if inspect.isclass(obj):
            undocumented += [] if obj.__doc__ else [name]
            for member, value in vars(obj).items():
                doc = value.fget.__doc__ if isinstance(value, property) else getattr(value, "__doc__", "x")
                if not member.startswith("_") and (inspect.isfunction(value) or isinstance(value, property)) and not doc:
                    undocumented.append(f"{name}.{member}")
        elif callable(obj) and not obj.__doc__:
            undocumented.append(name)
    assert not undocumented, undocumented
