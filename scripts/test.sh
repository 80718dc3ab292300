#!/usr/bin/env bash
# The whole test suite on a fresh machine (no GPU needed): the Rust tests, then
# the Python package's (scripts/test-python.sh). NVRTC compiles every
# kernel the generator can emit, so the suite needs libnvrtc: this script
# installs CUDA 13.0's NVRTC from PyPI into target/nvrtc when it is missing and
# puts it on the library path, where cudarc finds it.
#
# Then the MPI ranks' tests (tests/ranks.rs): an MPI is installed
# (scripts/install-mpi.sh) and the build with `--features mpi` runs every
# built-in under `mpiexec -n 1, 2, 4` against one process; then the Python
# package's `comm=` (python/tests/test_mpi.py) with mpi4py on the same MPI. With arguments
# (a filter, say) only `cargo test "$@"` and the Python tests run, and the script says so.
set -euo pipefail
cd "$(dirname "$0")/.."

NVRTC_VERSION=13.0.88   # the CUDA 13.0 the device machines run
NVRTC_DIR="${TWOBS_NVRTC_DIR:-$PWD/target/nvrtc}"
NVRTC_LIB="$NVRTC_DIR/nvidia/cu13/lib"
if [[ ! -e "$NVRTC_LIB/libnvrtc.so.13" ]]; then
  echo "installing nvidia-cuda-nvrtc==$NVRTC_VERSION into $NVRTC_DIR" >&2
  python3 -m pip install --quiet --disable-pip-version-check --no-deps \
    --target "$NVRTC_DIR" "nvidia-cuda-nvrtc==$NVRTC_VERSION"
fi
export LD_LIBRARY_PATH="$NVRTC_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

cargo test --locked "$@"
# The Python package, against the command line `cargo test` just built.
TWOBS_CLI_BUILT=1 scripts/test-python.sh

if [[ $# -gt 0 ]]; then
  echo "test.sh: the MPI ranks' tests did not run (arguments were given); scripts/test.sh alone runs them" >&2
  exit 0
fi
scripts/install-mpi.sh
start=$SECONDS
cargo test --locked --features mpi --test ranks
echo "test.sh: the MPI ranks' tests (build and run) took $((SECONDS - start)) s" >&2
start=$SECONDS
scripts/test-python.sh --mpi python/tests/test_mpi.py
echo "test.sh: the Python package's comm= tests (build and run) took $((SECONDS - start)) s" >&2
