#!/usr/bin/env bash
# cuobjdump and nvdisasm for reading SASS without a GPU or a CUDA toolkit
# (bench/sass-floor.py): installs NVIDIA's PyPI wheels into target/tools
# when missing and prints the directory to put on PATH.
#
# Usage: PATH="$(scripts/sass-tools.sh):$PATH" bench/floors.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="$PWD/target/tools"
if [[ ! -x "$DIR/bin/cuobjdump" || ! -x "$DIR/bin/nvdisasm" ]]; then
  echo "installing nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm into $DIR" >&2
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$DIR/wheels" \
    nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm >&2
  mkdir -p "$DIR/bin"
  for tool in cuobjdump nvdisasm; do
    ln -sf "$(find "$DIR/wheels" -name "$tool" -type f | head -1)" "$DIR/bin/$tool"
    chmod +x "$DIR/bin/$tool"
  done
fi
echo "$DIR/bin"
