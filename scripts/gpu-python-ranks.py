"""The Python package's `comm=` on GPUs, a rank each: run by
`scripts/gpu-suite.sh ranks` (`mpiexec -n 2 on-rank-gpu-python
scripts/gpu-python-ranks.py`), each rank on its own GPU. Rank 0 first runs
each case alone (a session without comm, its one GPU: the reference), then
both ranks run it with comm=; rank 0 compares (counts and KNN lists equal,
pairs equal as sets, f32-kernel sums to 1e-9 relative: a GPU's float sums
depend on which stream took which piece, on one process too) and prints one
line a case with the times."""

import hashlib
import sys
import time

import numpy as np
from mpi4py import MPI

import twobs

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
rng = np.random.default_rng(2026)
big = rng.random((2_000_000, 3), dtype=np.float32)
mid = rng.random((300_000, 3), dtype=np.float32) * np.float32(10.0)
query = rng.random((100_000, 3), dtype=np.float32) * np.float32(10.0)
alone = twobs.Session(backend="cuda") if rank == 0 else None
shared = twobs.Session(backend="cuda", comm=comm)

cases = {
    "sdh 2M, 500 buckets": lambda s: s.run("sdh", big, params={"bins": 500}).counts,
    "rdf 2M (box 1, r_max 0.05)": lambda s: s.run("rdf", big, params={"bins": 200, "r_max": 0.05, "box": "1.0"}).counts,
    "kde 300k (sum)": lambda s: np.array([s.run("kde", mid[:100_000] / np.float32(10.0)).sum]),
    "selfjoin 300k, eps 0.08": lambda s: s.run("selfjoin", mid, params={"eps": 0.08}).pairs,
    "knn 100k queries x 300k, k 8": lambda s: s.run("knn", query, mid, params={"k": 8}).ids,
}
failed = 0
for name, case in cases.items():
    if rank == 0:
        case(alone)  # compiled and warm
        t = time.perf_counter()
        want = case(alone)
        t_alone = time.perf_counter() - t
    comm.Barrier()
    case(shared)
    comm.Barrier()
    t = time.perf_counter()
    got = case(shared)
    t_shared = time.perf_counter() - t
    if rank != 0:
        continue
    if name.startswith("selfjoin"):
        same = len(got) == len(want) and np.array_equal(np.unique(np.sort(got, axis=1), axis=0), np.unique(np.sort(want, axis=1), axis=0))
        how = f"{len(got)} pairs, equal as sets: {same}"
    elif name.startswith("kde"):
        rel = abs(float(got[0]) - float(want[0])) / abs(float(want[0]))
        same = rel < 1e-9
        how = f"sum {float(got[0])!r} vs {float(want[0])!r}, relative difference {rel:.2e}"
    else:
        same = np.array_equal(got, want)
        how = f"equal: {same}, digest {hashlib.sha256(np.ascontiguousarray(got).tobytes()).hexdigest()[:16]}"
    failed += not same
    print(f"{name}: 1 GPU alone {t_alone:.3f} s, 2 ranks x 1 GPU {t_shared:.3f} s ({t_alone / t_shared:.2f}x); {how}", flush=True)
if rank == 0:
    print("FAILED" if failed else "all cases agree", flush=True)
    sys.exit(1 if failed else 0)
