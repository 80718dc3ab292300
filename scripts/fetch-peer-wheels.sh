#!/usr/bin/env bash
# The peers the Python benchmarks compare with, as wheels for the device
# machines' Python 3.12 (their image holds CuPy, PyTorch, JAX 0.11 with CUDA
# 13, numpy, scipy, pytest, but not these): jz-tree 1.1.0 and its CUDA 13 kernels
# (needs jax and numpy, which are there), 28 MB; freud-analysis 3.6.1 (g(r) on
# the host's cores, beside a trajectory's frames) with rowan, parsnip-cif and more-itertools, which it imports. Into target/peer-wheels
# (ignored by git); carry "target/peer-wheels".
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p target/peer-wheels
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d target/peer-wheels jztree==1.1.0 jztree-cu13==1.1.0 freud-analysis==3.6.1 rowan==1.3.2 parsnip-cif==0.4.0 more-itertools==10.8.0
ls -l target/peer-wheels
