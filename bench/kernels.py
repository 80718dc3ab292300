#!/usr/bin/env python3
"""The planner's kernels of two or more twobs binaries, in one call on one GPU.

For each case (1,000,000 uniform points; RDF and the band join 1M x 1M), each
binary runs the planner's own plan REPS times, interleaved so that clock drift
hits every binary alike; the table gives the median kernel time (CUDA events,
from the report) and compute time (input in host memory to result in host
memory, compilation excluded), and checks that all binaries found the same
result. Writes $OUT/kernels.md and $OUT/kernels.json.

With TORCH=1, each case also runs a plain PyTorch version of the same work
on the same GPU in the same call (chunked torch.cdist, or broadcasting for
the periodic box and the band join; one chunk to warm up, one timed run,
CUDA events; 10-40 s a case at 1M points; TORCH_CHUNKS=k times k chunks
and scales): the baseline a user could write without twobs. Its points are
drawn by torch (uniform, same size), the band join's keys are the same file.

Usage: BINARIES=before=PATH,after=PATH [TORCH=1] bench/kernels.py
"""
import hashlib
import json
import os
import statistics
import subprocess
import sys

OUT = os.environ.get("OUT", "/tmp")
N = int(os.environ.get("BENCH_N", "1000000"))
REPS = int(os.environ.get("BENCH_REPS", "3"))
BINARIES = [b.split("=", 1) for b in os.environ.get("BINARIES", "after=target/release/twobs").split(",")]
os.environ.setdefault("TWOBS_CACHE", "/tmp/twobs-cache")

def band_keys():
    """Band-join keys: int32 over the whole range (uniform:N keys lie in [0, N) and would join 2e9 pairs)."""
    import numpy as np
    rng = np.random.default_rng(12345)
    paths = []
    for name in ("band_a.npy", "band_b.npy"):
        path = os.path.join(OUT, name)
        np.save(path, rng.integers(-2**31, 2**31, size=N, dtype=np.int64).astype(np.int32))
        paths.append(path)
    return paths


CASES = [
    # (label, problem, two sets, args); "band" reads the band_keys() files
    ("SDH, 50 buckets", "sdh", False, ["--param", "bins=50"]),
    ("SDH, 500 buckets", "sdh", False, ["--param", "bins=500"]),
    ("RDF 1M x 1M, 500 shells, open box", "rdf", True, ["--param", "box=0", "--param", "r_max=0.5"]),
    ("RDF 1M x 1M, 500 shells, periodic box", "rdf", True, ["--param", "box=1", "--param", "r_max=0.5"]),
    ("2PCF, r = 0.1", "2pcf", False, ["--param", "r=0.1"]),
    ("band join 1M x 1M int32 keys over the whole range, d = 1073", "nlj", "band", ["--param", "d=1073"]),
    ("KNN, K = 16", "knn", False, ["--param", "k=16"]),
    # 2-D points: eps = 0.001 finds about 1.6 million pairs (0.01 finds 156 million).
    ("epsilon self-join, eps = 0.001", "selfjoin", False, ["--param", "eps=0.001"]),
    # 2PCF over every pair beside it: the planner's own plan walks a grid.
    ("2PCF, r = 0.1, every pair (--index none)", "2pcf", False, ["--param", "r=0.1", "--index", "none"]),
    # User specs (they should run as fast as the built-ins).
    ("manhattan (README's user spec, 4-D L1, 64 buckets)", "examples/manhattan/manhattan.xml", False, []),
    ("periodic RDF as a user spec (rintf, sqrtf, 500 shells)", "examples/periodic_rdf/periodic_rdf.xml", False, []),
    # Boxes other than the unit cube (the points lie in its unit corner):
    # their lengths' reciprocals are not exact.
    ("RDF 1M x 1M, 500 shells, periodic box 2.5, r_max = 1", "rdf", True, ["--param", "box=2.5", "--param", "r_max=1"]),
    ("RDF 1M x 1M, 500 shells, triclinic box 2.5,2.5,2.5,0.1,0,0, r_max = 1", "rdf", True,
     ["--param", "box=2.5,2.5,2.5,0.1,0,0", "--param", "r_max=1"]),
    ("kernel density sum, h = 0.05", "kde", False, []),
    # A user's count on keys whose NaN fails (the kernel counts passes; the
    # built-ins' counts count failures). The spec is written at start.
    ("close pairs as a user spec (squared distance < 0.01, its own key)", "close_pairs", False, []),
]
ONLY = {int(x) for x in os.environ.get("BENCH_CASES", ",".join(str(i) for i in range(len(CASES)))).split(",") if x}


