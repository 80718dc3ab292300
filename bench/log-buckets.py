#!/usr/bin/env python3
"""Log-spaced buckets on one GPU: checks and timings, each beside its baseline
in the same call (the bucket table of src/stage/bucket_table.rs; docs/benchmarks.md, "Log-binned counts").

Parts (any of them, in order):
  check    the key probes of log-spaced SDH on all 2^32 keys (parity keys/sdh-log-*),
           the adversarial edge pairs on the GPU (tests/log_buckets.rs), and the
           parity suite's log-spaced cases (sdh-log, ddsmu-log)
  sass     the pair loop's instructions of SDH in 50 linear and 20 log buckets
  bench    1M uniform points: SDH in 50 linear buckets against 20 log buckets
           (1e-3..0.5) over every pair, this build and main's (MAIN); DD(r), DD(s, mu)
           and DD(rp, pi) on 1M clustered points, every pair and --index auto
  big      10M clustered points, 20 log buckets 1e-3..0.5: --index auto and every
           pair, this build, and --index auto of main's build
  cucount  cucount (built here from CUCOUNT_SRC, or CUCOUNT_SITE's tarball of a
           build) on the bench's 1M clustered points, DD(r) and DD(s, mu), against
           twobs; the pairs whose f32 and f64 buckets differ counted and listed
Environment: TWOBS, MAIN (main's binary), PARITY and LOGB (test binaries; REPO, the checkout
they run in, which their build's CARGO_MANIFEST_DIR must name too),
CUCOUNT_SRC, CUCOUNT_SITE, OUT. Writes $OUT/summary.txt (the lines printed),
$OUT/results.json and logs in $OUT/logs.tgz.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TWOBS = os.environ.get("TWOBS", "target/release/twobs")
MAIN = os.environ.get("MAIN", "")
PARITY = os.environ.get("PARITY", "")
LOGB = os.environ.get("LOGB", "")
OUT = os.environ.get("OUT", "/tmp/gpu-log-buckets")
LOGS = "/tmp/gpu-log-buckets-logs"
os.makedirs(OUT, exist_ok=True)
os.makedirs(LOGS, exist_ok=True)
os.environ.setdefault("TWOBS_CACHE", "/tmp/twobs-cache")
SUMMARY = open(os.path.join(OUT, "summary.txt"), "a")
RESULTS = {}
LOG20 = ["--log-bins", "--param", "bins=20", "--param", "r_min=0.001", "--param", "r_max=0.5"]
SMU = ["--log-bins", "--param", "s_bins=20", "--param", "s_min=0.001", "--param", "s_max=0.5", "--param", "mu_bins=10"]
RPPI = ["--log-bins", "--param", "rp_bins=20", "--param", "rp_min=0.001", "--param", "rp_max=0.5",
        "--param", "pi_bins=10", "--param", "pi_max=0.5"]
failed = 0


def say(*args):
    line = " ".join(str(a) for a in args)
    print(line, flush=True)
    SUMMARY.write(line + "\n")
    SUMMARY.flush()


def sh(cmd, log, timeout=600, cwd=None):
    start = time.time()
    with open(os.path.join(LOGS, log), "w") as f:
        try:
            p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout, shell=isinstance(cmd, str),
                               cwd=cwd)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = 124
    return rc, time.time() - start


def tail(log, n=5):
    with open(os.path.join(LOGS, log)) as f:
        return "".join(f.readlines()[-n:])


def twobs(binary, name, problem, inputs, args, out=True):
    """One run; its report's timings, and where its result went."""
    result = os.path.join(LOGS, f"{name}.npy")
    report = os.path.join(LOGS, f"{name}.json")
    cmd = [binary, "run", problem, *sum((["--input", i] for i in inputs), []), *args, "--backend", "cuda",
           "--quiet", "--report", report] + (["--out", result] if out else [])
    rc, wall = sh(cmd, f"{name}.log")
    if rc != 0:
        return {"error": tail(f"{name}.log", 3), "rc": rc}
    r = json.load(open(report))
    t = r["timings"]
    h = t.get("hierarchy") or {}
    return {
        "wall_s": wall, "compute_s": t["compute_s"], "kernel_s": (t.get("gpu") or {}).get("kernel_s"),
        "index_s": t.get("index_s"), "hierarchy": h, "pairs_per_s": t["pairs_per_s"],
        "index": r["index"]["index"], "why": r["index"]["why"][:160],
        "test": [p["test"] for p in r.get("plans", [])], "variant": [p.get("variant") for p in r.get("plans", [])],
        "result": result if out else None,
    }


