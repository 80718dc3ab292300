"""On a GPU: every function gives the CPU backend's numbers, arrays already on
the GPU (CuPy, PyTorch) are taken and results go back there, and Ctrl-C stops a
GPU run. Skipped, with the reason, where no GPU is usable (CI)."""

import _thread
import threading
import time

import numpy as np
import pytest

import twobs
from conftest import ROOT

gpu_ready = twobs.Session().backend == "cuda"
pytestmark = pytest.mark.skipif(not gpu_ready, reason="no usable GPU (CUDA driver and NVRTC) on this machine")


@pytest.fixture(scope="module")
def gpu():
    return twobs.Session(backend="cuda")


def test_histograms_equal_the_cpu_backends(gpu, cpu, rng):
    points = rng.random((20_000, 3), dtype=np.float32)
    w = rng.random(20_000)
    for params, weights in (({"bins": 500}, None), ({"bins": 64, "r_max": 0.3}, None), ({"bins": 50}, [w])):
        mine, ref = gpu.run("sdh", points, params=params, weights=weights), cpu.run("sdh", points, params=params, weights=weights)
        if weights is None:
            np.testing.assert_array_equal(mine.counts, ref.counts)
        else:
            np.testing.assert_allclose(mine.sums, ref.sums, rtol=1e-6)
        assert mine.report["backend"] == "cuda"


def test_rdf_frames_equal_the_cpu_backends(gpu, cpu, rng):
    a, b = twobs.RDF(100, 2.0, session=gpu), twobs.RDF(100, 2.0, session=cpu)
    for f, side in enumerate((10.0, 10.2, 9.8)):
        x = (rng.random((30_000, 3)) * side).astype(np.float32)
        a.compute(side, x, reset=f == 0)
        b.compute(side, x, reset=f == 0)
    np.testing.assert_array_equal(a.bin_counts, b.bin_counts)
    np.testing.assert_allclose(a.rdf, b.rdf, rtol=1e-12)


def test_neighbours_equal_the_cpu_backends(gpu, cpu, rng):
    points = rng.random((50_000, 3), dtype=np.float32)
    pairs = twobs.query_pairs(points, 0.01, session=gpu)
    ref = twobs.query_pairs(points, 0.01, session=cpu)
    assert {tuple(p) for p in pairs} == {tuple(p) for p in ref} and len(pairs) == len(ref)
    (d, i), (dr, ir) = twobs.knn(points, 16, session=gpu), twobs.knn(points, 16, session=cpu)
    np.testing.assert_array_equal(i, ir)
    np.testing.assert_array_equal(d, dr)


def test_counts_and_xi_equal_the_cpu_backends(gpu, cpu, rng):
    data = np.clip(rng.normal(0.5, 0.1, (20_000, 3)), 0, 1).astype(np.float32)
    randoms = rng.random((30_000, 3), dtype=np.float32)
    edges = np.geomspace(0.005, 0.2, 16)
    mine, ref = twobs.xi(data, randoms, edges, session=gpu), twobs.xi(data, randoms, edges, session=cpu)
    for k in ("dd", "dr", "rr"):
        np.testing.assert_array_equal(mine[k], ref[k])
    dd = twobs.DD(1, 0, edges, *data.T, periodic=True, boxsize=1.0, session=gpu)
    np.testing.assert_array_equal(dd, twobs.DD(1, 0, edges, *data.T, periodic=True, boxsize=1.0, session=cpu))


def test_a_users_spec_equals_the_cpu_backends(gpu, cpu, rng):
    problem = twobs.Problem(str(ROOT / "examples" / "manhattan" / "manhattan.xml"))
    x = rng.random((20_000, 4), dtype=np.float32)
    np.testing.assert_array_equal(problem.run(x, session=gpu).counts, problem.run(x, session=cpu).counts)


def test_cupy_arrays_are_taken_and_results_go_back_to_the_gpu(gpu, rng):
    cupy = pytest.importorskip("cupy")
    points = rng.random((30_000, 3), dtype=np.float32)
    d, i = twobs.knn(cupy.asarray(points), 8, session=gpu)
    assert isinstance(i, cupy.ndarray) and isinstance(d, cupy.ndarray)
    dn, in_ = twobs.knn(points, 8, session=gpu)
    np.testing.assert_array_equal(cupy.asnumpy(i), in_)
    pairs = twobs.query_pairs(cupy.asarray(points), 0.02, session=gpu)
    assert isinstance(pairs, cupy.ndarray)


