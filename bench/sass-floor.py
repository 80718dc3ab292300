#!/usr/bin/env python3
"""The instruction floor of a kernel's pair loop, counted from its SASS.

Disassembles a CUBIN with cuobjdump, finds the innermost loops (a branch back
to an earlier address) and counts the instructions of the pair loop by pipe. Pairs per iteration come
from a marker opcode that occurs once per pair (MUFU.RSQ for the built-ins'
sqrtf on values; pass --pairs N where there is none). Blocks a forward branch
skips that hold a CALL (sqrtf's slow path for denormal and special inputs)
are left out: the count is the path every ordinary pair takes. Every instruction takes
one issue slot of a warp scheduler, so the floor of a kernel of P pairs is
P x instructions per pair / (SMs x 4 schedulers x 32 lanes x clock), and the
FP32 floor counts only the FP32 pipe's instructions against SMs x 128 lanes.

Usage: bench/sass-floor.py CUBIN --pairs-total P [--marker MUFU.RSQ | --pairs N]
       [--sms 132] [--clock-ghz 1.98]
Prints one JSON line.
"""
import argparse
import json
import re
import subprocess

FP32 = ("FADD", "FMUL", "FFMA", "FMNMX", "FSETP", "FSEL", "FSET", "FCHK", "FRND", "F2F", "FSWZADD")
SFU = ("MUFU",)
MEMORY = ("LDS", "LDG", "LD", "STS", "STG", "ST", "ATOMS", "ATOMG", "ATOM", "RED", "LDC", "LDSM", "SHFL")
CONTROL = ("BRA", "BSSY", "BSYNC", "EXIT", "BAR", "WARPSYNC", "YIELD", "NOP", "CALL", "RET", "BRX", "JMP")

LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z0-9_.]+)([^;]*);")


def instructions(cubin):
    text = subprocess.run(["cuobjdump", "-sass", cubin], check=True, capture_output=True, text=True).stdout
    out = []
    for line in text.splitlines():
        m = LINE.search(line)
        if m:
            out.append((int(m.group(1), 16), m.group(3), m.group(4)))
    return out


def innermost_loops(ins):
    loops = []
    for addr, op, args in ins:
        if op.startswith("BRA"):
            target = re.search(r"0x([0-9a-f]+)", args)
            if target and int(target.group(1), 16) <= addr:
                loops.append((int(target.group(1), 16), addr))
    return [l for l in loops if not any(o != l and l[0] <= o[0] and o[1] <= l[1] for o in loops)]


def pipe(op):
    base = op.split(".")[0]
    if base in FP32:
        return "fp32"
    if base in SFU:
        return "sfu"
    if base in MEMORY:
        return "memory"
    if base in CONTROL:
        return "control"
    return "integer"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cubin")
    ap.add_argument("--pairs-total", type=float, required=True)
    ap.add_argument("--marker", default="MUFU.RSQ")
    ap.add_argument("--pairs", type=int)
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--clock-ghz", type=float, default=1.98)
    a = ap.parse_args()
    ins = instructions(a.cubin)
    loops = innermost_loops(ins)
    if not loops:
        raise SystemExit(f"{a.cubin}: no loop found")
    candidates = []
    for lo, hi in loops:
        body = [(addr, op) for addr, op, _ in ins if lo <= addr <= hi]
        # The fast path: a forward branch that skips a block holding a CALL
        # (sqrtf's slow path, taken only for denormal and special inputs)
        # skips it at run time.
        slow = set()
        for addr, op, args in ins:
            target = re.search(r"0x([0-9a-f]+)", args) if op.startswith("BRA") else None
            if target and lo <= addr < int(target.group(1), 16) <= hi + 16:
                skipped = [(a2, o2) for a2, o2 in body if addr < a2 < int(target.group(1), 16)]
                if any(o2.startswith("CALL") for _, o2 in skipped):
                    slow.update(a2 for a2, _ in skipped)
        body = [(addr, op) for addr, op in body if addr not in slow]
        pairs = a.pairs or sum(1 for _, op in body if op.startswith(a.marker))
        if pairs:
            candidates.append((len(body) / pairs, lo, hi, body, pairs))
    if not candidates:
        raise SystemExit(f"{a.cubin}: no loop holds {a.marker}; pass --pairs")
    # Interior tiles (no bounds tests) take almost every pair: the loop with
    # the fewest instructions a pair is theirs.
    _, lo, hi, body, pairs = min(candidates)
    counts = {}
    for _, op in body:
        counts[pipe(op)] = counts.get(pipe(op), 0) + 1
    issue_rate = a.sms * 4 * 32 * a.clock_ghz * 1e9
    fp32_rate = a.sms * 128 * a.clock_ghz * 1e9
    per_pair = len(body) / pairs
    fp32_per_pair = counts.get("fp32", 0) / pairs
    print(json.dumps({
        "cubin": a.cubin,
        "loop": [hex(lo), hex(hi)],
        "other_loops": [[hex(l), hex(h), round(c, 2)] for c, l, h, _, _ in sorted(candidates) if (l, h) != (lo, hi)],
        "loop_instructions": len(body),
        "pairs_per_iteration": pairs,
        "by_pipe": counts,
        "opcodes": dict(sorted({op: sum(1 for _, o in body if o == op) for _, op in body}.items())),
        "instructions_per_pair": round(per_pair, 2),
        "fp32_per_pair": round(fp32_per_pair, 2),
        "issue_floor_s": round(a.pairs_total * per_pair / issue_rate, 4),
        "fp32_floor_s": round(a.pairs_total * fp32_per_pair / fp32_rate, 4),
    }))


if __name__ == "__main__":
    main()
