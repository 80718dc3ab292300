#!/usr/bin/env python3
"""How fast a host core runs right after it sat idle (issue 32's second call:
after the first call's NVRTC, every host step of the second ran about twice
as slow as in the calls after it). After an idle pause of each length, the
same fixed work runs five times back to back; if the first run is slower
than the fifth after long pauses only, the core's clock or sleep state (not
the caches of the run's data) is what a cold call pays.

Two kinds of work: a pure-Python loop (a few KB of code and data: the
clock) and a 1.2 MB copy between two numpy arrays kept for the whole probe
(100k 3-D f32 points, the size of the second call's take).

Usage: scripts/probe-host-wake.py  (prints a table; $OUT/host-wake.jsonl)"""
import json
import os
import statistics
import time

import numpy as np

OUT = os.environ.get("OUT", ".")
ROUNDS = 15
src = np.random.default_rng(2026).random((100_000, 3), dtype=np.float32)
dst = np.empty_like(src)


def loop():
    t = time.perf_counter()
    s = 0
    for i in range(20_000):
        s += i
    return time.perf_counter() - t


def copy():
    t = time.perf_counter()
    np.copyto(dst, src)
    return time.perf_counter() - t


def busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


log = open(os.path.join(OUT, "host-wake.jsonl"), "w")
print(f"{'work':>5} {'pause':>12} {'1st us':>8} {'2nd us':>8} {'5th us':>8}  (medians of {ROUNDS})")
for work in (loop, copy):
    for label, pause in (("sleep 0", lambda: None), ("sleep 2 ms", lambda: time.sleep(0.002)),
                         ("sleep 20 ms", lambda: time.sleep(0.02)), ("sleep 300 ms", lambda: time.sleep(0.3)),
                         ("busy 300 ms", lambda: busy(0.3))):
        runs = []
        for _ in range(ROUNDS):
            pause()
            runs.append([work() for _ in range(5)])
        med = [1e6 * statistics.median(r[k] for r in runs) for k in range(5)]
        log.write(json.dumps({"work": work.__name__, "pause": label, "medians_us": med}) + "\n")
        print(f"{work.__name__:>5} {label:>12} {med[0]:8.1f} {med[1]:8.1f} {med[4]:8.1f}", flush=True)
