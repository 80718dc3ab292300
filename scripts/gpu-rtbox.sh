#!/usr/bin/env bash
# A periodic box read at run time on the GPU (issues 37 and 32: a box per
# frame compiles once): parity of the run-time box with the folded one, bit
# for bit (orthorhombic, triclinic and a cube; one and two sets; every pair
# and the grid; the CPU backend beside them), a 50-frame NPT trajectory of
# 100k atoms (box ~46.4 varying by +-1%, r_max 5, 100 bins) through the
# command line and through Python (programs compiled, compile_s, wall), and
# the run-time box's cost against the folded one on 1M points (compute_s).
#
# Here first (the device has no Rust toolchain):
#   cargo build --release --locked
#   scripts/test-python.sh --co -q >/dev/null   # makes target/py-venv once
#   target/py-venv/bin/maturin build --release --locked --auditwheel skip -o target/wheels
# Then one device call (about 4-6 minutes on one H100/H200):
#   run: scripts/gpu-rtbox.sh
#   carry: ["target/release/twobs", "target/wheels"]
# Logs: $OUT/rtbox.log (everything), $OUT/rtbox-summary.txt (PASS/FAIL/TIME
# lines). Exit status 0 only if every comparison passed.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/rtbox-out}
mkdir -p "$OUT"
BIN=${TWOBS_BIN:-$PWD/target/release/twobs}
LOG="$OUT/rtbox.log"
SUMMARY="$OUT/rtbox-summary.txt"
WORK=$(mktemp -d)
: >"$LOG"
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
FAILED=0
if [ ! -x "$BIN" ] || ! ls target/wheels/twobs-*.whl >/dev/null 2>&1; then
  say "FAIL: target/release/twobs or target/wheels/twobs-*.whl is missing (see this script's header)"
  exit 2
fi
say "device: $(nvidia-smi -L 2>/dev/null | head -1)  commit: $(git log --oneline -1 2>/dev/null)"
python3 -m pip install -q --no-index --no-deps --no-compile --target "$WORK/site" target/wheels/twobs-*.whl >>"$LOG" 2>&1 ||
  say "FAIL: the wheel did not install (see rtbox.log)"
export PYTHONPATH="$WORK/site" PYTHONUNBUFFERED=1
# A smoke run without a GPU: RTBOX_BACKEND=cpu RTBOX_ATOMS=2000 RTBOX_SCALE=0.01.
GPU=${RTBOX_BACKEND:-cuda}
ATOMS=${RTBOX_ATOMS:-100000}

# --- the command line: an extended XYZ trajectory whose Lattice changes each frame.
python3 - "$WORK/npt.xyz" "$ATOMS" <<'EOF'
import sys
import numpy as np
rng = np.random.default_rng(37)
n, frames = int(sys.argv[2]), 50
s = rng.uniform(0.0005, 0.9995, (n, 3))
with open(sys.argv[1], "w") as f:
    for k in range(frames):
        lx, ly, lz = 46.4 * (1 + rng.uniform(-0.01, 0.01, 3))
        s = np.clip(s + rng.normal(0, 1e-3, s.shape), 0.0005, 0.9995)
        f.write(f'{n}\nLattice="{lx:.6f} 0 0 0 {ly:.6f} 0 0 0 {lz:.6f}" Properties=species:S:1:pos:R:3 pbc="T T T"\n')
        xyz = s * [float(f"{lx:.6f}"), float(f"{ly:.6f}"), float(f"{lz:.6f}")]
        np.savetxt(f, xyz, fmt="O %.5f %.5f %.5f")
EOF
say "--- command line: 50 frames of $ATOMS atoms ($(du -h "$WORK/npt.xyz" | cut -f1) of extended XYZ), r_max 5, 100 bins"
# run LABEL CACHE ARGS...: one run; prints wall, the report's figures and the cache's programs.
cli() {
  local label=$1 cache=$2
  shift 2
  local t0 t1
  t0=$(date +%s.%N)
  if ! TWOBS_CACHE=$cache timeout 600 "$BIN" run rdf --input "$WORK/npt.xyz" --param r_max=5 --param bins=100 \
    --quiet --out "$WORK/$label.csv" --report "$WORK/$label.json" "$@" >>"$LOG" 2>&1; then
    say "FAIL cli $label: the run failed (rtbox.log)"
    FAILED=$((FAILED + 1))
    return
  fi
  t1=$(date +%s.%N)
  python3 - "$WORK/$label.json" "$label" "$t0" "$t1" "$cache" <<'EOF' | tee -a "$SUMMARY"
import json, os, sys
r = json.load(open(sys.argv[1])); t = r["timings"]
sys.argv[3:5] = [float(sys.argv[4]) - float(sys.argv[3])]
cubins = sum(1 for d, _, fs in os.walk(sys.argv[4]) for f in fs if f.endswith((".cubin", ".so")))
print(f"TIME cli {sys.argv[2]}: wall {float(sys.argv[3]):.3f} s, total_s {t['total_s']:.3f}, compute_s {t['compute_s']:.4f}, "
      f"compile_s {t['compile_s']:.3f}, box_time {r['box_time']}, compiled programs in the cache {cubins}, "
      f"backend {r['backend']}, notes: {'; '.join(n for n in r['notes'] if 'box' in n)}")
EOF
}
echo "== cache files after each run" >>"$LOG"
cli npt-cold "$WORK/cache-npt" --backend "$GPU"
ls -l "$WORK/cache-npt"/* >>"$LOG" 2>&1
cli npt-warm "$WORK/cache-npt" --backend "$GPU"
# The same frames with one box for all (--param box: folded, as before this change), for compute_s.
cli onebox-cold "$WORK/cache-one" --backend "$GPU" --param box=46.4
cli onebox-warm "$WORK/cache-one" --backend "$GPU" --param box=46.4
# The CPU backend on the same trajectory (its own run-time driver): the same counts.
cli npt-cpu "$WORK/cache-cpu" --backend cpu
if cmp -s "$WORK/npt-cold.csv" "$WORK/npt-cpu.csv" && cmp -s "$WORK/npt-cold.csv" "$WORK/npt-warm.csv"; then
  say "PASS cli: the GPU's 50-frame run-time trajectory equals the CPU backend's, byte for byte"
else
  say "FAIL cli: the GPU's trajectory differs from the CPU backend's"
  diff "$WORK/npt-cold.csv" "$WORK/npt-cpu.csv" | head -20 >>"$LOG"
  FAILED=$((FAILED + 1))
fi

# --- Python: parity, the trajectory through RDF.compute, and the cost on 1M points.
export TWOBS_CACHE="$WORK/cache-python"
timeout 420 python3 scripts/gpu-rtbox.py 2>&1 | tee -a "$LOG" | grep -E "^(PASS|FAIL|TIME|---)" >>"$SUMMARY"
rc=${PIPESTATUS[0]}
if [ "$rc" != 0 ]; then
  say "FAIL python: scripts/gpu-rtbox.py exited $rc"
  FAILED=$((FAILED + 1))
fi
say "--- $FAILED failure(s) in the shell's checks; python exit $rc"
cat "$SUMMARY"
rm -rf "$WORK"
[ "$FAILED" = 0 ] && [ "$rc" = 0 ]