def same(a, b):
    import numpy as np
    return bool(np.array_equal(np.load(a), np.load(b)))


def check():
    global failed
    cases = []
    if PARITY:
        cases += [("keys", [PARITY, "keys/sdh-log"]), ("parity-sdh-log", [PARITY, "sdh-log/"]),
                  ("parity-ddsmu-log", [PARITY, "ddsmu-log"])]
    if LOGB:
        cases += [("log-buckets", [LOGB, "--nocapture", "--test-threads", "1"])]
    # The test binaries read the repository's examples where they were built
    # (CARGO_MANIFEST_DIR, linked to this checkout by the caller), from its root.
    for name, cmd in cases:
        rc, wall = sh(cmd, f"check-{name}.log", cwd=os.environ.get("REPO"))
        text = open(os.path.join(LOGS, f"check-{name}.log")).read()
        line = [l for l in text.splitlines() if l.startswith("test result")]
        gpu_skipped = "GPU cases skipped" in text
        ok = rc == 0 and line and " 0 passed" not in line[-1] and not gpu_skipped
        failed += not ok
        say(f"check {name}: {'ok' if ok else 'FAILED'} (rc {rc}, {wall:.0f} s): {line[-1] if line else tail(f'check-{name}.log')}")
        if not ok:
            for l in text.splitlines():
                if "FAILED" in l or "differ" in l or "panicked" in l:
                    say("   ", l[:300])
        RESULTS[f"check-{name}"] = {"ok": bool(ok), "rc": rc, "wall_s": wall}


def sass():
    """The kernels' SASS: instructions in each, and the shared loads, votes and atomics."""
    for name, args in [("linear50", ["--param", "bins=50"]), ("log20", LOG20)]:
        cu = os.path.join(LOGS, f"sass-{name}.cu")
        cubin = cu.replace(".cu", ".cubin")
        rc, _ = sh(f"{TWOBS} gen sdh --check --device h200 --points 1000000 {' '.join(args)} --cubin {cubin} > {cu}", f"gen-{name}.log")
        if rc != 0:
            say(f"sass {name}: gen failed: {tail(f'gen-{name}.log', 2)}")
            continue
        rc, _ = sh(f"cuobjdump -res-usage -sass {cubin} > {cu.replace('.cu', '.sass')}", f"cuobjdump-{name}.log")
        text = open(cu.replace(".cu", ".sass")).read()
        ops = [l.split("*/")[1].strip().split()[0] for l in text.splitlines() if l.strip().startswith("/*") and "*/" in l
               and len(l.split("*/")) > 2]
        count = {k: sum(o.startswith(k) for o in ops) for k in ("LDS", "ATOMS", "RED", "VOTE", "MUFU", "FSETP", "IMNMX", "SHF", "LOP3", "FFMA")}
        res = [l.strip() for l in text.splitlines() if "REG:" in l][:1]
        say(f"sass {name}: {len(ops)} instructions; {count}; {res}")


def median_runs(runs):
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    m = dict(ok[0])
    for k in ("compute_s", "kernel_s", "wall_s"):
        vals = [r[k] for r in ok if r.get(k) is not None]
        m[k] = statistics.median(vals) if vals else None
        m[k + "_all"] = vals
    return m


def clustered(n, path, seed=51):
    """twobs's clustered generator in numpy (16 Gaussian clusters, sigma 0.02, in [0, 1)), except that
    points outside the box are drawn again, not clamped to its faces: clamped points share coordinates
    exactly (pairs along an axis, mu = 1 exactly), where cucount's signed mu and twobs's |mu| differ
    by convention, not by rounding."""
    import numpy as np
    if os.path.exists(path):
        return
    rng = np.random.default_rng(seed)
    centres = rng.random((16, 3))
    x = centres[rng.integers(0, 16, 2 * n)] + rng.normal(0.0, 0.02, (2 * n, 3))
    x = x.astype(np.float32)
    x = x[((x >= 0.0) & (x < 1.0)).all(axis=1)][:n]
    assert x.shape[0] == n
    np.save(path, x)