def test_torch_tensors_are_taken_and_results_go_back_to_their_device(gpu, rng):
    torch = pytest.importorskip("torch")
    points = rng.random((30_000, 3), dtype=np.float32)
    d, i = twobs.knn(torch.from_numpy(points).cuda(), 8, session=gpu)
    assert i.is_cuda and d.is_cuda
    np.testing.assert_array_equal(i.cpu().numpy(), twobs.knn(points, 8, session=gpu)[1])


def _same_lists(got, want_d, want_i, cupy):
    np.testing.assert_array_equal(cupy.asnumpy(got[1]), want_i)
    np.testing.assert_array_equal(cupy.asnumpy(got[0]), want_d)


def test_cupy_points_are_read_where_they_lie_and_knn_lists_stay_there(gpu, rng):
    cupy = pytest.importorskip("cupy")
    for n, k, order in ((30_000, 8, "C"), (50_001, 16, "F")):
        host = rng.random((n, 3), dtype=np.float32)
        dev = cupy.asarray(host, order=order)
        d, i = twobs.knn(dev, k, session=gpu)
        assert isinstance(i, cupy.ndarray) and i.dtype == cupy.int32 and i.shape == (n, k)
        assert isinstance(d, cupy.ndarray) and d.dtype == cupy.float32
        want_d, want_i = twobs.knn(host, k, session=gpu)
        _same_lists((d, i), want_d, want_i, cupy)
        # Planned from the GPU's measurements as the host path plans from its columns.
        on_gpu = gpu.run("knn", dev, params={"k": k})
        on_host = gpu.run("knn", host, params={"k": k})
        # The same index, GPUs, blocks and estimate (the CPU's part is never asked of points on a GPU).
        mine, theirs = dict(on_gpu.report["schedule"]), dict(on_host.report["schedule"])
        assert mine.pop("cpu").startswith("the GPUs alone: the CPU beside them is turned off") and theirs.pop("cpu")
        assert mine == theirs
        assert on_gpu.report["index"]["why"] == on_host.report["index"]["why"]
        assert on_gpu.report["timings"]["gpu"]["take_s"] > 0
    # float64 read through a strided view, and queries of their own (two sets).
    wide = rng.random((20_000, 6))
    view = cupy.asarray(wide)[:, ::2]
    query = rng.random((3_000, 3))
    d, i = twobs.knn(view, 5, query=cupy.asarray(query), session=gpu)
    want_d, want_i = twobs.knn(wide[:, ::2].astype(np.float32), 5, query=query.astype(np.float32), session=gpu)
    _same_lists((d, i), want_d, want_i, cupy)
    # Short lists: inf and len(points) where partners lack, as on the host.
    few = rng.random((6, 3), dtype=np.float32)
    d, i = twobs.knn(cupy.asarray(few), 8, session=gpu)
    want_d, want_i = twobs.knn(few, 8, session=gpu)
    _same_lists((d, i), want_d, want_i, cupy)
    assert int(i.max()) == 6


def test_lists_left_on_the_gpu_outlive_the_call_and_their_session(rng):
    cupy = pytest.importorskip("cupy")
    import gc

    points = rng.random((40_000, 3), dtype=np.float32)
    session = twobs.Session(backend="cuda")
    d, i = twobs.knn(cupy.asarray(points), 4, session=session)
    del session
    gc.collect()
    junk = cupy.random.random((40_000, 4 * 8))  # would take the freed memory
    want_d, want_i = twobs.knn(points, 4, session=twobs.Session(backend="cpu"))
    np.testing.assert_array_equal(cupy.asnumpy(i), want_i)
    np.testing.assert_array_equal(cupy.asnumpy(d), want_d)
    del junk


def test_points_still_being_written_on_a_stream_are_waited_for(gpu):
    cupy = pytest.importorskip("cupy")
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        x = cupy.random.random((3_000_000, 3), dtype=cupy.float32) * 7
        # CuPy's interface names this stream: twobs waits for it before it reads.
        d, i = twobs.knn(x, 4, session=gpu)
    want_d, want_i = twobs.knn(cupy.asnumpy(x), 4, session=gpu)
    np.testing.assert_array_equal(cupy.asnumpy(i), want_i)


