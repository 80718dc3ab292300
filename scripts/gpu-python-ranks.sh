#!/usr/bin/env bash
# The Python package's comm= on two GPUs (issue 34), on a device machine of
# two GPUs: installs the wheels of .mpi-carry/py (mpi4py 4.1.2 built here
# against MPICH, and twobs built with `maturin build --release --features
# mpi`; the device's Python 3.12 and numpy) in a venv, unpacks MPICH from
# .mpi-carry/bundle.tar.xz (scripts/carry-mpi.sh), and runs
# scripts/gpu-python-ranks.py under mpiexec -n 2, one GPU a rank. Log in $OUT.
# Here first: cargo build --release --features mpi && scripts/carry-mpi.sh &&
# scripts/carry-python-mpi.sh; then from the checkout the device call sends
# (it must hold this script and .mpi-carry):
#   run (kind nvidia-h100-x2, carry .mpi-carry): scripts/gpu-python-ranks.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-python-ranks}; mkdir -p "$OUT"
mkdir -p /tmp/mpi && tar -xJf .mpi-carry/bundle.tar.xz -C /tmp/mpi
export PATH=/tmp/mpi/bin:$PATH LD_LIBRARY_PATH=/tmp/mpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TWOBS_CACHE=/tmp/twobs-cache UCX_TLS=${UCX_TLS:-self,sm}
python3 -m venv --system-site-packages /tmp/pyranks
/tmp/pyranks/bin/pip install --quiet --no-index --no-deps .mpi-carry/py/*.whl 2>&1 | tail -3
cat > /tmp/mpi/bin/on-rank-gpu-python <<'ON'
#!/bin/sh
export CUDA_VISIBLE_DEVICES=${PMI_RANK:?not started by mpiexec}
exec /tmp/pyranks/bin/python "$@"
ON
chmod +x /tmp/mpi/bin/on-rank-gpu-python
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpus.txt"
mpiexec -n 2 on-rank-gpu-python scripts/gpu-python-ranks.py 2>&1 | tee "$OUT/gpu-python-ranks.log"
echo "rc=${PIPESTATUS[0]}" | tee -a "$OUT/gpu-python-ranks.log"
