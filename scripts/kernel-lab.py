#!/usr/bin/env python3
"""Times hand-edited variants of a rendered kernel, beside the rendered one.

For trying a kernel idea on the device before it goes into the templates:
render a kernel with `twobs gen` (a one-set, f32 x 3 problem whose kernel
takes `(a_x, a_y, a_z, n_a, a_offset, other_offset, step_first, step_end,
Total* totals)`: SDH, RDF, 2PCF, KDE), copy and edit it, and give the
harness every file. Each is launched as its header's "Launch:" line says,
over the same N uniform points (seeded), its steps cut into pieces of
shrinking size on two streams as twobs's runner does. A "// lab:
smem=+BYTES" line adds dynamic shared memory (a variant with more tiles),
"// lab: grid=N" launches N blocks (a variant whose blocks stay).

Give CUBINs compiled by the NVRTC twobs uses (scripts/lab-variants.py
writes them; the launch is read from the .cu of the same name): a .cu is
compiled by CuPy's NVRTC, whose SASS differs (the 2PCF kernel ran 9%
slower that way on the H200).

Prints, for each file, the median kernel time of REPS runs (CUDA events,
first launch start to last launch end), one stream's time, and a digest of
the totals; every variant of one problem must print the same digest.

Usage: [N=1000000] [REPS=3] scripts/kernel-lab.py FILE.cubin|FILE.cu...
"""
import hashlib
import os
import re
import statistics
import sys

import cupy as cp
import numpy as np

N = int(os.environ.get("N", "1000000"))
REPS = int(os.environ.get("REPS", "3"))
SEED = int(os.environ.get("SEED", "20261124"))


def launch_shape(source):
    m = re.search(r"// Launch: (\d+) blocks of (\d+) threads, (\d+) B dynamic shared memory", source)
    blocks, threads, smem = (int(g) for g in m.groups())
    extra = re.search(r"// lab: smem=\+(\d+)", source)
    if extra:
        smem += int(extra.group(1))
    grid = re.search(r"// lab: grid=(\d+)", source)
    if grid:
        blocks = int(grid.group(1))
    name = re.search(r'extern "C" __global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)\(', source).group(1)
    block_size = int(re.search(r"constexpr unsigned B = (\d+);", source).group(1))
    per_thread = int(re.search(r"constexpr unsigned R = (\d+);", source).group(1))
    return name, blocks, threads, smem, block_size * per_thread


def pieces(steps, workers=2, floor_part=30):
    """Step ranges of shrinking size, as the runner's guided cut makes them."""
    out, first, floor = [], 0, max(1, steps // floor_part)
    while first < steps:
        want = max((steps - first) // (2 * workers), floor)
        end = min(steps, first + want)
        out.append((first, end if end < steps else 0xFFFFFFFF))
        first = end
    return out


def main():
    rng = np.random.default_rng(SEED)
    padded = (N + 1023) // 1024 * 1024
    coords = []
    for _ in range(3):
        c = np.zeros(padded, dtype=np.float32)
        c[:N] = rng.random(N, dtype=np.float32)
        coords.append(cp.asarray(c))
    totals = cp.zeros(4096, dtype=cp.uint64)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
    for path in sys.argv[1:]:
        # A .cubin (compiled elsewhere, say by the NVRTC twobs uses) takes its shape from the .cu beside it.
        source = open(path[: -len(".cubin")] + ".cu" if path.endswith(".cubin") else path).read()
        name, blocks, threads, smem, span = launch_shape(source)
        if path.endswith(".cubin"):
            module = cp.RawModule(path=path)
        else:
            module = cp.RawModule(code=source, options=("--std=c++17", "--fmad=false"))
        kernel = module.get_function(name)
        if smem > 48 * 1024:
            kernel.max_dynamic_shared_size_bytes = smem
        steps = (N + span - 1) // span // 2 + 2
        cut = pieces(steps)

        def run(split):
            totals.fill(0)
            cp.cuda.Device().synchronize()
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record(streams[0])
            streams[1].wait_event(start)
            for k, (first, last) in enumerate(cut if split else [(0, 0xFFFFFFFF)]):
                s = streams[k % 2] if split else streams[0]
                args = (*coords, np.uint32(N), np.uint32(0), np.uint32(0), np.uint32(first), np.uint32(last), totals)
                kernel((blocks,), (threads,), args, shared_mem=smem, stream=s)
            other = cp.cuda.Event()
            other.record(streams[1])
            streams[0].wait_event(other)
            end.record(streams[0])
            end.synchronize()
            return cp.cuda.get_elapsed_time(start, end) / 1e3, cp.asnumpy(totals)

        run(True)  # warm up
        times, digests = [], set()
        for _ in range(REPS):
            t, out = run(True)
            times.append(t)
            digests.add(hashlib.sha256(out.tobytes()).hexdigest()[:12])
        one, out = run(False)
        digests.add(hashlib.sha256(out.tobytes()).hexdigest()[:12])
        print(f"{path}: {name} {blocks}x{threads} smem {smem} B, {len(cut)} pieces: "
              f"{statistics.median(times):.4f} s (spread {max(times) - min(times):.4f}), one launch {one:.4f} s, "
              f"total {int(out.sum())}, digest {','.join(sorted(digests))}", flush=True)


if __name__ == "__main__":
    main()
