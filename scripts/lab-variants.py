#!/usr/bin/env python3
"""Lab variants of the brute-force kernels, to time with scripts/kernel-lab.py.

Renders 2PCF (r = 0.1) and SDH (50 and 500 buckets) for the h200 profile with
`twobs gen` (register_shm tiles, lower_triangle visit), writes hand-edited
variants of each beside it, and compiles every file to an sm_90 CUBIN with
the NVRTC twobs uses (libnvrtc.so.13 on LD_LIBRARY_PATH, as scripts/test.sh
installs it), so that the device runs the very SASS that was read here.

Variants (docs/performance.md, "H200: what the last tenth of the issue slots
waits for"):
  lb6   __launch_bounds__(B, 6): at most 40 registers, 6 blocks of 256 an SM
  u4    the tile loop unrolled 4 runs instead of 2
  db    two tile buffers, one barrier a tile instead of two
  dbp   two tile buffers filled by cp.async: the next tile's copy is issued
        after the barrier and lands while this tile's pairs are counted
  pf    each run's shared loads issued one run ahead
  wt    a tile copy per warp, with __syncwarp: no block barrier a tile
  p16-g1584  1584 blocks that stay, each walking items of 16 steps of a span

Usage: LD_LIBRARY_PATH=target/nvrtc/nvidia/cu13/lib scripts/lab-variants.py OUTDIR
then on the device: scripts/kernel-lab.py OUTDIR/*.cubin
"""
import ctypes
import os
import re
import subprocess
import sys

OLD_CTOR = re.compile(r"  __device__ __forceinline__ explicit Tiles\(unsigned char\* smem\) \{\n(.*?)\n  \}\n", re.S)
OLD_LOAD = re.compile(r"  __device__ __forceinline__ void load\(const Set& s, unsigned start\) \{\n.*?\n  \}\n", re.S)


def tile_bytes(src):
    return int(re.search(r"constexpr unsigned TILE_BYTES = (\d+);", src).group(1))


def common(src):
    one = tile_bytes(src)
    body = OLD_CTOR.search(src).group(1)
    pointers = body.replace("smem + ", "base + b * ONE + ")
    ctor = ("  static constexpr unsigned ONE = %d;\n"
            "  unsigned char* base;\n"
            "  unsigned flip = 0;\n"
            "  __device__ __forceinline__ explicit Tiles(unsigned char* smem) : base(smem) { at_buffer(0); }\n"
            "  __device__ __forceinline__ void at_buffer(unsigned b) {\n%s\n  }\n") % (one, pointers)
    src = OLD_CTOR.sub(lambda _: ctor, src, count=1)
    src = src.replace("constexpr unsigned TILE_BYTES = %d;" % one, "constexpr unsigned TILE_BYTES = %d;" % (2 * one))
    comps = re.findall(r"    copy16\(s\.(\w+) \+ start, (\w+), B \* sizeof\((\w+)\)\);", src)
    return "// lab: smem=+%d\n" % one + src, comps


def db(src):
    src, comps = common(src)
    copies = "\n".join("    copy16(s.%s + start, %s, B * sizeof(%s));" % c for c in comps)
    load = ("  __device__ __forceinline__ void load(const Set& s, unsigned start) {\n"
            "    flip ^= 1u;\n    at_buffer(flip);\n%s\n    __syncthreads();\n  }\n") % copies
    return OLD_LOAD.sub(lambda _: load, src, count=1)


