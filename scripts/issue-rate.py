#!/usr/bin/env python3
"""Warp instructions a scheduler issues a cycle, for the loops of scripts/issue-rate.cu.

The attainable issue rate of an instruction mix on the GPU, beside the
nominal one a cycle: the 2PCF pair loop's mix alone (no barrier, no tile
loads; one, two or four accumulators) and independent FFMA, FFMA with three
register operands, and FADD. Each loop's instructions are counted in the
CUBIN's SASS (cuobjdump), so the rate is the SASS's, not the PTX's.

`banks` counts, in a kernel's innermost loop, the FP32 and integer
instructions that read two different registers of one bank (register
number mod 2) from the register file, where the reuse cache does not hold
one of them: a model of the register-bank conflicts that the ffma3 loop
shows cost issue slots.

Usage:
  LD_LIBRARY_PATH=target/nvrtc/nvidia/cu13/lib scripts/issue-rate.py build DIR   (here: NVRTC 13.0, as twobs)
  scripts/issue-rate.py run DIR/issue-rate.cubin                                  (on the device)
  PATH="$(scripts/sass-tools.sh):$PATH" scripts/issue-rate.py banks CUBIN KERNEL[:MARKER]...   (e.g. twobs_2pcf:FSET.BF.GE.AND)
"""
import os
import re
import subprocess
import sys

CLOCK, SCHEDULERS = 1.98e9, 132 * 4  # H200: boost clock (held under these loads), 4 schedulers an SM
# kernel: (inner-loop iterations a rep, reps)
KERNELS = {"mix": (32, 3000), "mix2": (32, 3000), "mix4": (32, 3000), "mix_own_outer": (32, 3000),
           "ffma": (4, 40000), "ffma3": (4, 40000), "fadd2": (4, 40000)}


def build(out_dir):
    sys.path.insert(0, os.path.dirname(__file__))
    lab = __import__("lab-variants")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "issue-rate.cu")
    open(path, "w").write(open(os.path.join(os.path.dirname(__file__), "issue-rate.cu")).read())
    lab.compile_cubin(path)
    print(path[:-3] + ".cubin")


def innermost_loop(cubin, name, marker=None):
    """The SASS of a loop of the kernel with no loop inside (from a backward branch's target to the branch):
    the shortest, or where an opcode `marker` is given (a pair's, say FSET.BF.GE.AND), the one with the fewest
    instructions a marker."""
    sass = subprocess.run(["cuobjdump", "-sass", "-fun", name, cubin], check=True, capture_output=True, text=True).stdout
    loops = [(int(t, 16), int(a, 16)) for a, t in re.findall(r"/\*([0-9a-f]{4,})\*/\s+@!?P\d\s+BRA 0x([0-9a-f]+)", sass)
             if int(t, 16) < int(a, 16)]
    lines = [(int(addr, 16), text.strip()) for addr, text in re.findall(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)]
    loops = [l for l in loops if not any(o != l and l[0] <= o[0] and o[1] <= l[1] for o in loops)]  # none nested
    def marked(loop):
        return sum(loop[0] <= a <= loop[1] and t.split()[1 if t.startswith("@") else 0] == marker for a, t in lines)
    if marker:  # as scripts/sass-floor.py: of the loops holding the marker, the fewest instructions a marker (interior tiles)
        loops = [l for l in loops if marked(l)]
        first, last = min(loops, key=lambda l: (l[1] - l[0]) / marked(l))
    else:
        first, last = min(loops, key=lambda l: l[1] - l[0])
    return [text for addr, text in lines if first <= addr <= last]


def loop_instructions(cubin, name):
    return len(innermost_loop(cubin, name))


def bank_conflicts(cubin, name, marker=None):
    """(instructions, those reading two registers of one bank from the file) in the innermost loop."""
    loop, conflicts, cached = innermost_loop(cubin, name, marker), 0, {}
    for text in loop:
        op, _, rest = re.sub(r"^@!?U?P\w+\s+", "", text).partition(" ")
        sources, reused, fetched = rest.split(",")[1:], {}, set()
        for slot, operand in enumerate(s.strip() for s in sources):
            reg = re.match(r"-?\|?R(\d+)(\.reuse)?", operand)
            if reg:
                if cached.get(slot) != int(reg.group(1)):
                    fetched.add(int(reg.group(1)))
                if reg.group(2):
                    reused[slot] = int(reg.group(1))
        banks = [r % 2 for r in fetched]
        if op[0] in "FI" and max(banks.count(0), banks.count(1)) >= 2:
            conflicts += 1
        cached = reused
    return len(loop), conflicts


def banks(cubin, *names):
    for spec in names:
        name, _, marker = spec.partition(":")
        n, c = bank_conflicts(cubin, name, marker or None)
        print(f"{name}: {c} of the innermost loop's {n} instructions read two registers of one bank")


def run(cubin):
    import cupy as cp
    import numpy as np
    mod = cp.RawModule(path=cubin)
    xs = cp.asarray(np.random.default_rng(1).random(768, dtype=np.float32))
    out = cp.zeros(1584 * 256, dtype=cp.float32)
    for name, (iterations, reps) in KERNELS.items():
        per_rep = iterations * loop_instructions(cubin, name)
        kernel = mod.get_function(name)
        for blocks in (792, 1584):
            args = (xs, np.uint32(reps), np.float32(-64.0), np.float32(0.9), out)
            kernel((blocks,), (256,), args)
            cp.cuda.Device().synchronize()
            start, end = cp.cuda.Event(), cp.cuda.Event()
            times = []
            for _ in range(3):
                start.record()
                kernel((blocks,), (256,), args)
                end.record()
                end.synchronize()
                times.append(cp.cuda.get_elapsed_time(start, end) / 1e3)
            t = min(times)
            rate = blocks * 8 * reps * per_rep / (t * CLOCK * SCHEDULERS)
            print(f"{name}: {blocks} blocks of 256, {per_rep // iterations} instructions a loop, {t:.4f} s, "
                  f"{rate:.3f} warp instructions a cycle a scheduler", flush=True)


if __name__ == "__main__":
    {"build": build, "run": run, "banks": banks}[sys.argv[1]](*sys.argv[2:])
