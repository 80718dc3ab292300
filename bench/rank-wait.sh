#!/usr/bin/env bash
# The CPU time a waiting MPI rank takes: under `mpiexec -n 2`,
# rank 0 reads a CSV of POINTS points (seconds) while rank 1 waits for what
# it sends, then both sort a grid whose pairs are few (rdf to r_max =
# 0.001): rank 1's wall time is mostly waiting. A wait in MPICH's blocking
# calls polls, and takes a core for as long; twobs's waits probe or test a
# nonblocking request with sleeps between (src/ranks/mpi.rs, `wait_for`).
# Prints each rank's wall, user and system seconds (GNU time).
# Usage: bench/rank-wait.sh [twobs built with --features mpi] (POINTS=1000000)
set -euo pipefail
bin=$(realpath "${1:-target/debug/twobs}")
ldd "$bin" | grep -q libmpich || { echo "$bin was built without --features mpi" >&2; exit 1; }
points=${POINTS:-1000000}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
python3 - "$points" > "$work/a.csv" <<'PY'
import random, sys
r = random.Random(20261126)
sys.stdout.write("".join(f"{r.random():.7f},{r.random():.7f},{r.random():.7f}\n" for _ in range(int(sys.argv[1]))))
PY
cd "$work"
run='exec /usr/bin/time -f "rank $PMI_RANK: wall %e s, user %U s, system %S s, CPU %P" "$0" run rdf --input a.csv --param r_max=0.001 --param bins=10 --backend cpu --threads 1 --quiet --out "h$PMI_RANK.csv"'
mpiexec -n 2 sh -c "$run" "$bin" 2>&1 | sort
