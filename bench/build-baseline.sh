#!/usr/bin/env bash
# Builds twobs at another commit, for a benchmark beside this one
# (BINARIES=before=target/baseline/<commit>/twobs,after=target/release/twobs
# bench/kernels.py): a worktree under target/, its own target folder.
# Carry the binary to the device with `carry: ["target/baseline/<commit>/twobs", ...]`.
# Usage: bench/build-baseline.sh COMMIT   (say 84cb172, the oldest
# binary the docs compare with)
set -euo pipefail
cd "$(dirname "$0")/.."
commit=$(git rev-parse --short "${1:?COMMIT}")
tree="target/baseline/$commit/src-tree"
if [[ ! -d "$tree" ]]; then
  git worktree add --detach "$tree" "$commit"
fi
(cd "$tree" && cargo build --release --locked)
cp "$tree/target/release/twobs" "target/baseline/$commit/twobs"
ls -l "target/baseline/$commit/twobs"
