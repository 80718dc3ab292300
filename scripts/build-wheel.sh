#!/usr/bin/env bash
# The Python package as a wheel that installs without Rust: abi3 (one wheel
# for CPython 3.9 and later) and manylinux2014 (glibc 2.17 and later: zig
# links it against that glibc), carrying the `twobs` command. maturin and zig
# come from PyPI into target/wheel-tools. Prints the wheel's path last.
#
#   scripts/build-wheel.sh                  # release, into target/wheels
#   scripts/build-wheel.sh --profile dev    # what scripts/test-python.sh tests
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS="${TWOBS_WHEEL_TOOLS:-$PWD/target/wheel-tools}"
REQUIREMENTS=("maturin>=1.9,<2" "ziglang==0.13.0.post1")
source scripts/venv.sh
venv_with "$TOOLS" "${REQUIREMENTS[@]}"
OUT="$PWD/target/wheels"
rm -f "$OUT"/twobs-*.whl
# maturin finds zig through the tools' python (python -m ziglang).
PATH="$TOOLS/bin:$PATH" maturin build --locked --quiet --zig --compatibility manylinux2014 --out "$OUT" "$@" >&2
ls "$OUT"/twobs-*.whl
