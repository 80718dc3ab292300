#!/usr/bin/env bash
# A session's second call (issue 32) as rayon's pool size changes: each run a
# fresh process and a fresh kernel cache (so its first call compiles with
# NVRTC, as a user's first call does), the session case of bench-python.py.
# Carry target/wheels; writes $OUT/threads-T-R.jsonl and prints the 2nd
# call's wall, take, grid, prepare and upload (ms).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/second-call}; mkdir -p "$OUT"
[[ -d /tmp/site/twobs ]] || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site target/wheels/twobs-*.whl
for round in 1 2 3; do
  for threads in ${THREADS:-16 4 1}; do
    rm -rf /tmp/probe-cache
    RAYON_NUM_THREADS=$threads TWOBS_CACHE=/tmp/probe-cache PYTHONPATH=/tmp/site OUT=$OUT \
      timeout 120 python3 scripts/bench-python.py session > /dev/null 2>&1
    mv "$OUT/bench-python.jsonl" "$OUT/threads-$threads-$round.jsonl"
    python3 - "$OUT/threads-$threads-$round.jsonl" "$threads" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"session"' in l]
first, second, rest = rows[0], rows[1], rows[2:]
ms = lambda r, k: f"{1e3 * r[k]:.3f}"
med = lambda k: f"{1e3 * statistics.median(r[k] for r in rest):.3f}"
keys = ("wall_s", "take_s", "grid_s", "prepare_s", "upload_s")
print(f"threads {sys.argv[2]}: first compute {ms(first, 'compute_s')} (compile {ms(first, 'compile_s')});",
      "2nd", " ".join(f"{k[:-2]} {ms(second, k)}" for k in keys), "| 3rd+ medians", " ".join(f"{k[:-2]} {med(k)}" for k in keys))
PY
  done
done
