#!/usr/bin/env bash
# A session's second call (its target: within 1 ms of the first call's
# compute), over ROUNDS fresh processes per wheel, each with a fresh kernel
# cache (so that its first call compiles with NVRTC, as a user's first
# session does): the session case of python-calls.py. One process gives one
# second call, so the medians over the rounds are what is compared. The
# wheels take turns round by round, so that a drift of the host's state
# falls on each alike.
#   WHEELS="target/wheels target/wheels-base" ROUNDS=5 THREADS= CACHE=fresh bench/second-call.sh
# Each wheel's label is its folder's name; an entry DIR@NAME=VALUE runs
# DIR's wheel with that environment variable set (label DIR-VALUE), so one
# wheel can take turns with itself under a probe build's switch. THREADS
# sets RAYON_NUM_THREADS (unset: every core). CACHE=warm keeps each entry's
# kernel cache from a run before the rounds (the first call reads its
# kernels from the disk, as every session after a machine's first does)
# instead of a fresh one each round. Carry the wheel folders; writes
# $OUT/LABEL-R.jsonl (and the engine's stderr as $OUT/LABEL-R.err) and
# prints each round and the medians (ms).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/second-call}; mkdir -p "$OUT"
WHEELS=${WHEELS:-target/wheels}; ROUNDS=${ROUNDS:-5}; CACHE=${CACHE:-fresh}
LABELS=(); declare -A SITE SETS
for entry in $WHEELS; do
  wheels=${entry%%@*}; site=$(basename "$wheels"); set=; label=$site
  if [[ $entry == *@* ]]; then set=${entry#*@}; label=$site-${set#*=}; fi
  LABELS+=("$label"); SITE[$label]=$site; SETS[$label]=$set
  [[ -d /tmp/site-$site/twobs ]] ||
    python3 -m pip install -q --no-index --no-deps --no-compile --target "/tmp/site-$site" "$wheels"/twobs-*.whl
done
one() {  # label, round: one fresh process's calls
  local label=$1
  ${THREADS:+env RAYON_NUM_THREADS=$THREADS} env ${SETS[$label]} TWOBS_CACHE="/tmp/second-call-cache-$label" \
    PYTHONPATH="/tmp/site-${SITE[$label]}" OUT="$OUT" \
    timeout 120 python3 bench/python-calls.py session > /dev/null 2> "$OUT/$label-$2.err"
  mv "$OUT/python-calls.jsonl" "$OUT/$label-$2.jsonl"
}
for label in "${LABELS[@]}"; do
  rm -rf "/tmp/second-call-cache-$label"
  [[ $CACHE == warm ]] && one "$label" 0
done
for round in $(seq 1 "$ROUNDS"); do
  for label in "${LABELS[@]}"; do
    [[ $CACHE == warm ]] || rm -rf "/tmp/second-call-cache-$label"
    one "$label" "$round"
  done
done
echo "cache: $CACHE"
python3 - "$OUT" "$ROUNDS" "${LABELS[@]}" <<'PY'
import json, statistics, sys
out, rounds, labels = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
keys = ("wall_s", "take_s", "grid_s", "prepare_s", "upload_s", "kernel_s")
for label in labels:
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
