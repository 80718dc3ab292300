#!/usr/bin/env python3
"""What getting 100k 3-D float32 points (1.2 MB) of a cold numpy array to the
GPU costs on a host, each way a call could take (issue 32's second call):
registering the array with the driver and copying from it, a copy from
pageable memory, and numpy's own transposing copy (what a host take does).
Before each step a 256 MB pass and a 50 ms pause evict the caches and let the
cores sleep, as after a first call's NVRTC. Needs CuPy; prints medians (us).

Usage: python3 scripts/probe-cold-upload.py
"""
import time

import cupy as cp
import numpy as np

rt = cp.cuda.runtime
cp.zeros(1).sum()
cp.cuda.Device().synchronize()
rng = np.random.default_rng(1)


def cold():
    big = np.ones(64 << 20, dtype=np.float32)
    big.sum()
    del big
    time.sleep(0.05)


def points():
    return (rng.random((100_000, 3)) * 46.4).astype(np.float32)


took = {k: [] for k in ["register", "copy from registered", "unregister", "copy from pageable", "transposing copy"]}
device = cp.empty((100_000, 3), dtype=np.float32)
for _ in range(12):
    a = points()
    cold()
    t0 = time.perf_counter()
    rt.hostRegister(a.ctypes.data, a.nbytes, 0)
    t1 = time.perf_counter()
    rt.memcpy(device.data.ptr, a.ctypes.data, a.nbytes, rt.memcpyHostToDevice)
    t2 = time.perf_counter()
    rt.hostUnregister(a.ctypes.data)
    t3 = time.perf_counter()
    took["register"].append(t1 - t0)
    took["copy from registered"].append(t2 - t1)
    took["unregister"].append(t3 - t2)
    b = points()
    cold()
    t0 = time.perf_counter()
    rt.memcpy(device.data.ptr, b.ctypes.data, b.nbytes, rt.memcpyHostToDevice)
    took["copy from pageable"].append(time.perf_counter() - t0)
    c = points()
    cold()
    t0 = time.perf_counter()
    np.ascontiguousarray(c.T)
    took["transposing copy"].append(time.perf_counter() - t0)
for k, v in took.items():
    v = sorted(v[2:])
    print(f"{k:21} median {1e6 * v[len(v) // 2]:.0f} us, least {1e6 * v[0]:.0f}, most {1e6 * v[-1]:.0f}")
