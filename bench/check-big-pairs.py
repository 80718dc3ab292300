#!/usr/bin/env python3
"""Checks that N x 2 pair files hold the same set of pairs, whatever their
order, without sorting them: the count, and order-free sums of a 64-bit mix
of each pair (wrapping), read a chunk at a time from memory-mapped .npy files,
so that outputs of many gigabytes can be compared.

Usage: bench/check-big-pairs.py A.npy B.npy   (exit 1 where they differ)
"""
import json
import sys

import numpy as np

CHUNK = 1 << 26


def digest(path):
    pairs = np.load(path, mmap_mode="r")
    total = np.uint64(0)
    folded = np.uint64(0)
    with np.errstate(over="ignore"):
        for lo in range(0, len(pairs), CHUNK):
            part = np.asarray(pairs[lo : lo + CHUNK], dtype=np.uint64)
            h = (part[:, 0] * np.uint64(0x9E3779B97F4A7C15)) ^ (part[:, 1] * np.uint64(0xC2B2AE3D27D4EB4F))
            h ^= h >> np.uint64(29)
            h *= np.uint64(0xBF58476D1CE4E5B9)
            total += h.sum(dtype=np.uint64)
            folded ^= np.bitwise_xor.reduce(h)
    return {"file": path, "pairs": int(len(pairs)), "sum": int(total), "xor": int(folded)}


def main():
    a, b = (digest(p) for p in sys.argv[1:3])
    print(json.dumps(a))
    print(json.dumps(b))
    same = (a["pairs"], a["sum"], a["xor"]) == (b["pairs"], b["sum"], b["xor"])
    print("same pairs" if same else "DIFFERENT")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
