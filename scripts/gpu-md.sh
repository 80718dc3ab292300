#!/usr/bin/env bash
# The GPU checks of the MD inputs (issue 37), on a GPU machine, from the
# repository root, with the binaries scripts/build-device.sh makes:
#  1. target/release/parity, the cases with pairs of one molecule excluded
#     (`exclude-molecule`: rdf of one and two sets, 2pcf, selfjoin), every
#     plan variant, each on fresh random data against the CPU backend;
#  2. the command line on the MD files of tests/data/md-peer (a LAMMPS dump of
#     three frames in three boxes, and a .gro), partial g(r) with and without
#     molecules excluded, on the GPU with --verify (against the CPU backend),
#     and the counts compared with MDAnalysis's InterRDF as recorded there;
#     (the boxes are too small for a grid of cells: the parity cases walk grids).
# Logs go to $OUT/gpu-md (or the folder given); prints "N passed, N failed".
#
#   scripts/build-device.sh      # here
#   run: scripts/gpu-md.sh       # there, carry target/release/{twobs,parity,kernels}
set -uo pipefail
cd "$(dirname "$0")/.."
TWOBS=${TWOBS:-target/release/twobs}
PARITY=${PARITY:-target/release/parity}
LOG=${1:-${OUT:-/tmp}/gpu-md}
mkdir -p "$LOG"
export TWOBS_CACHE=${TWOBS_CACHE:-/tmp/twobs-cache}
nvidia-smi -L >"$LOG/gpus.txt" 2>&1 || true

passed=0
failed=0

"$PARITY" exclude-molecule --test-threads 4 >"$LOG/parity.log" 2>&1
parity_rc=$?
grep -E "TWOBS_TEST_SEED|FAILED|^test result" "$LOG/parity.log"
grep -A3 -E "^---- " "$LOG/parity.log" | head -40
if [[ $parity_rc -eq 0 ]] && grep -q "^test result: ok" "$LOG/parity.log" && ! grep -q " 0 passed" "$LOG/parity.log"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
fi

# Each recorded InterRDF case on the GPU, verified against the CPU and compared with MDAnalysis.
DATA=tests/data/md-peer
cases=$(python3 -c 'import json; [print(k) for k in range(len(json.load(open("'$DATA'/mdanalysis.json"))["cases"]))]')
for k in $cases; do
  for index in auto none; do
    read -r file types exclude bins r_max topology < <(python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["cases"][int(sys.argv[2])]
print(c["file"], c["types"], int(c["exclude_molecule"]), c["bins"], c["r_max"], c.get("topology", "-"))' "$DATA/mdanalysis.json" "$k")
    name="$file-$types-exclude$exclude-$index"
    log="$LOG/${name//[^A-Za-z0-9_.-]/_}.log"
    out="$LOG/${name//[^A-Za-z0-9_.-]/_}.csv"
    args=(run rdf --input "$DATA/$file" --types "$types" --param "r_max=$r_max" --param "bins=$bins"
          --backend cuda --verify --index "$index" --out "$out" --report "$out.json")
    [[ $exclude == 1 ]] && args+=(--exclude-same molecule)
    [[ $topology != - ]] && args+=(--topology "$DATA/$topology")
    if ! timeout 300 "$TWOBS" "${args[@]}" >"$log" 2>&1; then
      failed=$((failed + 1))
      printf 'FAIL  %-44s %s\n' "$name" "$(grep -m1 -E 'error|panicked' "$log" | cut -c1-300)"
      continue
    fi
    if python3 - "$DATA/mdanalysis.json" "$k" "$out" "$out.json" >>"$log" 2>&1 <<'EOF'
import csv, json, sys
c = json.load(open(sys.argv[1]))["cases"][int(sys.argv[2])]
mine = [int(r["count"]) for r in csv.DictReader(open(sys.argv[3]))]
theirs = [n // 2 if c["both_orders"] else n for n in c["counts"]]
report = json.load(open(sys.argv[4]))
print("backend", report.get("backend"), "verified:", report.get("verified"))
assert report.get("backend") == "cuda", report.get("backend")
assert mine == theirs, f"twobs {mine} against InterRDF {theirs}"
EOF
    then
      passed=$((passed + 1))
      printf 'PASS  %-44s %s pairs, as InterRDF; %s\n' "$name" "$(python3 -c 'import csv,sys; print(sum(int(r["count"]) for r in csv.DictReader(open(sys.argv[1]))))' "$out")" \
        "$(python3 -c 'import json,sys; print(str(json.load(open(sys.argv[1])).get("verified"))[:70])' "$out.json")"
    else
      failed=$((failed + 1))
      printf 'FAIL  %-44s %s\n' "$name" "$(tail -1 "$log" | cut -c1-300)"
    fi
  done
done
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