def run(binary, problem, two, args):
    if two == "band":
        inputs = [x for path in BAND for x in ("--input", path)]
    else:
        inputs = ["--input", f"uniform:{N}"] * (2 if two else 1)
    cmd = [binary, "run", problem, *inputs, *args, "--backend", "cuda", "--quiet", "--seed", "7", "--report", "-",
           "--out", os.path.join(OUT, "kernels.npy")]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:200]}
    r = json.loads(p.stdout)
    t = r["timings"]
    plan = r["plans"][0]
    variant = plan.get("variant") or "{}-{}{}-b{}".format(
        plan["input_cache"], plan["output"], plan["copies"] if plan["output"] == "aop" else "", plan["block_size"])
    result = r["result"]
    digest = json.dumps({k: result.get(k) for k in ("count", "counts", "sum", "pairs")}, sort_keys=True)
    if result.get("file") and result.get("kind") == "pairs":
        # Pairs: the set of pairs, whatever order the GPU wrote them in.
        import numpy as np
        pairs = np.load(result["file"])
        pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
        digest += hashlib.sha256(pairs.tobytes()).hexdigest()
    elif result.get("file") and result.get("kind") == "knn":
        # Neighbour lists: each query's, in order (ties go to the lower index).
        digest += hashlib.sha256(open(result["file"], "rb").read()).hexdigest()
    return {"variant": variant, "kernel_s": t["gpu"]["kernel_s"], "compute_s": t["compute_s"], "compile_s": t["compile_s"],
            "pairs": int(r["pairs"]), "digest": digest}


BAND = []


def close_pairs_spec():
    """A user's spec counting pairs whose squared distance is under 0.01, tested on that key itself."""
    os.makedirs(os.path.join(OUT, "close_pairs"), exist_ok=True)
    with open(os.path.join(OUT, "close_pairs", "close.cu"), "w") as f:
        f.write("__device__ float sq(float3 a, float3 b) {\n"
                "  const float x = a.x - b.x, y = a.y - b.y, z = a.z - b.z;\n"
                "  return fmaf(z, z, fmaf(y, y, x * x));\n}\n"
                "__device__ float same(float k) { return k; }\n"
                "__device__ float close(float3 a, float3 b) { return same(sq(a, b)); }\n")
    path = os.path.join(OUT, "close_pairs", "close_pairs.xml")
    with open(path, "w") as f:
        f.write('<problem name="close_pairs"><summary>pairs closer than 0.1</summary>\n'
                '<input sets="1" type="f32" dims="3"/>\n'
                '<function file="close.cu" name="close" symmetric="true" key="sq" map="same"/>\n'
                '<output kind="count" threshold="0.01" compare="lt"/></problem>\n')
    return path


