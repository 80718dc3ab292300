#!/usr/bin/env python3
"""The planner's kernel beside every forced variant, in one call on one GPU.

For SDH (50 and 500 buckets) and 2PCF on N uniform 3-D points, and RDF on two
sets of N: the planner's kernel (median of 3 runs), every forced variant (one
run each; the global-atomics output runs on N/4 points, as it is far slower),
and a plain PyTorch implementation (chunked torch.cdist with torch.histc or a
count) on the same GPU. Times are end to end without compilation: upload,
kernels, download. Writes $OUT/variants.md and $OUT/variants.json.

The copy counts of docs/benchmarks.md, "The copy model on Hopper" (the fit
of C_LP in tests/planner.rs) were measured with the planner's block of 64
threads and one own point a thread, which later planners no longer pick:
BENCH_EXTRA="--block-size 64 --points-per-thread 1" adds those flags to
every run.

Usage: [BENCH_CASES=0,1] [BENCH_VARIANTS=0,1] [BENCH_EXTRA=...] bench/variants.py
"""
import json
import os
import statistics
import subprocess
import sys
import time

TWOBS = os.environ.get("TWOBS", "target/release/twobs")
OUT = os.environ.get("OUT", "/tmp")
N = int(os.environ.get("BENCH_N", "1000000"))
# Which cases (0-3) run their forced variants; all by default.
VARIANTS = {int(x) for x in os.environ.get("BENCH_VARIANTS", "0,1,2,3").split(",") if x != ""}
# Which cases run at all.
ONLY = {int(x) for x in os.environ.get("BENCH_CASES", "0,1,2,3").split(",") if x != ""}
EXTRA = os.environ.get("BENCH_EXTRA", "").split()
os.environ.setdefault("TWOBS_CACHE", "/tmp/twobs-cache")

INPUTS = ["register_shm", "register_roc", "shuffle", "naive"]
AOP = [["--output", "aop", "--copies", str(c)] for c in (2, 4, 8, 16, 32)]
CASES = [
    # (label, problem, args, outputs that apply)
    ("SDH, 50 buckets", "sdh", ["--param", "bins=50"], [["--output", "op"]] + AOP + [["--output", "global"]]),
    ("SDH, 500 buckets", "sdh", ["--param", "bins=500"], [["--output", "op"]] + AOP + [["--output", "global"]]),
    ("2PCF, r = 0.1", "2pcf", ["--param", "r=0.1"], [["--output", "register"], ["--output", "op"]] + AOP + [["--output", "global"]]),
    ("RDF, 500 shells, open box", "rdf", ["--param", "box=0", "--param", "r_max=0.5"], [["--output", "op"]] + AOP + [["--output", "global"]]),
]


def twobs(problem, args, n, timeout=120):
    inputs = ["--input", f"uniform:{n}"] * (2 if problem == "rdf" else 1)
    cmd = [TWOBS, "run", problem, *inputs, *args, *EXTRA, "--backend", "cuda", "--quiet", "--seed", "7", "--report", "-"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout} s"}
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:200]}
    r = json.loads(p.stdout)
    t = r["timings"]
    plan = r["plans"][0]
    return {
        "variant": plan["variant"],
        "pairs": int(r["pairs"]),
        "time_s": t["compute_s"],
        "kernel_s": t["gpu"]["kernel_s"],
        "pairs_per_s": t["pairs_per_s"],
        "fp_per_pair": t.get("fp_instructions_per_pair"),
        "issue_rate": t.get("fp32_issue_rate"),
        "result": r["result"].get("count", sum(r["result"].get("counts", [0]))),
    }


def torch_baseline(problem, args, n):
    import torch

    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(7)
    a = torch.rand(n, 3, device=dev, generator=g)
    b = torch.rand(n, 3, device=dev, generator=g) if problem == "rdf" else a
    params = dict(x.split("=") for x in args[1::2])
    chunk = max(1, min(n, (4 << 30) // (4 * b.shape[0])))  # 4 GiB of distances at a time

    def body():
        acc = None
        for s in range(0, n, chunk):
            d = torch.cdist(a[s : s + chunk], b)
            if problem == "2pcf":
                part = (d < float(params["r"])).sum()
            else:
                bins = int(params.get("bins", 500))
                hi = float(params.get("r_max", 3 ** 0.5))
                part = torch.histc(d, bins=bins, min=0.0, max=hi)
            acc = part if acc is None else acc + part
        return acc

    body()  # warm up: kernels load, memory pools fill
    torch.cuda.synchronize()
    times = []
    for _ in range(3):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        acc = body()
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1) / 1e3)
    t = statistics.median(times)
    # cdist visits every ordered pair, self-pairs included: count the pairs twobs counts.
    pairs = n * n if problem == "rdf" else n * (n - 1) // 2
    return {"variant": "torch.cdist + " + ("count" if problem == "2pcf" else "histc"), "pairs": pairs, "time_s": t, "pairs_per_s": pairs / t}


