#!/usr/bin/env bash
# Builds what the GPU machine runs (it has no Rust toolchain): the release
# binary, target/release/twobs, and the parity suite, target/release/parity
# (tests/parity.rs), and target/release/kernels (tests/kernels.rs). Carry all three:
# `carry: ["target/release/twobs", "target/release/parity", "target/release/kernels"]`.
# And the Python package's wheel (one abi3 wheel for every CPython from 3.9),
# target/wheels/twobs-*.whl, for the device scripts that run Python
# (scripts/gpu-suite.sh python, bench/python.sh: carry "target/wheels").
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked
# The test binaries the device runs: the parity suite, and the kernels'
# NVRTC matrix (every variant there; CI compiles a representative set).
for test in parity kernels; do
  exe=$(cargo test --release --locked --test "$test" --no-run --message-format=json 2>/dev/null |
    TEST="$test" python3 -c 'import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == os.environ["TEST"]:
        print(m["executable"])')
  cp "$exe" "target/release/$test"
done
# The wheel, by the maturin of the Python tests' environment (scripts/test-python.sh makes it).
VENV="${TWOBS_PY_VENV:-$PWD/target/py-venv}"
if [[ ! -x "$VENV/bin/maturin" ]]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.9,<2"
fi
rm -f target/wheels/twobs-*.whl
"$VENV/bin/maturin" build --release --locked --quiet --out target/wheels
ls -l target/release/twobs target/release/parity target/release/kernels target/wheels/twobs-*.whl