def torch_baseline(problem, two, args):
    """Seconds a plain PyTorch version of the case takes (CUDA events), chunked over rows of A."""
    import numpy as np
    import torch

    dev = "cuda"
    params = dict(x.split("=") for x in args[1::2] if "=" in x)
    # A built-in's name, or a user spec's file name (examples/manhattan/manhattan.xml: manhattan).
    problem = os.path.splitext(os.path.basename(problem))[0]
    dims = 4 if problem == "manhattan" else 3
    g = torch.Generator(device=dev).manual_seed(7)
    if two == "band":
        a, b = (torch.from_numpy(np.load(p).astype(np.int64)).to(dev) for p in BAND)
    else:
        a = torch.rand(N, dims, device=dev, generator=g)
        b = torch.rand(N, dims, device=dev, generator=g) if two else a
    rows = max(1, (2 << 30) // (8 * b.shape[0]))  # about 2 GiB of intermediates a chunk

    def chunk(s):
        x = a[s : s + rows]
        if problem == "nlj":
            return ((x[:, None] - b[None, :]).abs() <= int(params["d"])).nonzero()
        box = params.get("box", "1") if problem == "rdf" else "1" if problem == "periodic_rdf" else "0"
        if "," in box:
            raise ValueError("no PyTorch baseline for a box of several lengths")
        if float(box) > 0:  # a cube of side L, the separations to their nearest images
            d = x[:, None, :] - b[None, :, :]
            d = (d - float(box) * torch.round(d / float(box))).norm(dim=2)
        elif problem == "manhattan":
            d = torch.cdist(x, b, p=1)
        else:
            d = torch.cdist(x, b)
        if problem == "manhattan":
            return torch.histc(d, bins=64, min=0.0, max=4.0)
        if problem == "periodic_rdf":
            return torch.histc(d, bins=500, min=0.0, max=0.5)
        if problem == "sdh":
            return torch.histc(d, bins=int(params["bins"]), min=0.0, max=3 ** 0.5)
        if problem == "rdf":
            return torch.histc(d, bins=500, min=0.0, max=float(params["r_max"]))
        if problem == "kde":
            return torch.exp(-(d * d) / (2 * 0.05 ** 2)).sum()
        if problem == "2pcf":
            return (d < float(params["r"])).sum()
        if problem == "close_pairs":
            return (d * d < 0.01).sum()
        if problem == "knn":
            return d.topk(int(params["k"]) + 1, largest=False).indices  # the point itself comes first
        if problem == "selfjoin":
            found = (d < float(params["eps"])).nonzero()
            return found[found[:, 0] + s < found[:, 1]]
        raise ValueError(problem)

    starts = list(range(0, a.shape[0], rows))
    # TORCH_CHUNKS=k times the first k chunks alone and scales by the whole
    # count (chunks of equal rows do equal work): for baselines that would
    # take minutes (cdist with p=1). The table marks such a figure.
    timed = starts[: int(os.environ.get("TORCH_CHUNKS") or len(starts))]

    chunk(0)  # warm up on one chunk: kernels load, memory pools fill
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for s in timed:
        chunk(s)
    e1.record()
    torch.cuda.synchronize()
    seconds = e0.elapsed_time(e1) / 1e3
    if len(timed) < len(starts):
        return seconds * a.shape[0] / sum(min(rows, a.shape[0] - s) for s in timed), f"{len(timed)} of {len(starts)} chunks, scaled"
    return seconds, None


def main():
    if any(c[2] == "band" for i, c in enumerate(CASES) if i in ONLY):
        BAND.extend(band_keys())
    rows = []
    for index, (label, problem, two, args) in enumerate(CASES):
        if index not in ONLY:
            continue
        if problem == "close_pairs":
            problem = close_pairs_spec()
        runs = {name: [] for name, _ in BINARIES}
        for name, binary in BINARIES:  # warm: compile once, outside the timings
            run(binary, problem, two, args)
        for _ in range(REPS):
            for name, binary in BINARIES:
                runs[name].append(run(binary, problem, two, args))
        row = {"case": label, "binaries": {}}
        for name, rs in runs.items():
            ok = [r for r in rs if "error" not in r]
            if not ok:
                row["binaries"][name] = {"error": rs[0]["error"]}
                continue
            row["binaries"][name] = {
                "variant": ok[0]["variant"],
                "kernel_s": statistics.median(r["kernel_s"] for r in ok),
                "compute_s": statistics.median(r["compute_s"] for r in ok),
                "kernel_spread": max(r["kernel_s"] for r in ok) - min(r["kernel_s"] for r in ok),
                "pairs": ok[0]["pairs"],
                "same_result": len({r["digest"] for r in ok}) == 1,
                "digest": ok[0]["digest"],
            }
        digests = {b["digest"] for b in row["binaries"].values() if "digest" in b}
        row["identical_across_binaries"] = len(digests) == 1
        if os.environ.get("TORCH"):
            try:
                row["torch_s"], row["torch_note"] = torch_baseline(problem, two, args)
            except Exception as e:  # the table says why there is no baseline
                row["torch_error"] = str(e)[:200]
        rows.append(row)
        print(json.dumps({"case": label, **{n: {k: v for k, v in b.items() if k != "digest"} for n, b in row["binaries"].items()}}), flush=True)
        with open(os.path.join(OUT, "kernels.json"), "w") as f:
            json.dump(rows, f, indent=1)
    table = ["| case | " + " | ".join(f"{n}: kernel (s) | {n}: compute (s)" for n, _ in BINARIES) + " | same result | PyTorch (s) |",
             "| --- |" + " ---: | ---: |" * len(BINARIES) + " --- | ---: |"]
    for row in rows:
        cells = []
        for name, _ in BINARIES:
            b = row["binaries"].get(name, {"error": "not run"})
            cells += [b["error"], ""] if "error" in b else [f"{b['kernel_s']:.3f} ({b['variant']})", f"{b['compute_s']:.3f}"]
        torch_cell = f"{row['torch_s']:.3f}" if "torch_s" in row else row.get("torch_error", "")
        if row.get("torch_note"):
            torch_cell += f" ({row['torch_note']})"
        table.append(f"| {row['case']} | " + " | ".join(cells) + f" | {'yes' if row['identical_across_binaries'] else 'NO'} | {torch_cell} |")
    text = "\n".join(table) + "\n"
    open(os.path.join(OUT, "kernels.md"), "w").write(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
