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


def test_ctrl_c_stops_a_gpu_run_and_the_session_runs_again(gpu):
    points = np.random.default_rng().random((6_000_000, 3), dtype=np.float32)  # 1.8e13 pairs: many seconds
    timer = threading.Timer(1.5, _thread.interrupt_main)
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        gpu.run("sdh", points, params={"bins": 100})
    stopped = time.monotonic() - start
    timer.join()
    assert stopped < 5, f"the run took {stopped:.1f} s to stop"
    small = gpu.run("sdh", points[:5000], params={"bins": 100})
    assert int(small.counts.sum()) == 5000 * 4999 // 2