def main():
    rows = []
    for index, (label, problem, args, outputs) in enumerate(CASES):
        if index not in ONLY:
            continue
        runs = [twobs(problem, args, N) for _ in range(3)]
        ok = [r for r in runs if "error" not in r]
        if not ok:
            print(f"{label}: planned kernel failed: {runs[0]['error']}", flush=True)
            continue
        planned = dict(ok[0], time_s=statistics.median(r["time_s"] for r in ok), kernel_s=statistics.median(r["kernel_s"] for r in ok))
        planned["pairs_per_s"] = planned["pairs"] / planned["time_s"]
        try:
            base = torch_baseline(problem, args, N)
        except Exception as e:  # noqa: BLE001 - the table says what failed
            base = {"variant": "torch", "error": str(e)[:200]}
        bound = planned["issue_rate"] / planned["fp_per_pair"] if planned.get("fp_per_pair") else None
        group = {"case": label, "points": N, "planned": planned, "torch": base, "bound_pairs_per_s": bound, "variants": []}
        print(f"{label}: planned {planned['variant']}: {planned['time_s']:.3f} s, {planned['pairs_per_s']:.3e} pairs/s", flush=True)
        print(f"  PyTorch {base.get('variant')}: " + (base["error"] if "error" in base else f"{base['time_s']:.3f} s, {base['pairs_per_s']:.3e} pairs/s"), flush=True)
        rows.append(group)
        for ic in INPUTS if index in VARIANTS else []:
            for out in outputs:
                n = N // 4 if "global" in out else N
                r = twobs(problem, args + ["--input-cache", ic] + out, n)
                r["points"] = n
                r["forced"] = f"{ic} {' '.join(out[1:])}"
                group["variants"].append(r)
                print(f"  {r['forced']:<28} n={n}: " + (r["error"] if "error" in r else f"{r['time_s']:.3f} s, {r['pairs_per_s']:.3e} pairs/s"), flush=True)
        write(rows)  # after every case: a run cut short keeps what it measured
    print(table(rows))


def write(rows):
    with open(os.path.join(OUT, "variants.json"), "w") as f:
        json.dump(rows, f, indent=1)
    with open(os.path.join(OUT, "variants.md"), "w") as f:
        f.write(table(rows))


def fmt_rate(x):
    return f"{x:.3g}" if x else "-"


def table(rows):
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,clocks.max.sm", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    lines = [f"GPU: {gpu}. N = {N}.", ""]
    lines.append("| case | kernel | points | time (s) | pairs/s | vs PyTorch | of FP32 issue bound |")
    lines.append("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for g in rows:
        base = g["torch"].get("pairs_per_s")
        bound = g["bound_pairs_per_s"]

        def row(name, r, n):
            if "error" in r:
                lines.append(f"| {g['case']} | {name} | {n} | {r['error']} | | | |")
                return
            vs = f"{r['pairs_per_s'] / base:.1f}x" if base else "-"
            of = f"{100 * r['pairs_per_s'] / bound:.0f}%" if bound else "-"
            lines.append(f"| {g['case']} | {name} | {n} | {r['time_s']:.3f} | {fmt_rate(r['pairs_per_s'])} | {vs} | {of} |")

        row(f"**planner: {g['planned']['variant']}**", g["planned"], g["points"])
        for v in g["variants"]:
            row(v.get("variant", v["forced"]) if "error" not in v else v["forced"], v, v["points"])
        t = g["torch"]
        if "error" in t:
            lines.append(f"| {g['case']} | PyTorch | {g['points']} | {t['error']} | | | |")
        else:
            of = f"{100 * t['pairs_per_s'] / bound:.0f}%" if bound else "-"
            lines.append(f"| {g['case']} | PyTorch: {t['variant']} | {g['points']} | {t['time_s']:.3f} | {fmt_rate(t['pairs_per_s'])} | 1.0x | {of} |")
        if bound:
            lines.append(f"| {g['case']} | FP32 issue bound ({g['planned']['fp_per_pair']} FP instructions per pair) | | | {fmt_rate(bound)} | | 100% |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
