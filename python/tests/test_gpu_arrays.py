"""Arrays in a GPU's memory (``__cuda_array_interface__``, DLPack) without a GPU:
what twobs reads of the interface, and the refusals that need no GPU to say
why. On a GPU, python/tests/test_gpu.py runs them."""

import numpy as np
import pytest

import twobs


class OnGpu:
    """An array that only says where it lies, as a GPU array of no known library would."""

    def __init__(self, shape, typestr="<f4", strides=None, address=0x7F0000000000, **more):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (address, False),
                                         "strides": strides, "version": 3, **more}


def test_a_gpu_array_given_to_the_cpu_backend_is_refused_naming_both(cpu):
    with pytest.raises(twobs.InputError, match=r"set A lies on a GPU; the CPU backend .* pass a host array"):
        twobs.knn(OnGpu((1000, 3)), 4, session=cpu)


def test_gpu_arrays_twobs_cannot_read_are_refused_before_any_gpu_is_asked(cpu):
    with pytest.raises(twobs.InputError, match=r"shape \(10, 3, 2\); expected \(points, coordinates\)"):
        cpu.run("knn", OnGpu((10, 3, 2)), params={"k": 2})
    with pytest.raises(twobs.InputError, match=r'typestr ">f4"'):
        cpu.run("knn", OnGpu((10, 3), typestr=">f4"), params={"k": 2})
    with pytest.raises(twobs.InputError, match="stream 0 is ambiguous"):
        cpu.run("knn", OnGpu((10, 3), stream=0), params={"k": 2})
    with pytest.raises(twobs.InputError, match="a masked GPU array"):
        cpu.run("knn", OnGpu((10, 3), mask=object()), params={"k": 2})
    with pytest.raises(twobs.InputError, match="a stride of 6 bytes between elements of 4 bytes"):
        cpu.run("knn", OnGpu((10, 3), strides=(12, 6)), params={"k": 2})
    with pytest.raises(twobs.InputError, match=r"typestr \"<u4\"; twobs reads little-endian float32"):
        cpu.run("sdh", OnGpu((10, 3), typestr="<u4"))
    with pytest.raises(twobs.InputError, match="set A: no points"):
        cpu.run("sdh", OnGpu((0, 3)))


def test_a_gpu_array_the_run_needs_on_the_host_is_refused_clearly(cpu):
    # Weights (and ids) are read on the host: a GPU array of no known library cannot be copied there.
    with pytest.raises(twobs.InputError, match="needs on the host"):
        cpu.run("sdh", OnGpu((10, 3)), weights=[np.ones(10)])
    # A host set beside a GPU one.
    with pytest.raises(twobs.InputError, match="needs on the host"):
        twobs.knn(np.ones((5, 3), np.float32), 2, query=OnGpu((10, 3)), session=cpu)


def test_host_arrays_and_dlpack_arrays_of_the_host_are_not_taken_for_gpu_ones():
    assert twobs._session._on_gpu(np.ones((3, 3))) is None

    class HostDlpack:
        def __dlpack_device__(self):
            return (1, 0)  # kDLCPU

    assert twobs._session._on_gpu(HostDlpack()) is None
    given = OnGpu((7, 3), strides=(4, 28), stream=2)
    x, cai = twobs._session._on_gpu(given)
    problem = twobs.Problem("knn")
    assert twobs._session._gpu_arg(cai, problem, "set A") == (0x7F0000000000, (7, 3), "<f4", (4, 28), 2)
