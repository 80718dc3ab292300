#!/usr/bin/env bash
# The whole test suite on a fresh machine (no GPU needed): the Rust tests, then
# the Python package's (scripts/test-python.sh). NVRTC compiles every
# kernel the generator can emit, so the suite needs libnvrtc: this script
# installs CUDA 13.0's NVRTC from PyPI into target/nvrtc when it is missing and
# puts it on the library path, where cudarc finds it.
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
# The Python package, against the command line just built.
scripts/test-python.sh
