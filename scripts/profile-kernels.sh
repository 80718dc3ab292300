#!/usr/bin/env bash
# Nsight Compute on the planner's kernels of issue 10's cases (1M uniform
# points), on the GPU machine: where the issue slots go (pipe use, scheduler
# issue rate, warp stall reasons, executed instructions), one kernel launch
# a case; then every launch of the run, its executed instructions a pair.
# Logs in $OUT/ncu/<case>.txt. COUNT_ONLY=1: the instructions a pair alone.
# Usage: OUT=dir [COUNT_ONLY=1] scripts/profile-kernels.sh [CASE...]   (cases: sdh-50 sdh-500 rdf-open rdf-periodic 2pcf)
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?OUT: where the logs go}"
TWOBS=${TWOBS:-target/release/twobs}
export TWOBS_CACHE=${TWOBS_CACHE:-/tmp/twobs-cache}
mkdir -p "$OUT/ncu"
N=${N:-1000000}
cases=("$@")
[[ ${#cases[@]} -gt 0 ]] || cases=(sdh-500 rdf-open rdf-periodic 2pcf)
for c in "${cases[@]}"; do
  case $c in
    sdh-50) kernel=twobs_sdh args=(sdh --input "uniform:$N" --param bins=50) ;;
    sdh-500) kernel=twobs_sdh args=(sdh --input "uniform:$N" --param bins=500) ;;
    rdf-open) kernel=twobs_rdf args=(rdf --input "uniform:$N" --input "uniform:$N" --param box=0 --param r_max=0.5) ;;
    rdf-periodic) kernel=twobs_rdf args=(rdf --input "uniform:$N" --input "uniform:$N" --param box=1 --param r_max=0.5) ;;
    2pcf) kernel=twobs_2pcf args=(2pcf --input "uniform:$N" --param r=0.1 --index none) ;;
    *) echo "unknown case $c"; continue ;;
  esac
  echo "== $c"
  run=("$TWOBS" run "${args[@]}" --backend cuda --quiet --seed 7 --out "$OUT/ncu/$c.npy")
  # Compile once outside the profiler, so that the profiled run finds the kernel cached.
  "${run[@]}" >/dev/null 2>&1
  [[ -n ${COUNT_ONLY:-} ]] || ncu --clock-control none -k "$kernel" -c 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats \
    --section WarpStateStats --section InstructionStats --section Occupancy --section LaunchStats \
    --metrics smsp__inst_executed_pipe_alu.sum,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_pipe_fmaheavy.sum,smsp__inst_executed_pipe_lsu.sum,smsp__inst_executed_pipe_xu.sum,smsp__inst_executed_pipe_cbu.sum,smsp__inst_executed_pipe_adu.sum,smsp__inst_executed_pipe_uniform.sum,smsp__inst_executed.sum,smsp__cycles_active.avg,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__warps_eligible.avg.per_cycle_active,smsp__warps_active.avg.per_cycle_active,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio \
    "${run[@]}" >"$OUT/ncu/$c.txt" 2>&1
  # Every launch of the run, its executed instructions: divided by the run's pairs, what a pair costs in all.
  ncu --clock-control none -k "$kernel" --metrics smsp__inst_executed.sum,gpu__time_duration.sum --csv \
    "${run[@]}" --report "$OUT/ncu/$c.json" >"$OUT/ncu/$c-all.csv" 2>&1
  python3 - "$OUT/ncu/$c-all.csv" "$OUT/ncu/$c.json" <<'PY'
import csv, json, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
head, rows = rows[0], rows[1:]
name, value = head.index("Metric Name"), head.index("Metric Value")
inst = sum(float(r[value].replace(",", "")) for r in rows if r[name] == "smsp__inst_executed.sum")
pairs = int(json.load(open(sys.argv[2]))["pairs"])
print(f"all launches: {inst:.4g} warp instructions, {pairs} pairs: {inst * 32 / pairs:.2f} instructions a pair")
PY
  rm -f "$OUT/ncu/$c".npy "$OUT/ncu/$c"_*
  [[ -n ${COUNT_ONLY:-} ]] || grep -E "stalled|warps_eligible|warps_active|Issue Slots Busy|Issued Ipc|No Eligible|Warp Cycles Per Issued|pipe_|inst_executed.sum|issue_active|Duration|Achieved Occupancy|Block Size|Grid Size|Registers Per" "$OUT/ncu/$c.txt" | head -60
done