def bench():
    global failed
    binaries = [("new", TWOBS)] + ([("main", MAIN)] if MAIN else [])
    cases = [
        ("sdh-linear50", "sdh", ["uniform:1000000"], ["--param", "bins=50", "--index", "none"]),
        ("sdh-log20", "sdh", ["uniform:1000000"], LOG20 + ["--index", "none"]),
        ("sdh-log20-values", "sdh", ["uniform:1000000"], LOG20 + ["--index", "none", "--test", "values"]),
    ]
    # Warm the kernel caches (compiles are not timed).
    for b, binary in binaries:
        for name, problem, inputs, args in cases:
            twobs(binary, f"warm-{b}-{name}", problem, ["uniform:1000"], args, out=False)
    runs = {}
    for rep in range(3):
        for name, problem, inputs, args in cases:
            for b, binary in binaries:
                if b == "main" and name == "sdh-log20-values":
                    continue
                runs.setdefault(f"{b}-{name}", []).append(twobs(binary, f"{b}-{name}-{rep}", problem, inputs, args, out=rep == 0))
    table = {k: median_runs(v) for k, v in runs.items()}
    RESULTS["bench-1m-uniform"] = table
    base = table["new-sdh-linear50"]
    for k, r in table.items():
        if "error" in r:
            failed += 1
            say(f"bench {k}: FAILED {r['error']}")
            continue
        say(f"bench 1M uniform {k:24s} kernel {r['kernel_s']:.4f} s (all {['%.4f' % x for x in r['kernel_s_all']]}) "
            f"compute {r['compute_s']:.4f} s  x{r['kernel_s'] / base['kernel_s']:.3f} of new linear50  tests {r['test']} {r['variant']}")
    pairs = [("new-sdh-log20", "new-sdh-log20-values"), ("new-sdh-log20", "main-sdh-log20"), ("new-sdh-linear50", "main-sdh-linear50")]
    for a, b in pairs:
        if a in table and b in table and table[a].get("result") and table[b].get("result"):
            s = same(table[a]["result"], table[b]["result"])
            failed += not s
            say(f"bench counts {a} == {b}: {s}")
    # DD(r), DD(s, mu), DD(rp, pi) on the same 1M clustered points.
    points = os.path.join(LOGS, "clustered-1m.npy")
    clustered(1_000_000, points)
    cases = [("dd-r", "sdh", LOG20), ("dd-smu", "ddsmu", SMU), ("dd-rppi", "ddrppi", RPPI)]
    for b, binary in binaries:
        for name, problem, args in cases:
            twobs(binary, f"warm-{b}-{name}", problem, ["uniform:1000"], args + ["--index", "none"], out=False)
    runs = {}
    for rep in range(2):
        for index in ("none", "auto"):
            for name, problem, args in cases:
                for b, binary in binaries:
                    if b == "main" and index == "auto":
                        continue
                    key = f"{b}-{name}-{index}"
                    runs.setdefault(key, []).append(
                        twobs(binary, f"{key}-{rep}", problem, [points], args + ["--index", index], out=rep == 0))
    table = {k: median_runs(v) for k, v in runs.items()}
    RESULTS["bench-1m-clustered"] = table
    for k, r in table.items():
        if "error" in r:
            failed += 1
            say(f"bench {k}: FAILED {r['error']}")
            continue
        index = k.rsplit("-", 1)[1]
        base = table.get(f"new-dd-r-{index}")
        ratio = r["compute_s"] / base["compute_s"] if base and "error" not in base else float("nan")
        say(f"bench 1M clustered {k:20s} compute {r['compute_s']:.4f} s (all {['%.4f' % x for x in r['compute_s_all']]}) "
            f"kernel {r['kernel_s']:.4f}  x{ratio:.3f} of new DD(r) {index}  index {r['index']} tests {r['test']}")
    for name, _, _ in cases:
        for a, b in [(f"new-{name}-none", f"new-{name}-auto"), (f"new-{name}-none", f"main-{name}-none")]:
            if a in table and b in table and table[a].get("result") and table[b].get("result"):
                s = same(table[a]["result"], table[b]["result"])
                failed += not s
                say(f"bench counts {a} == {b}: {s}")


