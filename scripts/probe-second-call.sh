#!/usr/bin/env bash
# A session's second call (issue 32: within 1 ms of the first call's
# compute), over ROUNDS fresh processes, each with a fresh kernel cache (so
# that its first call compiles with NVRTC, as a user's first session does):
# the session case of bench-python.py. One process gives one second call, so
# the medians over the rounds are what is compared.
#   WHEELS=target/wheels LABEL=new ROUNDS=5 THREADS= scripts/probe-second-call.sh
# THREADS sets RAYON_NUM_THREADS (unset: every core). Carry the wheel folder;
# writes $OUT/LABEL-R.jsonl and prints each round and the medians (ms).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/second-call}; mkdir -p "$OUT"
WHEELS=${WHEELS:-target/wheels}; LABEL=${LABEL:-$(basename "$WHEELS")}; ROUNDS=${ROUNDS:-5}
SITE=/tmp/site-$LABEL
[[ -d $SITE/twobs ]] || python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$WHEELS"/twobs-*.whl
for round in $(seq 1 "$ROUNDS"); do
  rm -rf /tmp/probe-cache
  ${THREADS:+env RAYON_NUM_THREADS=$THREADS} env TWOBS_CACHE=/tmp/probe-cache PYTHONPATH=$SITE OUT=$OUT \
    timeout 120 python3 scripts/bench-python.py session > /dev/null 2>&1
  mv "$OUT/bench-python.jsonl" "$OUT/$LABEL-$round.jsonl"
done
python3 - "$OUT" "$LABEL" "$ROUNDS" <<'PY'
import json, statistics, sys
out, label, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
keys = ("wall_s", "take_s", "grid_s", "prepare_s", "upload_s", "kernel_s")
seconds, targets = [], []
for r in range(1, rounds + 1):
    rows = [json.loads(l) for l in open(f"{out}/{label}-{r}.jsonl") if '"session"' in l]
    first, second = rows[0], rows[1]
    target = first["compute_s"] + 1e-3
    seconds.append(second["wall_s"]); targets.append(target)
    print(f"{label} round {r}: first compute {1e3 * first['compute_s']:.3f} (compile {1e3 * first['compile_s']:.1f});",
          "2nd", " ".join(f"{k[:-2]} {1e3 * second[k]:.3f}" for k in keys),
          f"-> {'within' if second['wall_s'] <= target else 'over'} {1e3 * target:.3f}")
print(f"{label}: 2nd call median {1e3 * statistics.median(seconds):.3f} ms against first's compute + 1 median "
      f"{1e3 * statistics.median(targets):.3f} ms; within in {sum(s <= t for s, t in zip(seconds, targets))} of {rounds}")
PY
