#!/usr/bin/env bash
# Builds what the GPU machine runs (it has no Rust toolchain): the release
# binary, target/release/twobs, and the parity suite, target/release/parity
# (tests/parity.rs), and target/release/kernels (tests/kernels.rs). Carry all three:
# `carry: ["target/release/twobs", "target/release/parity", "target/release/kernels"]`.
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
ls -l target/release/twobs target/release/parity target/release/kernels