def dbp(src):
    src, comps = common(src)
    offsets = dict(re.findall(r"    (\w+) = reinterpret_cast<\w+\*>\(base \+ b \* ONE \+ (\d+)\);", src))
    issues = "\n".join(
        "    async16(s.%s + start, base + b * ONE + %s, B * sizeof(%s));" % (c[0], offsets[c[1]], c[2]) for c in comps)
    load = ("  static constexpr unsigned NONE = 0xffffffffu;\n"
            "  unsigned pending = NONE;\n"
            "  __device__ __forceinline__ static void async16(const void* from, void* to, unsigned bytes) {\n"
            "    for (unsigned k = threadIdx.x; k < bytes / 16; k += B) {\n"
            "      const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(static_cast<uint4*>(to) + k));\n"
            "      asm volatile(\"cp.async.cg.shared.global [%%0], [%%1], 16;\" :: \"r\"(dst), \"l\"(static_cast<const uint4*>(from) + k) : \"memory\");\n"
            "    }\n  }\n"
            "  __device__ __forceinline__ void issue(const Set& s, unsigned start, unsigned b) {\n%s\n"
            "    asm volatile(\"cp.async.commit_group;\" ::: \"memory\");\n  }\n"
            "  __device__ __forceinline__ void load(const Set& s, unsigned start, unsigned next) {\n"
            "    if (pending != start) issue(s, start, flip ^ 1u);\n"
            "    asm volatile(\"cp.async.wait_all;\" ::: \"memory\");\n"
            "    __syncthreads();\n"
            "    flip ^= 1u;\n    at_buffer(flip);\n"
            "    pending = next;\n"
            "    if (next != NONE) issue(s, next, flip ^ 1u);\n"
            "  }\n") % issues
    src = OLD_LOAD.sub(lambda _: load, src, count=1)
    nxt = ("      unsigned next = Tiles::NONE;\n"
           "      if (u + 1 < R && start + B < a.n) {\n"
           "        next = start + B;\n"
           "      } else if (s + 1 < umin(steps, step_end)) {\n"
           "        next = (s + 1 == offdiag ? block : (block + 2 + s) % spans) * span;\n"
           "      }\n"
           "      tiles.load(a, start, next);\n")
    assert src.count("      tiles.load(a, start);\n") >= 1
    return src.replace("      tiles.load(a, start);\n", nxt)


def persistent(src, chunk, grid):
    """Blocks that stay: `grid` blocks walk items (a span's next `chunk` steps) round-robin."""
    head = re.compile(r"  const unsigned block = blockIdx\.x;\n  const unsigned first = .*?\n  const unsigned own_end = a\.n;.*?\n\n"
                      r"  const Here here = \{first \+ t, own_end, a_offset, other_offset, smem \+ TILE_BYTES\};\n"
                      r"  prepare_contribution\(\);\n  __syncthreads\(\);\n")
    new_head = (
        "  const Here here0 = {t, a.n, a_offset, other_offset, smem + TILE_BYTES};\n"
        "  prepare_contribution();\n  __syncthreads();\n"
        "  Output out(totals, here0);\n  Tiles tiles(smem);\n"
        "  constexpr unsigned C = %d;\n"
        "  const unsigned spans_all = (a.n + B * R - 1) / (B * R);\n"
        "  const unsigned max_steps = spans_all / 2 + 1;\n"
        "  const unsigned c_lo = step_first / C, c_hi = (umin(step_end, max_steps) + C - 1) / C;\n"
        "  for (unsigned item = c_lo * spans_all + blockIdx.x; item < c_hi * spans_all; item += gridDim.x) {\n"
        "  const unsigned block = item %% spans_all;\n"
        "  const unsigned chunk = item / spans_all;\n"
        "  const unsigned item_first = chunk * C > step_first ? chunk * C : step_first;\n"
        "  const unsigned item_end = umin(step_end, chunk * C + C);\n"
        "  const unsigned first = block * B * R;\n  const unsigned own_end = a.n;\n"
        "  const Here here = {first + t, own_end, a_offset, other_offset, smem + TILE_BYTES};\n") % chunk
    assert head.search(src), "kernel head"
    src = head.sub(lambda _: new_head, src, count=1)
    src = src.replace("  Output out(totals, here);\n  Tiles tiles(smem);\n", "", 1)
    src = src.replace("out.first_step(step_first)", "out.first_step(item_first)")
    src = src.replace("s < umin(steps, step_end)", "s < umin(steps, item_end)")
    assert src.count("  out.finish(here);\n") == 1
    src = src.replace("  out.finish(here);\n", "  }\n  out.finish(here0);\n")
    return "// lab: grid=%d\n" % grid + src


def prefetch(src):
    """The next run's shared loads issued before this run's pairs (the tile is padded by a run)."""
    old = re.search(r"    unsigned j = 0;\n    // Unrolled a little.*?\n#pragma unroll 2\n    for \(; j \+ RUN <= len; j \+= RUN\) \{\n((?:      const Run<\w+> run_\w+ = .*?\n)+)", src)
    loads = re.findall(r"      const Run<(\w+)> run_(\w+) = \*reinterpret_cast<const Run<\w+>\*>\((\w+) \+ j\);\n", old.group(1))
    first = "".join("    Run<%s> next_%s = *reinterpret_cast<const Run<%s>*>(%s);\n" % (t, n, t, a) for t, n, a in loads)
    body = "".join("      const Run<%s> run_%s = next_%s;\n      next_%s = *reinterpret_cast<const Run<%s>*>(%s + j + RUN);\n"
                   % (t, n, n, n, t, a) for t, n, a in loads)
    new = ("    unsigned j = 0;\n%s#pragma unroll 2\n    for (; j + RUN <= len; j += RUN) {\n%s") % (first, body)
    src = src[: old.start()] + new + src[old.end():]
    return "// lab: smem=+16\n" + src