def big():
    global failed
    data = ["clustered:10000000"]
    runs = {}
    twobs(TWOBS, "warm-big", "sdh", ["clustered:1000"], LOG20, out=False)
    if MAIN:
        twobs(MAIN, "warm-big-main", "sdh", ["clustered:1000"], LOG20, out=False)
    for key, binary, index in [("new-auto", TWOBS, "auto"), ("new-none", TWOBS, "none")] + (
            [("main-auto", MAIN, "auto")] if MAIN else []):
        runs[key] = twobs(binary, f"big-{key}", "sdh", data, LOG20 + ["--index", index])
        r = runs[key]
        if "error" in r:
            failed += 1
            say(f"big {key}: FAILED {r['error']}")
            continue
        say(f"big 10M clustered {key:10s} compute {r['compute_s']:.3f} s kernel {r['kernel_s']:.3f} s index {r['index_s']} "
            f"wall {r['wall_s']:.1f} s hierarchy {r['hierarchy']} index {r['index']}: {r['why'][:100]}")
    RESULTS["big"] = runs
    for a, b in [("new-auto", "new-none"), ("new-auto", "main-auto")]:
        if a in runs and b in runs and runs[a].get("result") and runs[b].get("result"):
            s = same(runs[a]["result"], runs[b]["result"])
            failed += not s
            say(f"big counts {a} == {b}: {s}")


MISMATCH_KERNEL = r"""
extern "C" __global__ void mismatch(const float* x, const float* y, const float* z, long long n,
                                    const float* e32, const double* e64, int sbins, int mubins, int smu,
                                    unsigned long long* moved, unsigned long long* listed, long long* list,
                                    long long cap, unsigned long long* dz0) {
  // Unordered pairs i > j; row i per thread, all j < i.
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float xi = x[i], yi = y[i], zi = z[i];
  const double emax = e64[sbins];
  for (long long j = 0; j < i; ++j) {
    const float dx = xi - x[j], dy = yi - y[j], dz = zi - z[j];
    // twobs: distance.cu / los.cu in f32.
    const float across = fmaf(dy, dy, dx * dx);
    const float s32 = sqrtf(fmaf(dz, dz, across));
    // cucount: doubles of the same f32 coordinates, diff = p2 - p1.
    const double Dx = (double)x[j] - (double)xi, Dy = (double)y[j] - (double)yi, Dz = (double)z[j] - (double)zi;
    const double s2 = Dx * Dx + Dy * Dy + Dz * Dz;
    if (s32 >= e32[sbins] * 1.001f && s2 >= emax * emax * 1.002) continue;
    const double s64 = sqrt(s2);
    int b32 = -1, b64 = -1;
    if (s32 >= e32[0] && s32 < e32[sbins]) { b32 = 0; while (b32 + 1 < sbins && s32 >= e32[b32 + 1]) ++b32; }
    if (s64 >= e64[0] && s64 < e64[sbins]) { b64 = 0; while (b64 + 1 < sbins && s64 >= e64[b64 + 1]) ++b64; }
    if (smu) {
      const float mu32 = s32 > 0.0f ? fabsf(dz) / s32 : 0.0f;
      const float sc = (float)mubins;  // mu in [0, 1): floor(mu * bins), as bucket.cu (scale bins / 1)
      const float xm = mu32 * sc;
      int m32 = (xm < sc) ? (int)xm : -1;
      const double mu64 = s2 == 0 ? 0.0 : fabs(Dz) / s64;
      int m64 = -1;
      for (int k = 0; k < mubins; ++k) { if (mu64 >= (double)k / mubins) m64 = k; }
      if (mu64 >= 1.0) m64 = -1;
      if (b64 >= 0 && Dz == 0.0) atomicAdd(dz0, 1ull);
      b32 = (b32 < 0 || m32 < 0) ? -1 : b32 * mubins + m32;
      b64 = (b64 < 0 || m64 < 0) ? -1 : b64 * mubins + m64;
    }
    if (b32 != b64) {
      const int slots = smu ? sbins * mubins : sbins;
      if (b32 >= 0) atomicAdd(&moved[2 * b32], 1ull);           // leaves twobs's bucket
      if (b64 >= 0) atomicAdd(&moved[2 * b64 + 1], 1ull);       // enters cucount's
      unsigned long long k = atomicAdd(listed, 1ull);
      if (k < cap) { list[4 * k] = j; list[4 * k + 1] = i; list[4 * k + 2] = b32; list[4 * k + 3] = b64; }
      (void)slots;
    }
  }
}
"""


