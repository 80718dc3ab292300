#!/usr/bin/env bash
# Why a session's second call runs colder than the calls after it (issue
# 32), in one device call: the host's CPU and idle states, how fast a core
# runs after an idle pause (scripts/probe-host-wake.py), and the second call
# over fresh processes (scripts/probe-second-call.sh) for each entry of
# WHEELS (a wheel folder, or FOLDER@NAME=VALUE for a probe build's switch),
# first with a fresh kernel cache a process (its first call compiles with
# NVRTC), then with a kept one (its first call reads the disk cache).
#   run (carry the wheel folders): WHEELS="target/wheels target/wheels@TWOBS_PROBE_X=y" ROUNDS=9 \
#     scripts/gpu-second-call-causes.sh
# Logs in $OUT: host.txt, host-wake.txt, fresh/ and warm/ (the probe's rounds), summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/second-call-causes}; mkdir -p "$OUT"
{
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
  lscpu | grep -E "Model name|^CPU\(s\)|Thread|Core|Socket|NUMA node\(s\)|L2|L3|MHz"
  echo "governor: $(cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>&1)"
  echo "idle driver: $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>&1)"
  for s in /sys/devices/system/cpu/cpu0/cpuidle/state*; do
    [[ -d $s ]] && echo "idle state $(cat "$s/name") latency $(cat "$s/latency") us"
  done
  nproc
} > "$OUT/host.txt" 2>&1
cat "$OUT/host.txt"
OUT="$OUT" python3 scripts/probe-host-wake.py 2>&1 | tee "$OUT/host-wake.txt"
for cache in fresh warm; do
  mkdir -p "$OUT/$cache"
  CACHE=$cache OUT="$OUT/$cache" WHEELS="$WHEELS" ROUNDS="${ROUNDS:-9}" scripts/probe-second-call.sh \
    > "$OUT/$cache/rounds.txt" 2>&1
  grep -E "median|cache:" "$OUT/$cache/rounds.txt"
done | tee "$OUT/summary.txt"
