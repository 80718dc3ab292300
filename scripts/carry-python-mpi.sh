#!/usr/bin/env bash
# Packs what scripts/gpu-python-ranks.sh needs on a GPU machine beside the
# MPICH bundle of scripts/carry-mpi.sh: into .mpi-carry/py, an mpi4py wheel
# for the device's Python 3.12 built from source against this machine's MPICH
# (mpicc), and the twobs wheel built with its `mpi` feature (abi3; not
# repaired: it links libmpich.so.12, which the bundle's lib/ provides there).
# Needs python3.12 here (pyenv has one) and target/py-venv (scripts/test-python.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .mpi-carry/py && echo '*' > .mpi-carry/.gitignore
rm -f .mpi-carry/py/*.whl
MPICC=mpicc python3.12 -m pip wheel --quiet --disable-pip-version-check --no-deps --no-binary=mpi4py "mpi4py==4.1.2" -w .mpi-carry/py
target/py-venv/bin/maturin build --release --locked --features mpi --auditwheel skip -o .mpi-carry/py
ls -l .mpi-carry/py