def mismatches(points, e32, smu, mubins):
    """Pairs whose twobs (f32) and cucount-like (f64) buckets differ: per bucket, out of twobs's and into f64's."""
    import cupy as cp
    import numpy as np
    p = np.load(points)
    x, y, z = (cp.asarray(np.ascontiguousarray(p[:, c])) for c in range(3))
    n = p.shape[0]
    sbins = len(e32) - 1
    slots = sbins * (mubins if smu else 1)
    moved = cp.zeros(2 * slots, dtype=cp.uint64)
    listed = cp.zeros(1, dtype=cp.uint64)
    dz0 = cp.zeros(1, dtype=cp.uint64)
    cap = 200000
    lst = cp.zeros(4 * cap, dtype=cp.int64)
    k = cp.RawKernel(MISMATCH_KERNEL, "mismatch", options=("--fmad=false",))
    start = time.time()
    k(((n + 255) // 256,), (256,), (x, y, z, cp.int64(n), cp.asarray(np.array(e32, dtype=np.float32)),
                                  cp.asarray(np.array(e32, dtype=np.float64)), cp.int32(sbins), cp.int32(mubins),
                                  cp.int32(1 if smu else 0), moved, listed, lst, cp.int64(cap), dz0))
    cp.cuda.Device().synchronize()
    m = moved.get().reshape(slots, 2)
    count = int(listed.get()[0])
    return m[:, 0].astype(np.int64), m[:, 1].astype(np.int64), count, lst.get().reshape(cap, 4)[: min(count, cap)], \
        int(dz0.get()[0]), time.time() - start


def cucount_build():
    """Builds cucount for sm_90 into /tmp/cucount-site (its tarball into $OUT, to carry to a later call)."""
    global failed
    site = "/tmp/cucount-site"
    if os.path.exists(site):
        return True
    if os.environ.get("CUCOUNT_SITE") and os.path.exists(os.environ["CUCOUNT_SITE"]):
        os.makedirs(site)
        tarfile.open(os.environ["CUCOUNT_SITE"]).extractall(site)
        say("cucount: the build carried in")
        return True
    src = "/tmp/cucount-src"
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(os.environ["CUCOUNT_SRC"], src)
    cm = open(f"{src}/CMakeLists.txt").read().replace("set(CMAKE_CUDA_ARCHITECTURES 70 75 80)", "set(CMAKE_CUDA_ARCHITECTURES 90)")
    open(f"{src}/CMakeLists.txt", "w").write(cm)
    env = dict(os.environ, BUILD_FFI_CUCOUNT="OFF", CMAKE_BUILD_PARALLEL_LEVEL="8")
    open("/tmp/cucount-building", "w").close()
    start = time.time()
    with open(os.path.join(LOGS, "cucount-build.log"), "w") as f:
        rc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "-v",
                             "--target", site + ".partial", src], stdout=f, stderr=subprocess.STDOUT, env=env).returncode
    os.remove("/tmp/cucount-building")
    say(f"cucount: built in {time.time() - start:.0f} s (rc {rc}) for sm_90 from {os.environ['CUCOUNT_SRC']}")
    if rc != 0:
        failed += 1
        say(tail("cucount-build.log", 15))
        shutil.copy(os.path.join(LOGS, "cucount-build.log"), OUT)
        return False
    os.rename(site + ".partial", site)
    with tarfile.open(os.path.join(OUT, "cucount-site.tgz"), "w:gz") as t:
        t.add(site, arcname=".")
    return True