def warp_tiles(src):
    """Each warp stages its own copy of the tile and waits for its own lanes only: no block barrier a tile."""
    one = tile_bytes(src)
    body = OLD_CTOR.search(src).group(1)
    pointers = body.replace("smem + ", "smem + (threadIdx.x / 32) * %d + " % one)
    ctor = "  __device__ __forceinline__ explicit Tiles(unsigned char* smem) {\n%s\n  }\n" % pointers
    src = OLD_CTOR.sub(lambda _: ctor, src, count=1)
    src = src.replace("constexpr unsigned TILE_BYTES = %d;" % one, "constexpr unsigned TILE_BYTES = B / 32 * %d;" % one)
    comps = re.findall(r"    copy16\(s\.(\w+) \+ start, (\w+), B \* sizeof\((\w+)\)\);", src)
    copies = "\n".join("    warp_copy16(s.%s + start, %s, B * sizeof(%s));" % c for c in comps)
    load = ("  __device__ __forceinline__ static void warp_copy16(const void* from, void* to, unsigned bytes) {\n"
            "    const uint4* src = static_cast<const uint4*>(from);\n"
            "    uint4* dst = static_cast<uint4*>(to);\n"
            "#pragma unroll\n"
            "    for (unsigned k = threadIdx.x %% 32; k < bytes / 16; k += 32) dst[k] = src[k];\n"
            "  }\n"
            "  __device__ __forceinline__ void load(const Set& s, unsigned start) {\n"
            "    __syncwarp();\n%s\n    __syncwarp();\n  }\n") % copies
    src = OLD_LOAD.sub(lambda _: load, src, count=1)
    return "// lab: smem=+%d\n" % ((int(re.search(r"// Launch: \d+ blocks of (\d+) threads", src).group(1)) // 32 - 1) * one) + src


def lb6(src):
    return src.replace("__launch_bounds__(B)", "__launch_bounds__(B, 6)")


def u4(src):
    assert "#pragma unroll 2\n" in src
    return src.replace("#pragma unroll 2\n", "#pragma unroll 4\n")


def compile_cubin(path):
    """path.cu -> path.cubin with NVRTC, under the options twobs uses."""
    lib = ctypes.CDLL("libnvrtc.so.13")
    prog = ctypes.c_void_p()
    source = open(path, "rb").read()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), source, os.path.basename(path).encode(), 0, None, None) == 0
    opts = [b"--std=c++17", b"--fmad=false", b"--gpu-architecture=sm_90"]
    if lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts)) != 0:
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        sys.exit(f"{path}: {log.value.decode()}")
    size = ctypes.c_size_t()
    lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
    cubin = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetCUBIN(prog, cubin)
    open(path[:-3] + ".cubin", "wb").write(cubin.raw)


# name: (base, transforms applied in order)
VARIANTS = {
    "lb6": [lb6],
    "u4-lb6": [u4, lb6],
    "db": [db],
    "dbp-lb6": [dbp, lb6],
    "pf-lb6": [prefetch, lb6],
    "wt": [warp_tiles],
    "p16-g1584-lb6": [lambda s: persistent(s, 16, 1584), lb6],
}
CASES = {"2pcf": ["2pcf", "--param", "r=0.1"], "sdh50": ["sdh", "--param", "bins=50"], "sdh500": ["sdh", "--param", "bins=500"]}


def main():
    out = sys.argv[1]
    twobs = os.environ.get("TWOBS", "target/release/twobs")
    os.makedirs(out, exist_ok=True)
    for case, args in CASES.items():
        base = subprocess.run([twobs, "gen", *args, "--device", "h200"], check=True, capture_output=True, text=True).stdout
        files = {case: base}
        for name, steps in VARIANTS.items():
            src = base
            for step in steps:
                src = step(src)
            files[f"{case}-{name}"] = src
        for stem, src in files.items():
            path = os.path.join(out, stem + ".cu")
            open(path, "w").write(src)
            compile_cubin(path)
            print(path)


if __name__ == "__main__":
    main()