def test_histograms_and_pairs_of_cupy_points_equal_the_host_paths(gpu, rng):
    cupy = pytest.importorskip("cupy")
    x = (rng.random((60_000, 3)) * 20).astype(np.float32)
    a, b = twobs.RDF(100, 3.0, session=gpu), twobs.RDF(100, 3.0, session=gpu)
    a.compute(20.0, cupy.asarray(x))
    b.compute(20.0, x)
    np.testing.assert_array_equal(a.bin_counts, b.bin_counts)
    # The box's volume, and the host path's words for where it came from.
    box = {"bins": 100, "r_max": 3.0, "box": 20.0}
    on_gpu, on_host = gpu.run("rdf", cupy.asarray(x), params=box), gpu.run("rdf", x, params=box)
    assert (on_gpu.volume, on_gpu.volume_from) == (on_host.volume, on_host.volume_from)
    np.testing.assert_array_equal(gpu.run("sdh", cupy.asarray(x[:20_000]), params={"bins": 64}).counts,
                                  gpu.run("sdh", x[:20_000], params={"bins": 64}).counts)
    pairs = twobs.query_pairs(cupy.asarray(x), 0.3, session=gpu)
    ref = twobs.query_pairs(x, 0.3, session=gpu)
    assert isinstance(pairs, cupy.ndarray)
    assert {tuple(p) for p in cupy.asnumpy(pairs)} == {tuple(p) for p in ref}
    # Points outside the box are wrapped on the host only: refused by name.
    with pytest.raises(twobs.InputError, match="periodic box"):
        twobs.RDF(10, 1.0, session=gpu).compute(10.0, cupy.asarray(x))


def test_a_nan_on_the_gpu_is_refused_with_its_row(gpu, rng):
    cupy = pytest.importorskip("cupy")
    x = cupy.asarray(rng.random((10_000, 3), dtype=np.float32))
    x[4321, 2] = cupy.nan
    with pytest.raises(twobs.InputError, match=r"row 4321 \(counting from 0\) holds NaN"):
        twobs.knn(x, 4, session=gpu)


def test_torch_points_are_read_where_they_lie(gpu, rng):
    torch = pytest.importorskip("torch")
    points = rng.random((30_000, 3), dtype=np.float32)
    t = torch.from_numpy(points).cuda().requires_grad_()
    d, i = twobs.knn(t, 8, session=gpu)
    assert i.is_cuda and d.is_cuda and i.dtype == torch.int32
    want_d, want_i = twobs.knn(points, 8, session=gpu)
    np.testing.assert_array_equal(i.cpu().numpy(), want_i)
    np.testing.assert_array_equal(d.cpu().numpy(), want_d)


def test_jax_points_are_read_through_dlpack(gpu, rng):
    jax = pytest.importorskip("jax")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX sees no GPU")
    points = rng.random((30_000, 3), dtype=np.float32)
    d, i = twobs.knn(jax.device_put(points), 8, session=gpu)
    np.testing.assert_array_equal(np.asarray(i), twobs.knn(points, 8, session=gpu)[1])


def test_ctrl_c_stops_a_gpu_run_and_the_session_runs_again(gpu, ctrl_c):
    points = np.random.default_rng().random((6_000_000, 3), dtype=np.float32)  # 1.8e13 pairs: many seconds
    timer = threading.Timer(1.5, _thread.interrupt_main)
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        gpu.run("sdh", points, params={"bins": 100})
    stopped = time.monotonic() - start
    timer.join()
    # Asked at 1.5 s; the whole run is about 9 s of kernels on an H200 (12 on an
    # H100) after its compile. A stop is seen between pieces of work: 3.2-3.6 s
    # after the ask on an H200 (5.1 s in all once, in a full GPU pytest).
    assert stopped < 7, f"the run took {stopped:.1f} s to stop"
    small = gpu.run("sdh", points[:5000], params={"bins": 100})
    assert int(small.counts.sum()) == 5000 * 4999 // 2


def test_a_sessions_registered_columns_give_the_cpu_backends_numbers(cpu, rng):
    # The large columns a GPU session keeps are registered with the driver
    # after a call, and the next calls' points are copied into them: the
    # uploads from them must carry each call's points, whatever sizes come,
    # and after a call whose points were refused (its columns dropped).
    session = twobs.Session(backend="cuda")
    params = {"bins": 64, "r_max": 2.0, "box": 20.0}
    registered, refused = [], []
    for n in (200_000, 200_000, 150_000, 300_000, 200_000):
        x = (rng.random((n, 3)) * 20.0).astype(np.float32)
        mine, ref = session.run("rdf", x, params=params), cpu.run("rdf", x, params=params)
        np.testing.assert_array_equal(mine.counts, ref.counts)
        registered.append(mine.report["steps"]["columns_registered"])
        refused.append(mine.report["steps"]["registration_refused"])
        if n == 150_000:
            bad = x.copy()
            bad[77, 1] = np.nan
            with pytest.raises(twobs.InputError, match="77"):
                session.run("rdf", bad, params=params)
    # The first call's columns were new, and so were the 300k call's (none kept was large enough).
    assert registered == [0, 3, 3, 0, 3], refused
    assert refused == [None] * 5
