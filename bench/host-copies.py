#!/usr/bin/env python3
"""What moving data between host and GPU costs on this machine (CuPy), to
size the upload and download paths: copies from and to
pageable memory (fresh, and already mapped), pinned allocation and
registration per MB, and copies through pinned memory. Prints one JSON line
per measurement, and writes them to OUT/host-copies.json.

Usage: bench/host-copies.py [OUT_DIR]
"""
import json
import os
import sys
import time

import subprocess

import cupy as cp
import numpy as np

# A fresh process's first steps, as twobs takes them after making its
# context: a stream-ordered allocation, its memset, a pageable copy into it.
FRESH = '''
import json, time
import cupy as cp, numpy as np
t = time.perf_counter(); cp.cuda.Device(0).use(); cp.cuda.runtime.free(0); ctx = time.perf_counter() - t
s = cp.cuda.Stream(non_blocking=True)
host = np.random.default_rng(1).random(3 << 20, dtype=np.float32)
t = time.perf_counter(); p = cp.cuda.runtime.mallocAsync(host.nbytes, s.ptr); s.synchronize(); alloc = time.perf_counter() - t
t = time.perf_counter(); cp.cuda.runtime.memsetAsync(p, 0, host.nbytes, s.ptr); s.synchronize(); memset = time.perf_counter() - t
t = time.perf_counter(); cp.cuda.runtime.memcpyAsync(p, host.ctypes.data, host.nbytes, 1, s.ptr); s.synchronize(); copy = time.perf_counter() - t
t = time.perf_counter(); q = cp.cuda.runtime.mallocAsync(host.nbytes, s.ptr); s.synchronize(); again = time.perf_counter() - t
print(json.dumps({"context": ctx, "first mallocAsync 12 MB": alloc, "memset": memset, "pageable copy 12 MB": copy, "second mallocAsync": again}))
'''

out = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "/tmp")
rt = cp.cuda.runtime
stream = cp.cuda.Stream(non_blocking=True)
rows = []


def timed(f, repeat=3):
    best = None
    for _ in range(repeat):
        cp.cuda.Device().synchronize()
        t = time.perf_counter()
        f()
        cp.cuda.Device().synchronize()
        best = min(best or 1e9, time.perf_counter() - t)
    return best


def note(what, mb, seconds):
    row = {"what": what, "MB": mb, "s": round(seconds, 6), "GB/s": round(mb / 1e3 / seconds, 2) if seconds else None}
    rows.append(row)
    print(json.dumps(row), flush=True)


cp.zeros(1)  # the context
for mb in (12, 128, 1024):
    n = mb * (1 << 20) // 4
    host = np.random.default_rng(1).random(n, dtype=np.float32)
    dev = cp.empty(n, dtype=cp.float32)
    note("H2D pageable (mapped)", mb, timed(lambda: dev.set(host)))
    note("D2H pageable into mapped memory", mb, timed(lambda: dev.get(out=host)))

    def fresh_get():
        dst = np.empty(n, dtype=np.float32)  # fresh pages: faulted by the copy
        dev.get(out=dst)

    note("D2H pageable into fresh memory", mb, timed(fresh_get, repeat=2))

    def fresh_faulted():
        dst = np.empty(n, dtype=np.float32)
        dst[:: 1024] = 0  # one touch per 4 KB page
    note("fault fresh memory (one thread)", mb, timed(fresh_faulted, repeat=2))

    t = time.perf_counter()
    pinned = cp.cuda.alloc_pinned_memory(n * 4)
    note("pinned alloc", mb, time.perf_counter() - t)
    pin = np.frombuffer(pinned, dtype=np.float32, count=n)
    note("H2D pinned", mb, timed(lambda: dev.set(pin)))
    note("D2H pinned", mb, timed(lambda: dev.get(out=pin)))
    del pin, pinned

    reg = np.empty(n, dtype=np.float32)
    reg[:: 1024] = 0
    ptr = reg.ctypes.data
    t = time.perf_counter()
    rt.hostRegister(ptr, n * 4, 0)
    note("hostRegister of mapped memory", mb, time.perf_counter() - t)
    note("D2H into registered memory", mb, timed(lambda: dev.get(out=reg)))
    t = time.perf_counter()
    rt.hostUnregister(ptr)
    note("hostUnregister", mb, time.perf_counter() - t)
    del dev, host, reg
    cp.get_default_memory_pool().free_all_blocks()
for _ in range(2):
    fresh = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True)
    line = fresh.stdout.strip() or fresh.stderr.strip()[-300:]
    rows.append({"what": "fresh process", "s": line})
    print(line, flush=True)
json.dump(rows, open(os.path.join(out, "host-copies.json"), "w"), indent=1)