def cucount():
    global failed
    import numpy as np
    site = "/tmp/cucount-site"
    for _ in range(120):  # a build in the background (cucount_build) finishes first
        if not os.path.exists("/tmp/cucount-building"):
            break
        time.sleep(5)
    if not cucount_build():
        return
    sys.path.insert(0, site)
    from cucount.numpy import BinAttrs, Particles, count2
    points = os.path.join(LOGS, "clustered-1m-inside.npy")
    clustered(1_000_000, points)
    pos = np.load(points).astype(np.float64)
    part = Particles(pos)
    out = {}
    for name, problem, args, smu in [("dd-r", "sdh", LOG20, False), ("dd-smu", "ddsmu", SMU, True)]:
        # twobs first: its edges (f32, written as doubles) are the buckets cucount gets.
        tw = [twobs(TWOBS, f"cc-twobs-{name}-{rep}", problem, [points], args + ["--index", "auto"], out=rep == 0) for rep in range(2)]
        t = median_runs(tw)
        res = np.load(tw[0]["result"])
        if smu:
            sedges = np.unique(np.concatenate([res[:, 0], res[:, 1]]))
            counts = res[:, 4].reshape(len(sedges) - 1, 10)
        else:
            sedges = np.concatenate([res[:, 0], res[-1:, 1]])
            counts = res[:, 2]
        e32 = sedges.astype(np.float32)
        assert np.array_equal(e32.astype(np.float64), sedges)
        battrs = BinAttrs(s=sedges, mu=(np.linspace(-1.0, 1.0, 21), "z")) if smu else BinAttrs(s=sedges)
        times, c = [], None
        for rep in range(int(os.environ.get("CUCOUNT_REPS", "1"))):
            start = time.time()
            c = count2(part, part, battrs=battrs)
            times.append(time.time() - start)
        w = np.asarray(c["weight"], dtype=np.float64)
        if smu:
            # Ordered pairs, mu = dz / s signed: |mu| in [k/10, (k+1)/10) is half of the bins either side of 0.
            folded = (w[:, 10:] + w[:, 9::-1]) / 2.0
        else:
            folded = w / 2.0
        folded = folded.reshape(-1)
        ours = counts.reshape(-1).astype(np.int64)
        leave, enter, listed, lst, dz0, mtime = mismatches(points, e32, smu, 10)
        expected = ours - leave + enter
        diff = folded - ours
        agree = bool(np.allclose(folded, expected, rtol=0, atol=0.5 + 1e-9 * np.abs(expected)))
        ratio = statistics.median(times) / t["compute_s"]
        say(f"cucount {name}: cucount {statistics.median(times):.3f} s (all {['%.3f' % x for x in times]}) against twobs "
            f"--index auto compute {t['compute_s']:.3f} s (all {['%.3f' % x for x in t['compute_s_all']]}; index {t['index']}): "
            f"twobs {ratio:.2f}x faster; counts differ by {np.abs(diff).sum():.1f} pairs in {np.count_nonzero(diff)} buckets; "
            f"{listed} pairs have other f64 buckets (f32 rounding at an edge; {dz0} pairs with dz = 0), and cucount = twobs - out + in: {agree}")
        failed += not agree
        np.savetxt(os.path.join(OUT, f"cucount-{name}-edge-pairs.txt"), lst, fmt="%d",
                   header="i j twobs_bucket cucount_bucket (bucket = s_bin * mu_bins + mu_bin for dd-smu; -1: none)")
        out[name] = {"cucount_s": times, "twobs": t, "ratio": ratio, "listed": listed, "dz0": dz0, "agree": agree,
                     "diff_pairs": float(np.abs(diff).sum()), "mismatch_kernel_s": mtime}
    RESULTS["cucount"] = out


def main():
    parts = sys.argv[1:] or ["check", "sass", "bench", "big", "cucount"]
    subprocess.run("nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader", shell=True)
    for part in parts:
        start = time.time()
        try:
            globals()[part]()
        except Exception as e:  # noqa: BLE001 - report and go on to the next part
            global failed
            failed += 1
            say(f"{part}: FAILED with {type(e).__name__}: {e}")
        say(f"[{part}: {time.time() - start:.0f} s]")
    if parts == ["cucount_build"]:
        sys.exit(1 if failed else 0)
    json.dump(RESULTS, open(os.path.join(OUT, f"results-{'-'.join(parts)}.json"), "w"), indent=1, default=str)
    with tarfile.open(os.path.join(OUT, f"logs-{'-'.join(parts)}.tgz"), "w:gz") as t:
        t.add(LOGS, arcname="logs", filter=lambda ti: None if ti.name.endswith(".npy") and ti.size > 4 << 20 else ti)
    say(f"{failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
